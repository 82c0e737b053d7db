package ratelimit_test

import (
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

func fields(h ratelimit.Headers, d *ratelimit.Decision, now time.Time) map[string]string {
	out := map[string]string{}
	for _, f := range h.Fields(d, now) {
		out[f.Name] = f.Value
	}
	return out
}

func same(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %s is %q, want %q (all: %v)", what, k, got[k], v, got)
		}
	}
}

// docs/clients.md's example: a token bucket of 60 at 1/s, emptied, in each form.
func TestHeadersOfADenial(t *testing.T) {
	d := &ratelimit.Decision{RetryAfterMs: 1000, Limits: []ratelimit.LimitDecision{{
		Name: "default", Algorithm: ratelimit.TokenBucket, Limit: 60, Remaining: 0, RetryAfterMs: 1000, ResetAfterMs: 60000, Param: 1,
	}}}
	now := time.Unix(1764806400, 0)
	same(t, "draft-10", fields(ratelimit.HeadersDraft10, d, now), map[string]string{
		"RateLimit-Policy": `"default";q=60;w=60`, "RateLimit": `"default";r=0;t=1`, "Retry-After": "1"})
	same(t, "default", fields("", d, now), fields(ratelimit.HeadersDraft10, d, now))
	same(t, "draft-6", fields(ratelimit.HeadersDraft6, d, now), map[string]string{
		"RateLimit-Limit": "60", "RateLimit-Remaining": "0", "RateLimit-Reset": "1", "Retry-After": "1"})
	same(t, "legacy", fields(ratelimit.HeadersLegacy, d, now), map[string]string{
		"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1764806401", "Retry-After": "1"})
	same(t, "none", fields(ratelimit.HeadersNone, d, now), map[string]string{"Retry-After": "1"})
}

// Two limits, one member each, in the limiter's order.
func TestHeadersOfSeveralLimits(t *testing.T) {
	d := &ratelimit.Decision{Allowed: true, Limits: []ratelimit.LimitDecision{
		{Name: "burst", Algorithm: ratelimit.FixedWindow, Allowed: true, Limit: 10, Remaining: 9, ResetAfterMs: 400, Param: 10},
		{Name: "daily", Algorithm: ratelimit.SlidingLog, Allowed: true, Limit: 1000, Remaining: 999, ResetAfterMs: 86400000, Param: 86400},
	}}
	now := time.Unix(1764806400, 500e6)
	same(t, "draft-10", fields(ratelimit.HeadersDraft10, d, now), map[string]string{
		"RateLimit-Policy": `"burst";q=10;w=10, "daily";q=1000;w=86400`, "RateLimit": `"burst";r=9;t=1, "daily";r=999;t=86400`})
	// One limit, the closest to denial: the fewest remaining.
	same(t, "draft-6", fields(ratelimit.HeadersDraft6, d, now), map[string]string{
		"RateLimit-Limit": "10", "RateLimit-Remaining": "9", "RateLimit-Reset": "1"})
	same(t, "legacy", fields(ratelimit.HeadersLegacy, d, now), map[string]string{
		"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "9", "X-RateLimit-Reset": "1764806402"})
}

// A bucket's t is when the next whole unit is back; a fresh limiter has none;
// a concurrency limit has no w and its unit; a never admissible denial no t
// and no Retry-After; a quota unit is qu.
func TestHeaderValues(t *testing.T) {
	d := &ratelimit.Decision{Allowed: true, Limits: []ratelimit.LimitDecision{
		// 10 at 0.5/s, 7 left: 3 units away from full (6 s), the next back in 0.5..2 s.
		{Name: "b", Algorithm: ratelimit.TokenBucket, Allowed: true, Limit: 10, Remaining: 7, ResetAfterMs: 5001, Param: 0.5},
		{Name: "fresh", Algorithm: ratelimit.LeakyBucket, Allowed: true, Limit: 4, Remaining: 4, Param: 2},
		{Name: "c", Algorithm: ratelimit.Concurrency, Allowed: true, Limit: 10, Remaining: 9, ResetAfterMs: 29500, Param: 30, QuotaUnit: ratelimit.ConcurrentRequests},
		{Name: "bytes", Algorithm: ratelimit.TokenBucket, Allowed: true, Limit: 1000, Remaining: 1000, Param: 1000, QuotaUnit: ratelimit.ContentBytes},
	}}
	same(t, "draft-10", fields("", d, time.Now()), map[string]string{
		"RateLimit-Policy": `"b";q=10;w=20, "fresh";q=4;w=2, "c";q=10;qu="concurrent-requests", "bytes";q=1000;qu="content-bytes";w=1`,
		"RateLimit":        `"b";r=7;t=1, "fresh";r=4, "c";r=9;t=30, "bytes";r=1000`})
	never := &ratelimit.Decision{RetryAfterMs: -1, NeverAllowed: true, Limits: []ratelimit.LimitDecision{
		{Name: "default", Algorithm: ratelimit.FixedWindow, Limit: 5, Remaining: 5, RetryAfterMs: -1, Param: 60},
	}}
	same(t, "never", fields("", never, time.Now()), map[string]string{"RateLimit-Policy": `"default";q=5;w=60`, "RateLimit": `"default";r=5`})
	if body := string(ratelimit.DeniedBody(never, "")); body != `{"error":"rate_limit_exceeded","message":"This request costs more than the rate limit allows in total; it can never be admitted.","retry_after_seconds":null}` {
		t.Fatal(body)
	}
	denied := &ratelimit.Decision{RetryAfterMs: 29001}
	if body := string(ratelimit.DeniedBody(denied, `Slow down <&> "now"`)); body != `{"error":"rate_limit_exceeded","message":"Slow down <&> \"now\"","retry_after_seconds":30}` {
		t.Fatal(body)
	}
}
