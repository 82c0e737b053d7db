// An HTTP server behind the rate limiter: GET / admits each client IP 5
// times per 60-second fixed window (policy "per-ip"), GET /healthz is not
// limited. PORT (8080) and REDIS_URL (redis://127.0.0.1:6379) configure it;
// the module is used where Redis has it, else the Lua library (mode auto).
package main

import (
	"cmp"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
)

func main() {
	options, err := redis.ParseURL(cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379"))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(options)
	defer rdb.Close()
	client, err := goredis.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := ratelimit.New(client, ratelimit.Options[*http.Request]{
		Limits: []ratelimit.Limit[*http.Request]{
			{Name: "per-ip", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 60},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	limited, err := ratelimit.Middleware(limiter, ratelimit.MiddlewareOptions{})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.Handle("GET /{$}", limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	addr := ":" + cmp.Or(os.Getenv("PORT"), "8080")
	log.Printf("listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
