// Package adaptertest is the one test every HTTP framework adapter passes:
// the same app behind each framework's middleware, on a real server on a
// free port, against a real redis-server with the module (module mode)
// and one without it (script mode), asserting the exact headers, bodies
// and statuses of docs/clients.md, and that a concurrency slot stays held
// while a handler runs after its client left.
package adaptertest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// Mode is a way to reach the limits: the module, or the Lua library on a Redis without it.
type Mode struct {
	Name     string
	NoModule bool
	Mode     ratelimit.Mode
}

// Modes are module mode and script mode.
var Modes = []Mode{{"module", false, ratelimit.Module}, {"script", true, ratelimit.Script}}

// Start starts a redis-server for m (stopped when the test ends).
func (m Mode) Start(t testing.TB) *servers.Server {
	return servers.Start(t, servers.Options{NoModule: m.NoModule})
}

// Client is a ratelimit.Client over go-redis for s; the limiter closes it.
func Client(t testing.TB, s *servers.Server) ratelimit.Client {
	t.Helper()
	app := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer app.Close()
	client, err := goredis.New(app)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// Limiter is a limiter over s in mode m, closed when the test ends.
func Limiter[R any](t testing.TB, s *servers.Server, m Mode, opts ratelimit.Options[R]) *ratelimit.Limiter[R] {
	t.Helper()
	opts.Mode = m.Mode
	l, err := ratelimit.New(Client(t, s), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// App is what every adapter's test server serves behind its middleware:
//
//	GET /         200 "ok"
//	GET /healthz  200 "ok"; Setup.Skip skips it
//	GET /fail     502 "no"
//	GET /decision 200 "<first limit's name> <outcome>", the decision read
//	              with the adapter's own FromContext
//	GET /slow     200 "ok" once Finish is called; App counts them at once
type App struct {
	mu      sync.Mutex
	running int
	most    int
	entered chan struct{}
	finish  chan struct{}
	ended   sync.Once
	done    sync.WaitGroup
}

// Finish lets every /slow handler return.
func (a *App) Finish() { a.ended.Do(func() { close(a.finish) }) }

func newApp() *App {
	return &App{entered: make(chan struct{}, 16), finish: make(chan struct{})}
}

// Slow is the /slow handler's work: it runs until Finish, whatever its client does.
func (a *App) Slow() {
	a.mu.Lock()
	a.running++
	a.most = max(a.most, a.running)
	a.done.Add(1)
	a.mu.Unlock()
	a.entered <- struct{}{}
	<-a.finish
	a.mu.Lock()
	a.running--
	a.mu.Unlock()
	a.done.Done()
}

// Decision is the /decision handler's body.
func Decision(d *ratelimit.Decision) string {
	if d == nil || len(d.Limits) == 0 {
		return "no decision"
	}
	return d.Limits[0].Name + " " + string(d.Outcome)
}

// Setup is how the adapter's middleware is made for one test.
type Setup struct {
	HTTP ratelimit.HTTPOptions
	// Skip: a Skip option that skips /healthz.
	Skip bool
	// Custom: a Handler that answers 418 "later, <first limit's name>".
	Custom bool
	// OnError: an OnError option that answers 401 "<the error>".
	OnError bool
}

// Adapter is one framework's middleware under test.
type Adapter[R any] struct {
	// Key keys a request by its client address (the limiter's Key).
	Key ratelimit.KeyFunc[R]
	// Serve serves app behind the middleware over l made as s says, on a
	// real server on a free port, stopped when the test ends; its base URL.
	Serve func(t *testing.T, l *ratelimit.Limiter[R], s Setup, app *App) string
}

// Response is one response, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Get requests url; the test fails when there is no response.
func Get(t testing.TB, url string) Response {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return Response{res.StatusCode, res.Header, string(body)}
}

const (
	denied = `{"error":"rate_limit_exceeded","message":"Rate limit exceeded. Please try again later.","retry_after_seconds":60}`
	never  = `{"error":"rate_limit_exceeded","message":"This request costs more than the rate limit allows in total; it can never be admitted.","retry_after_seconds":null}`
	json   = "application/json; charset=utf-8"
)

// Run runs every case against a, in module mode and in script mode.
func Run[R any](t *testing.T, a Adapter[R]) {
	for _, m := range Modes {
		t.Run(m.Name, func(t *testing.T) {
			redis := m.Start(t)
			prefix := 0
			// serve makes a limiter of limits (keys under a prefix of their own) and serves it.
			serve := func(t *testing.T, limits []ratelimit.Limit[R], s Setup, opts ...func(*ratelimit.Options[R])) (string, *App, string) {
				prefix++
				o := ratelimit.Options[R]{Limits: limits, Key: a.Key, Prefix: "t" + strconv.Itoa(prefix) + ":"}
				for _, f := range opts {
					f(&o)
				}
				app := newApp()
				return a.Serve(t, Limiter(t, redis, m, o), s, app), app, o.Prefix
			}
			perIP := func(algorithm ratelimit.Algorithm, limit int64, window float64) []ratelimit.Limit[R] {
				return []ratelimit.Limit[R]{{Name: "per-ip", Algorithm: algorithm, Limit: limit, Window: window}}
			}

			t.Run("denies", func(t *testing.T) {
				url, _, prefix := serve(t, perIP(ratelimit.SlidingLog, 2, 60), Setup{})
				for i, remaining := range []string{"1", "0"} {
					r := Get(t, url+"/")
					if r.Status != 200 || r.Body != "ok" || r.Header.Get("RateLimit-Policy") != `"per-ip";q=2;w=60` || r.Header.Get("RateLimit") != `"per-ip";r=`+remaining+`;t=60` || r.Header.Get("Retry-After") != "" {
						t.Fatalf("request %d: %+v", i, r)
					}
				}
				r := Get(t, url+"/")
				if r.Status != 429 || r.Header.Get("Retry-After") != "60" || r.Header.Get("RateLimit") != `"per-ip";r=0;t=60` ||
					r.Header.Get("RateLimit-Policy") != `"per-ip";q=2;w=60` || r.Header.Get("Content-Type") != json || r.Body != denied {
					t.Fatalf("denied: %+v", r)
				}
				if got := redis.Do("EXISTS", prefix+"{ip:127.0.0.1}:per-ip"); got != "1" {
					t.Fatalf("not keyed by the client's address: EXISTS %s", got)
				}
			})

			t.Run("headers", func(t *testing.T) {
				url, _, _ := serve(t, perIP(ratelimit.SlidingLog, 1, 60), Setup{HTTP: ratelimit.HTTPOptions{Headers: ratelimit.HeadersDraft6}})
				if r := Get(t, url+"/"); r.Status != 200 || r.Header.Get("RateLimit-Limit") != "1" || r.Header.Get("RateLimit-Remaining") != "0" || r.Header.Get("RateLimit-Reset") != "60" || r.Header.Get("RateLimit") != "" {
					t.Fatalf("draft-6: %+v", r)
				}
				if r := Get(t, url+"/"); r.Status != 429 || r.Header.Get("RateLimit-Reset") != "60" || r.Header.Get("Retry-After") != "60" || r.Body != denied {
					t.Fatalf("draft-6 denied: %+v", r)
				}
				url, _, _ = serve(t, perIP(ratelimit.FixedWindow, 1, 60), Setup{HTTP: ratelimit.HTTPOptions{Headers: ratelimit.HeadersLegacy}})
				before := time.Now().Unix()
				r := Get(t, url+"/")
				after := time.Now().Unix()
				reset, _ := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
				if r.Status != 200 || r.Header.Get("X-RateLimit-Limit") != "1" || r.Header.Get("X-RateLimit-Remaining") != "0" || reset < before || reset > after+61 {
					t.Fatalf("legacy: %+v", r)
				}
				url, _, _ = serve(t, perIP(ratelimit.SlidingLog, 1, 60), Setup{HTTP: ratelimit.HTTPOptions{Headers: ratelimit.HeadersNone}})
				if r := Get(t, url+"/"); r.Status != 200 || len(rateLimitFields(r.Header)) != 0 {
					t.Fatalf("none: %+v", r)
				}
				if r := Get(t, url+"/"); r.Status != 429 || r.Header.Get("Retry-After") != "60" || len(rateLimitFields(r.Header)) != 1 {
					t.Fatalf("none denied: %+v", r)
				}
			})

			t.Run("never admissible", func(t *testing.T) {
				url, _, _ := serve(t, []ratelimit.Limit[R]{{Name: "per-ip", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: 60, Cost: 3}}, Setup{})
				if r := Get(t, url+"/"); r.Status != 429 || r.Header.Get("Retry-After") != "" || r.Header.Get("RateLimit") != `"per-ip";r=2` || r.Body != never {
					t.Fatalf("%+v", r)
				}
			})

			t.Run("status, message and skip", func(t *testing.T) {
				url, _, _ := serve(t, perIP(ratelimit.SlidingLog, 1, 60), Setup{HTTP: ratelimit.HTTPOptions{StatusCode: 503, Message: "Easy."}, Skip: true})
				Get(t, url+"/")
				if r := Get(t, url+"/"); r.Status != 503 || r.Body != `{"error":"rate_limit_exceeded","message":"Easy.","retry_after_seconds":60}` {
					t.Fatalf("%+v", r)
				}
				for i := 0; i < 3; i++ {
					if r := Get(t, url+"/healthz"); r.Status != 200 || r.Body != "ok" || r.Header.Get("RateLimit") != "" {
						t.Fatalf("skipped: %+v", r)
					}
				}
			})

			t.Run("custom handler", func(t *testing.T) {
				url, _, _ := serve(t, perIP(ratelimit.SlidingLog, 1, 60), Setup{Custom: true})
				Get(t, url+"/")
				if r := Get(t, url+"/"); r.Status != http.StatusTeapot || r.Body != "later, per-ip" || r.Header.Get("Retry-After") != "60" {
					t.Fatalf("%+v", r)
				}
			})

			t.Run("skip failed requests", func(t *testing.T) {
				url, _, _ := serve(t, perIP(ratelimit.SlidingLog, 2, 60), Setup{HTTP: ratelimit.HTTPOptions{SkipFailedRequests: true}})
				for i := 0; i < 4; i++ {
					if r := Get(t, url+"/fail"); r.Status != http.StatusBadGateway || r.Header.Get("RateLimit") != `"per-ip";r=1;t=60` {
						t.Fatalf("failed request %d: %+v", i, r)
					}
				}
				for _, remaining := range []string{"1", "0"} {
					if r := Get(t, url+"/"); r.Status != 200 || r.Header.Get("RateLimit") != `"per-ip";r=`+remaining+`;t=60` {
						t.Fatalf("%+v", r)
					}
				}
				url, _, _ = serve(t, perIP(ratelimit.SlidingLog, 2, 60), Setup{HTTP: ratelimit.HTTPOptions{SkipSuccessfulRequests: true}})
				for i := 0; i < 3; i++ {
					if r := Get(t, url+"/"); r.Status != 200 || r.Header.Get("RateLimit") != `"per-ip";r=1;t=60` {
						t.Fatalf("successful request %d: %+v", i, r)
					}
				}
			})

			t.Run("decision in context", func(t *testing.T) {
				url, _, _ := serve(t, perIP(ratelimit.SlidingLog, 5, 60), Setup{})
				if r := Get(t, url+"/decision"); r.Body != "per-ip allowed" {
					t.Fatalf("%+v", r)
				}
			})

			t.Run("server error", func(t *testing.T) {
				url, _, prefix := serve(t, perIP(ratelimit.SlidingLog, 2, 60), Setup{})
				redis.Do("SET", prefix+"{ip:127.0.0.1}:per-ip", "not a limiter")
				if r := Get(t, url+"/"); r.Status != 500 || r.Header.Get("RateLimit") != "" {
					t.Fatalf("%+v", r)
				}
				url, _, prefix = serve(t, perIP(ratelimit.SlidingLog, 2, 60), Setup{OnError: true})
				redis.Do("SET", prefix+"{ip:127.0.0.1}:per-ip", "not a limiter")
				if r := Get(t, url+"/"); r.Status != 401 || !strings.HasPrefix(r.Body, "WRONGTYPE ") {
					t.Fatalf("OnError: %+v", r)
				}
			})

			t.Run("closed while Redis is away", func(t *testing.T) {
				gone := m.Start(t)
				o := ratelimit.Options[R]{Limits: perIP(ratelimit.SlidingLog, 2, 60), Key: a.Key, OnUnavailable: ratelimit.Closed, Timeout: 500 * time.Millisecond}
				app := newApp()
				url := a.Serve(t, Limiter(t, gone, m, o), Setup{}, app)
				gone.Kill()
				if r := Get(t, url+"/"); r.Status != 503 || r.Body != `{"error":"rate_limiter_unavailable"}` || r.Header.Get("Content-Type") != json {
					t.Fatalf("%+v", r)
				}
			})

			t.Run("slot held until the handler returns", func(t *testing.T) {
				url, app, prefix := serve(t, []ratelimit.Limit[R]{{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 1, Lease: 30}}, Setup{})
				t.Cleanup(app.Finish) // a failure must not leave a handler (and its server) waiting
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/slow", nil)
				aborted := make(chan struct{})
				go func() {
					defer close(aborted)
					if res, err := http.DefaultClient.Do(req); err == nil {
						res.Body.Close()
					}
				}()
				<-app.entered
				cancel() // the client leaves; its handler goes on
				<-aborted
				time.Sleep(100 * time.Millisecond)
				for i := 0; i < 3; i++ {
					if r := Get(t, url+"/"); r.Status != 429 || r.Header.Get("RateLimit-Policy") != `"inflight";q=1;qu="concurrent-requests"` || r.Header.Get("Retry-After") != "1" {
						t.Fatalf("while the slow handler runs: %+v", r)
					}
				}
				app.Finish()
				app.done.Wait()
				for i := 0; ; i++ { // the release follows the handler's return
					r := Get(t, url+"/")
					if r.Status == 200 {
						if r.Header.Get("RateLimit") != `"inflight";r=0;t=30` {
							t.Fatalf("%+v", r)
						}
						break
					}
					if i == 50 {
						t.Fatal("the slot was not released")
					}
					time.Sleep(20 * time.Millisecond)
				}
				app.mu.Lock()
				most := app.most
				app.mu.Unlock()
				if most != 1 {
					t.Fatalf("%d handlers at once", most)
				}
				for i := 0; redis.Do("EXISTS", prefix+"{ip:127.0.0.1}:inflight") != "0"; i++ {
					if i == 50 {
						t.Fatal("a lease is still held")
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		})
	}
}

// rateLimitFields are the rate-limit fields of h (Retry-After included).
func rateLimitFields(h http.Header) []string {
	var names []string
	for _, name := range []string{"RateLimit", "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if h.Get(name) != "" {
			names = append(names, name)
		}
	}
	return names
}
