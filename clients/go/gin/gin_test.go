package gin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	rlgin "github.com/redis-ratelimit/redis-ratelimit/clients/go/gin"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/adaptertest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

func TestGin(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter[*http.Request]{
		Key: ratelimit.ByIP(ratelimit.IPOptions{}),
		Serve: func(t *testing.T, l *ratelimit.Limiter[*http.Request], s adaptertest.Setup, app *adaptertest.App) string {
			opts := rlgin.Options{HTTPOptions: s.HTTP}
			if s.Skip {
				opts.Skip = func(c *gin.Context) bool { return c.Request.URL.Path == "/healthz" }
			}
			if s.Custom {
				opts.Handler = func(c *gin.Context, d *ratelimit.Decision) {
					c.String(http.StatusTeapot, "later, "+d.Limits[0].Name)
				}
			}
			if s.OnError {
				opts.OnError = func(c *gin.Context, err error) { c.String(http.StatusUnauthorized, err.Error()) }
			}
			mw, err := rlgin.Middleware(l, opts)
			if err != nil {
				t.Fatal(err)
			}
			router := gin.New()
			router.Use(mw)
			ok := func(c *gin.Context) { c.String(http.StatusOK, "ok") }
			router.GET("/", ok)
			router.GET("/healthz", ok)
			router.GET("/fail", func(c *gin.Context) { c.String(http.StatusBadGateway, "no") })
			router.GET("/decision", func(c *gin.Context) { c.String(http.StatusOK, adaptertest.Decision(rlgin.FromContext(c))) })
			router.GET("/slow", func(c *gin.Context) { app.Slow(); ok(c) })
			server := httptest.NewServer(router)
			t.Cleanup(server.Close)
			return server.URL
		},
	})
}

// Two limiters in one chain: the lists grow by each one's members.
func TestGinTwoLimiters(t *testing.T) {
	m := adaptertest.Modes[0]
	redis := m.Start(t)
	router := gin.New()
	for _, name := range []string{"burst", "daily"} {
		l := adaptertest.Limiter(t, redis, m, ratelimit.Options[*http.Request]{Limits: []ratelimit.Limit[*http.Request]{{Name: name, Algorithm: ratelimit.FixedWindow, Limit: 10, Window: 60}}})
		mw, err := rlgin.Middleware(l, rlgin.Options{})
		if err != nil {
			t.Fatal(err)
		}
		router.Use(mw)
	}
	router.GET("/", func(c *gin.Context) { io.WriteString(c.Writer, "ok") })
	server := httptest.NewServer(router)
	defer server.Close()
	r := adaptertest.Get(t, server.URL)
	if r.Header.Get("RateLimit-Policy") != `"burst";q=10;w=60, "daily";q=10;w=60` {
		t.Fatalf("%+v", r)
	}
	if _, err := rlgin.Middleware(nil, rlgin.Options{}); err == nil || err.Error() != "limiter: required" {
		t.Fatalf("no limiter: %v", err)
	}
}
