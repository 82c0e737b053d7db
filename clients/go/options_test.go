package ratelimit_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// nowhere is a Client New accepts; the option tests never call it.
type nowhere struct{}

func (nowhere) Do(context.Context, string, ...string) (any, error) {
	return nil, errors.New("not called")
}
func (nowhere) DoLate(context.Context, string, func(any), ...string) (any, error) {
	return nil, errors.New("not called")
}
func (nowhere) Node(string) (string, uint64) { return "", 0 }
func (nowhere) Cluster() bool                { return false }
func (nowhere) Close() error                 { return nil }

func one(l ratelimit.Limit[string]) []ratelimit.Limit[string] { return []ratelimit.Limit[string]{l} }

func perPlan(context.Context, string) (int64, error) { return 10, nil }

// Every bad option is refused when the limiter is made, naming its path.
func TestOptionsRefused(t *testing.T) {
	cases := []struct {
		name string
		opts ratelimit.Options[string]
		want string
	}{
		{"no limits", ratelimit.Options[string]{Key: keyed}, "limits: needs at least one limit, e.g. {Limit: 60, Rate: 1}"},
		{"rate missing", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 10})}, "limits[0].rate: required for tokenbucket (units per second)"},
		{"limit 0", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Rate: 1})}, "limits[0].limit: must be an integer from 1 to 9007199254740991 (got 0)"},
		{"limit too big", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 1 << 53, Rate: 1})}, "limits[0].limit: must be an integer from 1 to 9007199254740991 (got 9007199254740992)"},
		{"limit and limitFunc", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, LimitFunc: perPlan, Rate: 1})}, "limits[0].limit: give limit or limitFunc, not both"},
		{"window on a bucket", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Window: 60})}, "limits[0].window: tokenbucket takes a rate (units per second), not a window"},
		{"rate on a window", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 5, Rate: 1, Window: 60})}, "limits[0].rate: fixedwindow takes a window (seconds), not a rate"},
		{"window too small", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: 0.0001})}, "limits[0].window: must be a number from 0.001 to 1e+12 (got 0.0001)"},
		{"rate NaN", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: math.NaN()})}, "limits[0].rate: must be a number from 1e-06 to 1e+12 (got NaN)"},
		{"lease missing", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.Concurrency, Limit: 5})}, "limits[0].lease: required for concurrency (seconds a slot is held unless released)"},
		{"lease on a bucket", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Lease: 30})}, "limits[0].lease: tokenbucket takes a rate (units per second), not a lease"},
		{"limit / rate", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 1 << 50, Rate: 0.000001})}, "limits[0].rate: limit / rate must be at most 1e12 seconds"},
		{"algorithm", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Algorithm: "TokenBucket", Limit: 5, Rate: 1})}, `limits[0].algorithm: must be one of tokenbucket, leakybucket, fixedwindow, slidingwindow, slidinglog, concurrency (got "TokenBucket")`},
		{"negative cost", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Cost: -1})}, "limits[0].cost: must be an integer from 1 to 9007199254740991 (got -1)"},
		{"two unnamed", ratelimit.Options[string]{Key: keyed, Limits: []ratelimit.Limit[string]{{Limit: 5, Rate: 1}, {Limit: 6, Rate: 1, Name: "b"}}}, "limits[0].name: required when a request carries more than one limit"},
		{"duplicate name", ratelimit.Options[string]{Key: keyed, Limits: []ratelimit.Limit[string]{{Limit: 5, Rate: 1, Name: "burst"}, {Limit: 6, Rate: 1, Name: "burst"}}}, `limits[1].name: duplicate policy name "burst"`},
		{"name not ASCII", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Name: "bürst"})}, `limits[0].name: must be printable ASCII, no control characters (got "bürst")`},
		{"quota unit", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, QuotaUnit: "bytes"})}, `limits[0].quotaUnit: must be one of requests, content-bytes, concurrent-requests (got "bytes")`},
		{"concurrency unit", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.Concurrency, Limit: 5, Lease: 30, QuotaUnit: ratelimit.Requests})}, "limits[0].quotaUnit: a concurrency limit counts concurrent-requests"},
		{"retryAfter on a window", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 1, RetryAfter: 2})}, "limits[0].retryAfter: only a concurrency limit takes a retryAfter (its denials' suggested wait)"},
		{"limit policy", ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, OnUnavailable: "fail"})}, `limits[0].onUnavailable: must be "open", "closed" or "local" (got "fail")`},
		{"limiter policy", ratelimit.Options[string]{Key: keyed, OnUnavailable: "Open", Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, `onUnavailable: must be "open", "closed" or "local" (got "Open")`},
		{"no key for a string request", ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, "limits[0].key: required: no limiter Key is given, and only *http.Request has a default (ByIP)"},
		{"prefix", ratelimit.Options[string]{Key: keyed, Prefix: "rl{", Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, `prefix: must not contain { or } (the key adds its own hash tag; got "rl{")`},
		{"timeout", ratelimit.Options[string]{Key: keyed, Timeout: -time.Second, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, "timeout: must be a positive duration (got -1s)"},
		{"instances", ratelimit.Options[string]{Key: keyed, Instances: -2, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, "instances: must be an integer >= 1 (got -2)"},
		{"mode", ratelimit.Options[string]{Key: keyed, Mode: "lua", Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, `mode: must be "auto", "module" or "script" (got "lua")`},
		{"scriptCall", ratelimit.Options[string]{Key: keyed, ScriptCall: "eval", Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, `scriptCall: must be "auto", "fcall" or "evalsha" (got "eval")`},
		{"scriptCall in module mode", ratelimit.Options[string]{Key: keyed, Mode: ratelimit.Module, ScriptCall: ratelimit.ScriptFCall, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, `scriptCall: mode "module" calls no script: leave scriptCall empty`},
		{"denialCache", ratelimit.Options[string]{Key: keyed, DenialCache: -5, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}, "denialCache: must be the most entries kept (>= 1), 0 for the default 10000, or NoDenialCache (got -5)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ratelimit.New[string](nowhere{}, c.opts)
			var config *ratelimit.ConfigError
			if !errors.As(err, &config) || err.Error() != c.want {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// Good options make a limiter; *http.Request gets ByIP as its default key.
func TestOptionsAccepted(t *testing.T) {
	l, err := ratelimit.New[*http.Request](nowhere{}, ratelimit.Options[*http.Request]{Limits: []ratelimit.Limit[*http.Request]{{Limit: 5, Rate: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := ratelimit.New[string](nil, ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})}); err == nil || err.Error() != "client: required: goredis.New(rdb) or valkey.New(option)" {
		t.Fatalf("a nil client: %v", err)
	}
}
