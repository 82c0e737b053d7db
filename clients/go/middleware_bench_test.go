package ratelimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// The hot path against a real redis-server with the module: admitted (a
// round trip a request) and denied (the denial cache), through the
// net/http middleware and Check alone, with the CPU this process and
// Redis use a request beside ns/op (servers.BenchHandler, CPUPerOp).
// go test -run XXX -bench 'Middleware|Check' -benchmem (-memprofile, -cpuprofile).
var hotPaths = []struct {
	path  string
	limit int64
	want  int
}{{"admitted", 1_000_000_000, 200}, {"denied", 1, 429}}

func hotLimiter(b *testing.B, redis *servers.Server, path string, limit int64) *ratelimit.Limiter[*http.Request] {
	return httpLimiter(b, redis, ratelimit.Options[*http.Request]{Prefix: path + ":",
		Limits: []ratelimit.Limit[*http.Request]{{Name: "per-ip", Limit: limit, Rate: float64(limit) / 3600}}})
}

func BenchmarkMiddleware(b *testing.B) {
	redis := servers.Start(b, servers.Options{})
	for _, c := range hotPaths {
		b.Run(c.path, func(b *testing.B) {
			redis.Do("FLUSHALL")
			mw, err := ratelimit.Middleware(hotLimiter(b, redis, c.path, c.limit), ratelimit.MiddlewareOptions{})
			if err != nil {
				b.Fatal(err)
			}
			servers.BenchHandler(b, redis, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })), c.want)
		})
	}
}

func BenchmarkCheck(b *testing.B) {
	redis := servers.Start(b, servers.Options{})
	for _, c := range hotPaths {
		b.Run(c.path, func(b *testing.B) {
			redis.Do("FLUSHALL")
			l := hotLimiter(b, redis, c.path, c.limit)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			ctx := context.Background()
			if _, err := l.Check(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			report := servers.CPUPerOp(b, redis)
			for i := 0; i < b.N; i++ {
				d, err := l.Check(ctx, req)
				if err != nil || d.Allowed != (c.want == 200) {
					b.Fatalf("%+v %v", d, err)
				}
			}
			b.StopTimer()
			report()
		})
	}
}
