package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// httpLimiter is a limiter of *http.Request over s (closed when the test ends).
func httpLimiter(t testing.TB, s *servers.Server, opts ratelimit.Options[*http.Request]) *ratelimit.Limiter[*http.Request] {
	t.Helper()
	l, err := ratelimit.New(clientOf(t, s), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// serve runs handler behind the middleware on a real HTTP server.
func serve(t testing.TB, l *ratelimit.Limiter[*http.Request], opts ratelimit.MiddlewareOptions, handler http.Handler) *httptest.Server {
	t.Helper()
	mw, err := ratelimit.Middleware(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	if handler == nil {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	}
	server := httptest.NewServer(mw(handler))
	t.Cleanup(server.Close)
	return server
}

type response struct {
	status int
	header http.Header
	body   string
}

func get(t testing.TB, url string, header ...string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, string(body)}
}

func perIP(algorithm ratelimit.Algorithm, limit int64, window float64) []ratelimit.Limit[*http.Request] {
	return []ratelimit.Limit[*http.Request]{{Name: "per-ip", Algorithm: algorithm, Limit: limit, Window: window}}
}

// Admitted, then the 429 of the spec: headers on both, the JSON body, Retry-After.
func TestMiddlewareDenies(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 2, 60)})
	server := serve(t, l, ratelimit.MiddlewareOptions{}, nil)
	for i, remaining := range []string{"1", "0"} {
		r := get(t, server.URL)
		if r.status != 200 || r.body != "ok" || r.header.Get("RateLimit-Policy") != `"per-ip";q=2;w=60` || r.header.Get("RateLimit") != `"per-ip";r=`+remaining+`;t=60` {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	r := get(t, server.URL)
	if r.status != 429 || r.header.Get("Retry-After") != "60" || r.header.Get("RateLimit") != `"per-ip";r=0;t=60` ||
		r.header.Get("Content-Type") != "application/json; charset=utf-8" ||
		r.body != `{"error":"rate_limit_exceeded","message":"Rate limit exceeded. Please try again later.","retry_after_seconds":60}` {
		t.Fatalf("denied: %+v", r)
	}
	// The key was the client's address.
	if got := redis.Do("EXISTS", "ratelimit:{ip:127.0.0.1}:per-ip"); got != "1" {
		t.Fatalf("EXISTS %s", got)
	}
}

// Options of the answer: headers draft-6, status and message, Skip, Handler.
func TestMiddlewareOptions(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 1, 60)})
	server := serve(t, l, ratelimit.MiddlewareOptions{
		HTTPOptions: ratelimit.HTTPOptions{Headers: ratelimit.HeadersDraft6, StatusCode: 503, Message: "Easy."},
		Skip:        func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	}, nil)
	if r := get(t, server.URL); r.status != 200 || r.header.Get("RateLimit-Limit") != "1" || r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Reset") != "60" || r.header.Get("RateLimit") != "" {
		t.Fatalf("%+v", r)
	}
	if r := get(t, server.URL); r.status != 503 || r.body != `{"error":"rate_limit_exceeded","message":"Easy.","retry_after_seconds":60}` {
		t.Fatalf("%+v", r)
	}
	for i := 0; i < 3; i++ {
		if r := get(t, server.URL+"/healthz"); r.status != 200 || r.header.Get("RateLimit-Limit") != "" {
			t.Fatalf("skipped: %+v", r)
		}
	}

	l2 := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 1, 60), Prefix: "other:"})
	custom := serve(t, l2, ratelimit.MiddlewareOptions{Handler: func(w http.ResponseWriter, r *http.Request, d *ratelimit.Decision) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "later, "+d.Limits[0].Name)
	}}, nil)
	get(t, custom.URL)
	if r := get(t, custom.URL); r.status != http.StatusTeapot || r.body != "later, per-ip" || r.header.Get("Retry-After") != "60" {
		t.Fatalf("custom handler: %+v", r)
	}
	if _, err := ratelimit.Middleware(l, ratelimit.MiddlewareOptions{HTTPOptions: ratelimit.HTTPOptions{StatusCode: 200}}); err == nil || err.Error() != "statusCode: must be an HTTP error status 400..599 (got 200)" {
		t.Fatalf("status 200: %v", err)
	}
	if _, err := ratelimit.Middleware(l, ratelimit.MiddlewareOptions{HTTPOptions: ratelimit.HTTPOptions{Headers: "draft-7"}}); err == nil || err.Error() != `headers: must be "draft-10", "draft-6", "legacy" or "none" (got "draft-7")` {
		t.Fatalf("headers draft-7: %v", err)
	}
}

