package redisrate

import (
	"math"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Any limit and count is refused with an error or gives a rate the module
// takes; any reply of the bucket becomes a Result without a panic, with
// its waits never negative.
func FuzzLimit(f *testing.F) {
	f.Add(10, 10, int64(time.Second), 1, int64(5_000_000), true)
	f.Add(1, 1, int64(time.Hour), 3, int64(0), false)
	f.Add(0, 0, int64(0), -1, int64(-1), false)
	f.Add(1, 100, int64(math.MaxInt64), 0, int64(0), true) // waits past a Duration's 292 years
	f.Add(math.MaxInt, math.MaxInt, int64(1), math.MaxInt, int64(math.MaxInt64), true)
	f.Fuzz(func(t *testing.T, rate, burst int, period int64, n int, remaining int64, allowed bool) {
		limit := Limit{Rate: rate, Burst: burst, Period: time.Duration(period)}
		units, err := rateOf(limit, n)
		if err != nil {
			return
		}
		if units < 1e-6 || units > 1e12 || math.IsNaN(units) {
			t.Fatalf("%s: %v units a second", limit, units)
		}
		full := int64(burst) * unit
		if full > ratelimit.MaxInteger || float64(full)/units > 1e12+1 {
			t.Fatalf("%s: a bucket the module refuses", limit)
		}
		remaining = min(max(remaining, 0), full)
		part := ratelimit.LimitDecision{Remaining: remaining, Limit: full}
		var r *Result
		if allowed {
			r = admitted(limit, n, part, units)
			if r.RetryAfter != -1 || r.ResetAfter < 0 {
				t.Fatalf("%+v", r)
			}
		} else {
			r = denied(limit, max(int64(n)*unit, remaining), part, units)
			if r.RetryAfter < 0 || r.ResetAfter < 0 || r.Remaining != 0 {
				t.Fatalf("%+v", r)
			}
		}
	})
}
