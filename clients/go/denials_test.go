package ratelimit_test

import (
	"context"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// After Redis denies, the same key and limits are denied in process until
// the retry time, counted down, without a call: a key reset in Redis meanwhile is not seen.
func TestDenialsAnsweredInProcess(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	var costs = map[string]int64{"k": 1, "k-big": 2}
	l := newLimiter(t, redis, ratelimit.Options[string]{Limits: []ratelimit.Limit[string]{{
		Name: "n", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: 3,
		Key:      func(_ context.Context, req string) (string, error) { return "k", nil },
		CostFunc: func(_ context.Context, req string) (int64, error) { return costs[req], nil },
	}}})
	check(t, l, "k")
	check(t, l, "k")
	denied := check(t, l, "k")
	if denied.Allowed || denied.Outcome != ratelimit.OutcomeDenied || denied.RetryAfterMs < 2500 {
		t.Fatalf("%+v", denied)
	}
	redis.Do("DEL", "ratelimit:{k}:n") // a reset elsewhere: the cache is stricter than Redis until it runs out
	time.Sleep(300 * time.Millisecond)
	cached := check(t, l, "k")
	if cached.Allowed || cached.Outcome != ratelimit.OutcomeDeniedInProcess || cached.RetryAfterMs > denied.RetryAfterMs-250 || cached.Limits[0].Remaining != 0 {
		t.Fatalf("cached: %+v (denied with %d)", cached, denied.RetryAfterMs)
	}
	if d := check(t, l, "k-big"); d.Outcome != ratelimit.OutcomeDeniedInProcess {
		t.Fatalf("a larger cost: %+v", d)
	}
	if d := check(t, l, "k-zero"); !d.Allowed || d.Outcome != ratelimit.OutcomeAllowed {
		t.Fatalf("a smaller cost goes to Redis: %+v", d)
	}
	time.Sleep(time.Duration(cached.RetryAfterMs+50) * time.Millisecond)
	if d := check(t, l, "k"); !d.Allowed {
		t.Fatalf("after the retry time: %+v", d)
	}
}

// NoDenialCache turns it off; a never admissible denial is kept a second.
func TestDenialCacheOptions(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	off := newLimiter(t, redis, ratelimit.Options[string]{DenialCache: ratelimit.NoDenialCache, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: 3600})})
	check(t, off, "k")
	for i := 0; i < 3; i++ {
		if d := check(t, off, "k"); d.Outcome != ratelimit.OutcomeDenied {
			t.Fatalf("%+v", d)
		}
	}
	never := newLimiter(t, redis, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Limit: 1, Rate: 1, Cost: 2})})
	if d := check(t, never, "n"); d.Outcome != ratelimit.OutcomeDenied || !d.NeverAllowed {
		t.Fatalf("%+v", d)
	}
	if d := check(t, never, "n"); d.Outcome != ratelimit.OutcomeDeniedInProcess || !d.NeverAllowed || d.RetryAfterMs != -1 {
		t.Fatalf("%+v", d)
	}
	time.Sleep(1100 * time.Millisecond)
	if d := check(t, never, "n"); d.Outcome != ratelimit.OutcomeDenied {
		t.Fatalf("after a second: %+v", d)
	}
}

// The cache is bounded: the least recently used denial goes first.
func TestDenialCacheBounded(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{DenialCache: 2, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: 3600})})
	for _, k := range []string{"a", "b", "c"} {
		check(t, l, k)
		check(t, l, k) // denied, remembered
	}
	for _, c := range []struct {
		key  string
		want ratelimit.Outcome
	}{{"b", ratelimit.OutcomeDeniedInProcess}, {"c", ratelimit.OutcomeDeniedInProcess}, {"a", ratelimit.OutcomeDenied}} {
		if d := check(t, l, c.key); d.Outcome != c.want {
			t.Fatalf("%s: %s, want %s", c.key, d.Outcome, c.want)
		}
	}
}
