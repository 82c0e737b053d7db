package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// A limit without a name is keyed by what it is, as docs/clients.md's table says.
func TestUnnamedKeys(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	cases := []struct {
		limit ratelimit.Limit[string]
		key   string
	}{
		{ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 60}, "ratelimit:{ip:203.0.113.7}:fixedwindow:5:60"},
		{ratelimit.Limit[string]{Limit: 10, Rate: 0.5}, "ratelimit:{ip:203.0.113.7}:tokenbucket:10:0.5"},
		{ratelimit.Limit[string]{Limit: 1000, Rate: 10, QuotaUnit: ratelimit.ContentBytes}, "ratelimit:{ip:203.0.113.7}:tokenbucket:1000:10:content-bytes"},
		{ratelimit.Limit[string]{Algorithm: ratelimit.Concurrency, Limit: 10, Lease: 30}, "ratelimit:{ip:203.0.113.7}:concurrency:10:30"},
		{ratelimit.Limit[string]{Algorithm: ratelimit.SlidingWindow, Limit: 7, Window: 1000.0000015}, "ratelimit:{ip:203.0.113.7}:slidingwindow:7:1000.000002"},
		{ratelimit.Limit[string]{Algorithm: ratelimit.LeakyBucket, Limit: 3, Rate: 1.0 / 3}, "ratelimit:{ip:203.0.113.7}:leakybucket:3:0.333333"},
	}
	for _, c := range cases {
		l := newLimiter(t, server, ratelimit.Options[string]{Limits: one(c.limit)})
		d := check(t, l, "ip:203.0.113.7")
		if !d.Allowed || d.Limits[0].Key != c.key || d.Limits[0].Name != "default" {
			t.Fatalf("%+v: got %+v, want key %s", c.limit, d.Limits[0], c.key)
		}
		if got := server.Do("TYPE", c.key); got != "ratelimit" {
			t.Fatalf("%s: TYPE %s", c.key, got)
		}
	}
}

// One RL.MULTI, all or nothing: a denial takes nothing from the other limits.
func TestSeveralLimitsAllOrNothing(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: []ratelimit.Limit[string]{
		{Name: "burst", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: 60},
		{Name: "daily", Algorithm: ratelimit.SlidingLog, Limit: 100, Window: 86400},
	}})
	for i, want := range []int64{1, 0} {
		d := check(t, l, "user:1")
		if !d.Allowed || limitOf(t, d, "burst").Remaining != want || limitOf(t, d, "daily").Remaining != 99-int64(i) {
			t.Fatalf("check %d: %+v", i, d)
		}
	}
	d := check(t, l, "user:1")
	burst, daily := limitOf(t, d, "burst"), limitOf(t, d, "daily")
	if d.Allowed || burst.Allowed || !daily.Allowed || daily.Remaining != 98 || burst.Remaining != 0 {
		t.Fatalf("denied: %+v", d)
	}
	if d.RetryAfterMs <= 59000 || d.RetryAfterMs > 60000 || burst.RetryAfterMs != d.RetryAfterMs || d.NeverAllowed {
		t.Fatalf("retry after %d (burst %d), want the log's oldest entry leaving in about 60 s", d.RetryAfterMs, burst.RetryAfterMs)
	}
	if got := server.Do("RL.PEEK", "ratelimit:{user:1}:daily", "SLIDINGLOG", "100", "86400", "*", "0"); !strings.HasPrefix(got, "1\n98\n100\n") {
		t.Fatalf("daily after the denial: %q", got)
	}
	// Someone else's budget is their own.
	if d := check(t, l, "user:2"); !d.Allowed || limitOf(t, d, "burst").Remaining != 1 {
		t.Fatalf("user:2: %+v", d)
	}
}

// A cost above the limit can never pass: -1.
func TestNeverAllowed(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Cost: 6})})
	d := check(t, l, "k")
	if d.Allowed || !d.NeverAllowed || d.RetryAfterMs != -1 || d.Limits[0].RetryAfterMs != -1 || d.Limits[0].Remaining != 5 {
		t.Fatalf("%+v", d)
	}
}

// A limit and a cost may be functions of the request: a quota per plan keys
// each plan's callers apart.
func TestPerRequestLimitAndCost(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	plans := map[string]int64{"free": 3, "pro": 30}
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{
		Algorithm: ratelimit.FixedWindow, Window: 3600,
		LimitFunc: func(_ context.Context, req string) (int64, error) { return plans[strings.Split(req, ":")[0]], nil },
		CostFunc: func(_ context.Context, req string) (int64, error) {
			return int64(len(strings.Split(req, ":")) - 1), nil
		},
	})})
	d := check(t, l, "pro:a:b")
	if !d.Allowed || d.Limits[0].Limit != 30 || d.Limits[0].Remaining != 28 || d.Limits[0].Cost != 2 || d.Limits[0].Key != "ratelimit:{pro:a:b}:fixedwindow:30:3600" {
		t.Fatalf("%+v", d.Limits[0])
	}
	if _, err := l.Check(context.Background(), "gold:x"); err == nil || err.Error() != `ratelimit: limit "default": LimitFunc gave 0: must be an integer from 1 to 9007199254740991 (and limit / rate at most 1e12 seconds)` {
		t.Fatalf("a bad per-request limit: %v", err)
	}
}

