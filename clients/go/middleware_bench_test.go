package ratelimit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// The net/http middleware's hot path against a real redis-server with the
// module: admitted (a round trip a request) and denied (the denial cache).
// go test -run XXX -bench Middleware -benchmem (-memprofile, -cpuprofile).
func BenchmarkMiddleware(b *testing.B) {
	redis := servers.Start(b, servers.Options{})
	for _, c := range []struct {
		path  string
		limit int64
		want  int
	}{{"admitted", 1_000_000_000, 200}, {"denied", 1, 429}} {
		b.Run(c.path, func(b *testing.B) {
			l := httpLimiter(b, redis, ratelimit.Options[*http.Request]{Prefix: c.path + ":",
				Limits: []ratelimit.Limit[*http.Request]{{Name: "per-ip", Limit: c.limit, Rate: float64(c.limit) / 3600}}})
			mw, err := ratelimit.Middleware(l, ratelimit.MiddlewareOptions{})
			if err != nil {
				b.Fatal(err)
			}
			handler := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			handler.ServeHTTP(httptest.NewRecorder(), req) // the denied path's one admitted request
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w := httptest.NewRecorder()
				handler.ServeHTTP(w, req)
				if w.Code != c.want {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
