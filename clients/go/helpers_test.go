package ratelimit_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// keyed is a key function that keys every request by the request itself (a string).
func keyed(_ context.Context, req string) (string, error) { return req, nil }

// clientOf is a goredis client for s, closed by the limiter.
func clientOf(t testing.TB, s *servers.Server) ratelimit.Client {
	t.Helper()
	app := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer app.Close()
	client, err := goredis.New(app)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// newLimiter makes a limiter over s keyed by the request string, closed when the test ends.
func newLimiter(t testing.TB, s *servers.Server, opts ratelimit.Options[string]) *ratelimit.Limiter[string] {
	t.Helper()
	if opts.Key == nil {
		opts.Key = keyed
	}
	l, err := ratelimit.New(clientOf(t, s), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func check(t testing.TB, l *ratelimit.Limiter[string], req string) *ratelimit.Decision {
	t.Helper()
	d, err := l.Check(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// limitOf is the decision's part for the limit named name.
func limitOf(t testing.TB, d *ratelimit.Decision, name string) ratelimit.LimitDecision {
	t.Helper()
	l, ok := d.Limit(name)
	if !ok {
		t.Fatalf("no limit %q in %+v", name, d)
	}
	return l
}