// Refunds are per policy name, at most the cost each took; a bad name is an error.
func TestRefund(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: []ratelimit.Limit[string]{
		{Name: "requests", Algorithm: ratelimit.SlidingLog, Limit: 10, Window: 3600},
		{Name: "tokens", Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: 86400, Cost: 100},
	}})
	ctx := context.Background()
	d := check(t, l, "u")
	if err := l.Refund(ctx, d, map[string]int64{"tokens": 40}); err != nil {
		t.Fatal(err)
	}
	peeked, err := l.Peek(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	// Peek answers as if the request were made (costs 1 and 100): 9 and 940 left now.
	if got := [2]int64{limitOf(t, peeked, "requests").Remaining, limitOf(t, peeked, "tokens").Remaining}; got != [2]int64{8, 840} || !peeked.Allowed {
		t.Fatalf("after refunding 40 tokens: %v", got)
	}
	if err := l.Refund(ctx, d, map[string]int64{"tokens": 1000}); err != nil { // at most the 100 it took
		t.Fatal(err)
	}
	peeked, _ = l.Peek(ctx, "u")
	if got := limitOf(t, peeked, "tokens").Remaining; got != 900 {
		t.Fatalf("tokens after refunding more than the cost: %d", got)
	}
	if err := l.Refund(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	peeked, _ = l.Peek(ctx, "u")
	if got := limitOf(t, peeked, "requests").Remaining; got != 9 {
		t.Fatalf("requests after refund(nil): %d", got)
	}
	for units, want := range map[string]string{
		"nope":     `ratelimit: refund: no limit named "nope" in this decision (it has "requests", "tokens")`,
		"negative": `ratelimit: refund: "tokens": units must be an integer from 0 to 9007199254740991 (got -1)`,
	} {
		arg := map[string]int64{units: 1}
		if units == "negative" {
			arg = map[string]int64{"tokens": -1}
		}
		if err := l.Refund(ctx, d, arg); err == nil || err.Error() != want {
			t.Fatalf("refund %v: %v", arg, err)
		}
	}
}

// Peek takes nothing and creates no key.
func TestPeek(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: 3600})})
	for i := 0; i < 3; i++ {
		d, err := l.Peek(context.Background(), "k")
		if err != nil || !d.Allowed || d.Limits[0].Remaining != 0 { // as if taken
			t.Fatalf("%+v %v", d, err)
		}
	}
	if got := server.Do("EXISTS", "ratelimit:{k}:fixedwindow:1:3600"); got != "0" {
		t.Fatalf("EXISTS: %s", got)
	}
	check(t, l, "k")
	d, _ := l.Peek(context.Background(), "k")
	if d.Allowed || d.Limits[0].Remaining != 0 || d.RetryAfterMs <= 0 {
		t.Fatalf("%+v", d)
	}
}

// An error reply is a server error, never a pass: the other mode's state,
// the module missing in mode module.
func TestErrorRepliesAreErrors(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Mode: ratelimit.Module, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Name: "n"})})
	server.Do("SET", "ratelimit:{k}:n", "rl1:tb:5000000000000:1")
	_, err := l.Check(context.Background(), "k")
	var mode *ratelimit.ModeError
	if !errors.As(err, &mode) || !strings.HasPrefix(err.Error(), "WRONGTYPE ratelimit:{k}:n holds a Redis string, not the redis-ratelimit module's state") {
		t.Fatalf("got %v", err)
	}
	var reply ratelimit.ReplyError
	if !errors.As(err, &reply) || reply.Code() != "WRONGTYPE" {
		t.Fatalf("the reply under it: %v", err)
	}

	bare := servers.Start(t, servers.Options{NoModule: true})
	l = newLimiter(t, bare, ratelimit.Options[string]{Mode: ratelimit.Module, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})})
	_, err = l.Check(context.Background(), "k")
	if !errors.As(err, &mode) || !strings.HasPrefix(err.Error(), "ERR the redis-ratelimit module is not loaded on this Redis (unknown command 'RL.TOKENBUCKET')") || errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
}

// Calls after Close fail with ErrClosed.
func TestClosed(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Check(context.Background(), "k"); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatalf("got %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}