// SkipFailedRequests: a response of 400 and up gives its units back.
func TestMiddlewareSkipFailedRequests(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 2, 60)})
	server := serve(t, l, ratelimit.MiddlewareOptions{HTTPOptions: ratelimit.HTTPOptions{SkipFailedRequests: true}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fail" {
				http.Error(w, "no", http.StatusBadGateway)
			}
		}))
	for i := 0; i < 5; i++ {
		if r := get(t, server.URL+"/fail"); r.status != http.StatusBadGateway || r.header.Get("RateLimit") != `"per-ip";r=1;t=60` {
			t.Fatalf("failed request %d: %+v", i, r)
		}
	}
	if r := get(t, server.URL); r.status != 200 || r.header.Get("RateLimit") != `"per-ip";r=1;t=60` {
		t.Fatalf("%+v", r)
	}
	if r := get(t, server.URL); r.status != 200 || r.header.Get("RateLimit") != `"per-ip";r=0;t=60` {
		t.Fatalf("%+v", r)
	}
}

// A server error (an error reply, a key function's error) is a 500, never a pass.
func TestMiddlewareServerErrors(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 2, 60)})
	redis.Do("SET", "ratelimit:{ip:127.0.0.1}:per-ip", "not a limiter")
	server := serve(t, l, ratelimit.MiddlewareOptions{}, nil)
	if r := get(t, server.URL); r.status != 500 || r.body != "Internal Server Error\n" {
		t.Fatalf("%+v", r)
	}
	var seen error
	keyless := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 2, 60),
		Key: func(context.Context, *http.Request) (string, error) { return "", errors.New("no session") }})
	server = serve(t, keyless, ratelimit.MiddlewareOptions{OnError: func(w http.ResponseWriter, r *http.Request, err error) {
		seen = err
		w.WriteHeader(http.StatusUnauthorized)
	}}, nil)
	if r := get(t, server.URL); r.status != 401 || seen == nil || seen.Error() != `ratelimit: key of limit "per-ip": no session` {
		t.Fatalf("%+v %v", r, seen)
	}
}

// ByIP takes X-Forwarded-For only from the trusted proxies' end.
func TestMiddlewareTrustedProxies(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 5, 60), Key: ratelimit.ByIP(ratelimit.IPOptions{TrustedProxies: 1})})
	server := serve(t, l, ratelimit.MiddlewareOptions{}, nil)
	get(t, server.URL, "X-Forwarded-For", "198.51.100.9, 2001:db8:0:12ff::1")
	if got := redis.Do("EXISTS", "ratelimit:{ip6:2001:db8:0:1200::/56}:per-ip"); got != "1" {
		t.Fatal("not keyed by the address the proxy saw")
	}
	untrusted := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 5, 60), Prefix: "u:"})
	server = serve(t, untrusted, ratelimit.MiddlewareOptions{}, nil)
	get(t, server.URL, "X-Forwarded-For", "198.51.100.9")
	if got := redis.Do("KEYS", "u:*"); got != "u:{ip:127.0.0.1}:per-ip" {
		t.Fatalf("without a trusted proxy: %q", got)
	}
}

// The decision is in the handler's context.
func TestMiddlewareDecisionInContext(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: perIP(ratelimit.SlidingLog, 5, 60)})
	server := serve(t, l, ratelimit.MiddlewareOptions{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := ratelimit.FromContext(r.Context())
		io.WriteString(w, strings.Join([]string{d.Limits[0].Name, string(d.Outcome)}, " "))
	}))
	if r := get(t, server.URL); r.body != "per-ip allowed" {
		t.Fatalf("%+v", r)
	}
}
