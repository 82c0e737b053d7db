package main

import (
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// Each variant's handler in process, one request at a time, on Redis
// servers the benchmark starts (ours-script on one without the module):
// ns/op and allocations, and the CPU this process and Redis use a request
// (app-cpu-ns/op, redis-cpu-ns/op), side by side in one run.
//
//	go test -run XXX -bench Apps -benchmem (-cpuprofile, -memprofile)
func BenchmarkApps(b *testing.B) {
	module := servers.Start(b, servers.Options{})
	plain := servers.Start(b, servers.Options{NoModule: true})
	for _, path := range []string{"admitted", "denied"} {
		want := http.StatusOK
		if path == "denied" {
			want = http.StatusTooManyRequests
		}
		for _, variant := range []string{"ours", "ours-script", "redis_rate", "ulule", "httprate"} {
			server := module
			if variant == "ours-script" {
				server = plain
			}
			b.Run(path+"/"+variant, func(b *testing.B) {
				server.Do("FLUSHALL")
				rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
				defer rdb.Close()
				handler, closeLimiter, err := limited(variant, rdb, limitOf(path), ok)
				if err != nil {
					b.Fatal(err)
				}
				defer closeLimiter()
				servers.BenchHandler(b, server, handler, want)
			})
		}
	}
}
