package fiber_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/goleak"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	rlfiber "github.com/redis-ratelimit/redis-ratelimit/clients/go/fiber"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/adaptertest"
)

func TestMain(m *testing.M) {
	// fasthttp keeps one goroutine for the whole process that updates the
	// Date it sends, and a stopped server's idle-worker cleaner sleeps out
	// its 10 s before it sees the stop.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// listen serves app on a free port until the test ends; its base URL.
func listen(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.Shutdown() })
	return "http://" + ln.Addr().String()
}

func TestFiber(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter[*fiber.Ctx]{
		Key: rlfiber.ByIP(ratelimit.IPOptions{}),
		Serve: func(t *testing.T, l *ratelimit.Limiter[*fiber.Ctx], s adaptertest.Setup, app *adaptertest.App) string {
			opts := rlfiber.Options{HTTPOptions: s.HTTP}
			if s.Skip {
				opts.Skip = func(c *fiber.Ctx) bool { return c.Path() == "/healthz" }
			}
			if s.Custom {
				opts.Handler = func(c *fiber.Ctx, d *ratelimit.Decision) error {
					return c.Status(http.StatusTeapot).SendString("later, " + d.Limits[0].Name)
				}
			}
			if s.OnError {
				opts.OnError = func(c *fiber.Ctx, err error) error { return c.Status(http.StatusUnauthorized).SendString(err.Error()) }
			}
			mw, err := rlfiber.Middleware(l, opts)
			if err != nil {
				t.Fatal(err)
			}
			f := fiber.New(fiber.Config{DisableStartupMessage: true})
			f.Use(mw)
			ok := func(c *fiber.Ctx) error { return c.SendString("ok") }
			f.Get("/", ok)
			f.Get("/healthz", ok)
			// A failed request as an error returned, for Fiber's error handler to answer.
			f.Get("/fail", func(c *fiber.Ctx) error { return fiber.NewError(http.StatusBadGateway, "no") })
			f.Get("/decision", func(c *fiber.Ctx) error { return c.SendString(adaptertest.Decision(rlfiber.FromContext(c))) })
			f.Get("/slow", func(c *fiber.Ctx) error { app.Slow(); return ok(c) })
			return listen(t, f)
		},
	})
}

// ByIP keys by what c.IP() gives: the proxy's header only when Fiber is
// told to trust the proxy the request came from.
func TestFiberTrustedProxies(t *testing.T) {
	m := adaptertest.Modes[0]
	redis := m.Start(t)
	for _, c := range []struct {
		name   string
		config fiber.Config
		key    string
	}{
		{"no proxy header", fiber.Config{}, "a:{ip:127.0.0.1}:per-ip"},
		{"an untrusted proxy", fiber.Config{ProxyHeader: fiber.HeaderXForwardedFor, EnableTrustedProxyCheck: true, TrustedProxies: []string{"10.0.0.1"}}, "b:{ip:127.0.0.1}:per-ip"},
		{"a trusted proxy", fiber.Config{ProxyHeader: fiber.HeaderXForwardedFor, EnableTrustedProxyCheck: true, TrustedProxies: []string{"127.0.0.1"}}, "c:{ip6:2001:db8:0:1200::/56}:per-ip"},
	} {
		l := adaptertest.Limiter(t, redis, m, ratelimit.Options[*fiber.Ctx]{
			Limits: []ratelimit.Limit[*fiber.Ctx]{{Name: "per-ip", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: 60}},
			Key:    rlfiber.ByIP(ratelimit.IPOptions{}), Prefix: c.key[:2]})
		mw, err := rlfiber.Middleware(l, rlfiber.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.config.DisableStartupMessage = true
		app := fiber.New(c.config)
		app.Use(mw)
		app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
		req, _ := http.NewRequest(http.MethodGet, listen(t, app)+"/", nil)
		req.Header.Set("X-Forwarded-For", "2001:db8:0:12ff::1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := redis.Do("KEYS", c.key[:2]+"*"); got != c.key {
			t.Fatalf("%s: keys %q, want %q", c.name, got, c.key)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("ByIP took trustedProxies")
		}
	}()
	rlfiber.ByIP(ratelimit.IPOptions{TrustedProxies: 1})
}
