// Package redisrate is github.com/go-redis/redis_rate/v10's API over this
// module's limits: change the import path (and keep the package name with
// `redis_rate "github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"`)
// and the same calls run as RL.TOKENBUCKET calls on any Redis: the
// module where it is loaded, else the Lua library (ratelimit.Auto).
//
// A limit of Rate per Period with Burst is a token bucket of Burst tokens
// refilled at Rate / Period: the GCRA redis_rate runs, in exact integer
// micro-tokens instead of float seconds. Where the answers differ, and by
// how much, is in the package's README section "redisrate"; the
// differential test runs both on the same calls.
package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
)

// unit is a token in the bucket's units: micro-tokens, so that a rate of
// Rate / Period keeps its precision in the module's six decimals.
const unit = 1_000_000

// Limit is Rate events per Period, in bursts of up to Burst.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, fmtDur(l.Period), l.Burst)
}

// IsZero reports whether l is the zero Limit.
func (l Limit) IsZero() bool {
	return l == Limit{}
}

func fmtDur(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// PerSecond is rate a second, in bursts of rate.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Period: time.Second, Burst: rate} }

// PerMinute is rate a minute, in bursts of rate.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Period: time.Minute, Burst: rate} }

// PerHour is rate an hour, in bursts of rate.
func PerHour(rate int) Limit { return Limit{Rate: rate, Period: time.Hour, Burst: rate} }

// Result is what a call decided.
type Result struct {
	// Limit is the limit that was used to obtain this result.
	Limit Limit
	// Allowed is the number of events that may happen at time now.
	Allowed int
	// Remaining is how many events could still be permitted right now
	// (0 when the call was denied, as redis_rate says).
	Remaining int
	// RetryAfter is the time until the next request will be permitted:
	// -1 unless the call was denied.
	RetryAfter time.Duration
	// ResetAfter is the time until the bucket is full again.
	ResetAfter time.Duration
}

// Options are New's options. Zero fields take their defaults.
type Options struct {
	// Mode is ratelimit.Auto when empty.
	Mode ratelimit.Mode
	// Prefix of the Redis keys: "rate:" when empty (a key is
	// <prefix>{<key>}:limit).
	Prefix string
	// Timeout is how long a call waits for Redis (a context deadline that
	// comes sooner wins): 1 s when 0.
	Timeout time.Duration
}

// Limiter controls how frequently events are allowed to happen. Goroutine-safe.
type Limiter struct {
	client ratelimit.Client
	opts   Options
	err    error // from New: every call returns it

	mu      sync.Mutex
	buckets map[float64]*ratelimit.Limiter[call] // by refill rate in units a second
	closed  bool
}

// call is one call's key and bucket in units.
type call struct {
	key         string
	burst, cost int64
}

// NewLimiter returns a new Limiter over connections of its own made with
// rdb's options (*redis.Client, also from NewFailoverClient, or
// *redis.ClusterClient); rdb stays the app's. An error (another client
// type) comes back from every call. Close it to close its connections.
func NewLimiter(rdb redis.UniversalClient) *Limiter {
	l, err := New(rdb, Options{})
	if err != nil {
		return &Limiter{err: err}
	}
	return l
}

// New is NewLimiter with options, and its error at once.
func New(rdb redis.UniversalClient, opts Options) (*Limiter, error) {
	if opts.Prefix == "" {
		opts.Prefix = "rate:"
	}
	client, err := goredis.New(rdb)
	if err != nil {
		return nil, err
	}
	l := &Limiter{client: client, opts: opts, buckets: map[float64]*ratelimit.Limiter[call]{}}
	// Every option is checked now, on a limit that is always valid.
	if _, err := l.bucket(1); err != nil {
		client.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the limiter's connections.
func (l *Limiter) Close() error {
	if l.err != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	for _, b := range l.buckets {
		b.Close()
	}
	return l.client.Close()
}

// shared is the limiter's client as each bucket sees it: Close leaves it open.
type shared struct{ ratelimit.Client }

func (shared) Close() error { return nil }

// bucket is the limiter of one refill rate (units a second): the rate is
// the one parameter a limiter fixes; burst and cost come with each call.
func (l *Limiter) bucket(rate float64) (*ratelimit.Limiter[call], error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ratelimit.ErrClosed
	}
	if b, ok := l.buckets[rate]; ok {
		return b, nil
	}
	b, err := ratelimit.New(shared{l.client}, ratelimit.Options[call]{
		Limits: []ratelimit.Limit[call]{{
			Name:      "limit",
			Rate:      rate,
			LimitFunc: func(_ context.Context, c call) (int64, error) { return c.burst, nil },
			CostFunc:  func(_ context.Context, c call) (int64, error) { return c.cost, nil },
		}},
		Key:           func(_ context.Context, c call) (string, error) { return c.key, nil },
		Prefix:        l.opts.Prefix,
		Mode:          l.opts.Mode,
		Timeout:       l.opts.Timeout,
		OnUnavailable: ratelimit.Closed, // an error, as redis_rate returns go-redis's
		DenialCache:   ratelimit.NoDenialCache,
	})
	if err != nil {
		return nil, fmt.Errorf("redisrate: %w", err)
	}
	l.buckets[rate] = b
	return b, nil
}

// rateOf is limit's refill in units a second, after checking limit.
func rateOf(limit Limit, n int) (float64, error) {
	switch {
	case limit.Rate < 1:
		return 0, fmt.Errorf("redisrate: limit %s: Rate must be at least 1", limit)
	case limit.Period <= 0:
		return 0, fmt.Errorf("redisrate: limit %s: Period must be positive", limit)
	case limit.Burst < 1:
		return 0, fmt.Errorf("redisrate: limit %s: Burst must be at least 1 (PerSecond, PerMinute and PerHour make it the rate)", limit)
	case int64(limit.Burst) > ratelimit.MaxInteger/unit:
		return 0, fmt.Errorf("redisrate: limit %s: Burst must be at most %d", limit, int64(ratelimit.MaxInteger/unit))
	case n < 0 || int64(n) > ratelimit.MaxInteger/unit:
		return 0, fmt.Errorf("redisrate: n must be an integer from 0 to %d (got %d)", int64(ratelimit.MaxInteger/unit), n)
	}
	perSecond := float64(limit.Rate) / limit.Period.Seconds()
	if perSecond > 1e6 || perSecond < 1e-12 {
		return 0, fmt.Errorf("redisrate: limit %s: Rate / Period must be from 1e-12 to 1000000 a second", limit)
	}
	if float64(limit.Burst)/perSecond > 1e12 {
		return 0, fmt.Errorf("redisrate: limit %s: Burst / (Rate / Period) must be at most 1e12 seconds", limit)
	}
	return perSecond * unit, nil
}

// Allow is a shortcut for AllowN(ctx, key, limit, 1).
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN reports whether n events may happen at time now, taking them when they may.
func (l *Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	b, rate, err := l.prepare(limit, n)
	if err != nil {
		return nil, err
	}
	part, allowed, err := take(ctx, b, call{key, int64(limit.Burst) * unit, int64(n) * unit})
	if err != nil {
		return nil, err
	}
	if allowed {
		return admitted(limit, n, part, rate), nil
	}
	return denied(limit, int64(n)*unit, part, rate), nil
}

// AllowAtMost reports whether at most n events may happen at time now: it
// takes n, or as many as there are (the fraction of a token included, as
// redis_rate takes it), and says how many whole ones in Allowed.
func (l *Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	b, rate, err := l.prepare(limit, n)
	if err != nil {
		return nil, err
	}
	want := int64(n) * unit
	var part ratelimit.LimitDecision
	// A denial says how much there is; another client may take it first,
	// so a few tries, each after a denial that left less than asked.
	for try := 0; try < 8; try++ {
		var allowed bool
		part, allowed, err = take(ctx, b, call{key, int64(limit.Burst) * unit, want})
		if err != nil {
			return nil, err
		}
		switch {
		case allowed && (want >= unit || n == 0 && part.Remaining >= unit):
			return admitted(limit, int(want/unit), part, rate), nil
		case part.Remaining < unit: // not one whole token
			return denied(limit, unit, part, rate), nil
		}
		want = part.Remaining
	}
	return denied(limit, unit, part, rate), nil
}

func (l *Limiter) prepare(limit Limit, n int) (*ratelimit.Limiter[call], float64, error) {
	if l.err != nil {
		return nil, 0, l.err
	}
	rate, err := rateOf(limit, n)
	if err != nil {
		return nil, 0, err
	}
	b, err := l.bucket(rate)
	return b, rate, err
}

// take checks c: the bucket's part of the decision, and whether it admitted.
func take(ctx context.Context, b *ratelimit.Limiter[call], c call) (ratelimit.LimitDecision, bool, error) {
	d, err := b.Check(ctx, c)
	if err != nil {
		return ratelimit.LimitDecision{}, false, err
	}
	if len(d.Limits) != 1 {
		return ratelimit.LimitDecision{}, false, errors.New("redisrate: a decision without its limit")
	}
	return d.Limits[0], d.Allowed, nil
}

func admitted(limit Limit, n int, part ratelimit.LimitDecision, rate float64) *Result {
	return &Result{Limit: limit, Allowed: n, Remaining: int(part.Remaining / unit), RetryAfter: -1,
		ResetAfter: seconds(float64(int64(limit.Burst)*unit-part.Remaining) / rate)}
}

// denied: the wait is until want units are in the bucket (redis_rate's
// figure also when want is above the burst and can never be).
func denied(limit Limit, want int64, part ratelimit.LimitDecision, rate float64) *Result {
	return &Result{Limit: limit, RetryAfter: seconds(float64(want-part.Remaining) / rate),
		ResetAfter: seconds(float64(int64(limit.Burst)*unit-part.Remaining) / rate)}
}

// seconds as a Duration, rounded up to a nanosecond; the longest Duration
// (292 years) at most.
func seconds(s float64) time.Duration {
	ns := math.Ceil(s * float64(time.Second))
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Reset gets a key and reset all limitations and previous usages.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if l.err != nil {
		return l.err
	}
	redisKey := l.opts.Prefix + "{" + key + "}:limit"
	_, err := l.client.Do(ctx, redisKey, "DEL", redisKey)
	return err
}
