// The server of make bench-go: net/http answering "ok" to GET /, every
// request limited per client address by one limiter, on the given Redis.
//
//	app <variant> <path> <redis address> <port>
//
// variant: none, ours (module mode), ours-script (script mode), redis_rate,
// ulule (ulule/limiter's Redis store and net/http middleware), httprate
// (go-chi/httprate with httprate-redis's counter). path: admitted (a limit
// no run reaches) or denied (1 an hour: every request after the first is
// refused). It prints "ready <address>" once it listens (port 0: a free one).
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/go-chi/httprate"
	httprateredis "github.com/go-chi/httprate-redis"
	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: app <variant> <admitted|denied> <redis address> <port>")
		os.Exit(2)
	}
	variant, path, addr, port := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	handler, _, err := limited(variant, rdb, limitOf(path), ok)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready", listener.Addr())
	http.Serve(listener, handler)
}

// ok is the app's handler.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })

// limitOf is the path's limit an hour: admitted, a limit no run reaches; denied, one request.
func limitOf(path string) int64 {
	if path == "admitted" {
		return 1_000_000_000
	}
	return 1
}

// limited is next behind the variant's limiter, and what closes the
// limiter's own connections (ours; the others use rdb's).
func limited(variant string, rdb *redis.Client, limit int64, next http.Handler) (http.Handler, func() error, error) {
	perHour := float64(limit) / 3600
	none := func() error { return nil }
	switch variant {
	case "none":
		return next, none, nil
	case "ours", "ours-script":
		client, err := goredis.New(rdb)
		if err != nil {
			return nil, nil, err
		}
		mode := ratelimit.Module
		if variant == "ours-script" {
			mode = ratelimit.Script
		}
		l, err := ratelimit.New(client, ratelimit.Options[*http.Request]{Mode: mode,
			Limits: []ratelimit.Limit[*http.Request]{{Name: "per-ip", Limit: limit, Rate: perHour}}})
		if err != nil {
			return nil, nil, err
		}
		mw, err := ratelimit.Middleware(l, ratelimit.MiddlewareOptions{})
		if err != nil {
			l.Close()
			return nil, nil, err
		}
		return mw(next), l.Close, nil
	case "redis_rate":
		return redisRate(redis_rate.NewLimiter(rdb), redis_rate.Limit{Rate: int(limit), Burst: int(limit), Period: time.Hour}, next), none, nil
	case "ulule":
		store, err := sredis.NewStoreWithOptions(rdb, limiter.StoreOptions{Prefix: "ulule"})
		if err != nil {
			return nil, nil, err
		}
		return stdlib.NewMiddleware(limiter.New(store, limiter.Rate{Period: time.Hour, Limit: limit})).Handler(next), none, nil
	case "httprate":
		return httprate.Limit(int(limit), time.Hour, httprate.WithKeyFuncs(httprate.KeyByIP),
			httprateredis.WithRedisLimitCounter(&httprateredis.Config{Client: rdb, FallbackDisabled: true}))(next), none, nil
	}
	return nil, nil, fmt.Errorf("unknown variant %q", variant)
}

// redisRate is the middleware a redis_rate user writes (it ships none):
// the client address as the key, the X-RateLimit fields, a 429 with Retry-After.
func redisRate(l *redis_rate.Limiter, limit redis_rate.Limit, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		res, err := l.Allow(context.WithoutCancel(r.Context()), "ip:"+host, limit)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(limit.Burst))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(res.Remaining))
		if res.Allowed == 0 {
			h.Set("Retry-After", strconv.Itoa(int(res.RetryAfter/time.Second)+1))
			http.Error(w, `{"error":"rate_limit_exceeded"}`, http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}
