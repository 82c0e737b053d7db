package redisrate_test

import (
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/adaptertest"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/redisrate"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var ctx = context.Background()

// limiter is ours over s in mode m, closed when the test ends; the app's client too.
func limiter(t *testing.T, s *servers.Server, m adaptertest.Mode) (*redisrate.Limiter, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l, err := redisrate.New(rdb, redisrate.Options{Mode: m.Mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, rdb
}

// The calls of redis_rate's own README and tests, with their exact answers
// where time does not enter (a limit of an hour: no token comes back while
// the test runs).
func TestRedisRate(t *testing.T) {
	for _, m := range adaptertest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			redis := m.Start(t)
			l, _ := limiter(t, redis, m)
			limit := redisrate.PerHour(10)
			want := func(allowed, remaining int) func(*redisrate.Result, error) *redisrate.Result {
				return func(r *redisrate.Result, err error) *redisrate.Result {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
					if r.Limit != limit || r.Allowed != allowed || r.Remaining != remaining {
						t.Fatalf("got %+v, want allowed %d remaining %d", r, allowed, remaining)
					}
					return r
				}
			}
			r := want(1, 9)(l.Allow(ctx, "test_id", limit))
			if r.RetryAfter != -1 || r.ResetAfter < 359*time.Second || r.ResetAfter > 360*time.Second {
				t.Fatalf("%+v", r)
			}
			want(2, 7)(l.AllowN(ctx, "test_id", limit, 2))
			want(0, 7)(l.AllowN(ctx, "test_id", limit, 0))
			r = want(0, 0)(l.AllowN(ctx, "test_id", limit, 8))
			// 7 and a little are there: one more is 6 minutes away, less what came back.
			if r.RetryAfter < 359*time.Second || r.RetryAfter > 360*time.Second || r.ResetAfter < 1079*time.Second || r.ResetAfter > 1080*time.Second {
				t.Fatalf("%+v", r)
			}
			// Above the burst: denied with redis_rate's wait (the bucket full, and 2 more).
			r = want(0, 0)(l.AllowN(ctx, "test_id", limit, 12))
			if r.RetryAfter < 1799*time.Second || r.RetryAfter > 1800*time.Second {
				t.Fatalf("%+v", r)
			}
			want(5, 2)(l.AllowAtMost(ctx, "test_id", limit, 5))
			want(2, 0)(l.AllowAtMost(ctx, "test_id", limit, 5))
			r = want(0, 0)(l.AllowAtMost(ctx, "test_id", limit, 5))
			if r.RetryAfter <= 0 || r.RetryAfter > 360*time.Second || r.ResetAfter < 3599*time.Second || r.ResetAfter > 3600*time.Second {
				t.Fatalf("%+v", r)
			}
			if err := l.Reset(ctx, "test_id"); err != nil {
				t.Fatal(err)
			}
			if got := redis.Do("EXISTS", "rate:{test_id}:limit"); got != "0" {
				t.Fatal("Reset left the key")
			}
			want(10, 0)(l.AllowAtMost(ctx, "test_id", limit, 15))
		})
	}
}

// Bad limits and counts are errors that say what is wrong, never a limit
// silently off (redis_rate denies every call of a limit without a burst).
func TestRedisRateBadInput(t *testing.T) {
	m := adaptertest.Modes[0]
	l, _ := limiter(t, m.Start(t), m)
	for _, c := range []struct {
		limit redisrate.Limit
		n     int
		err   string
	}{
		{redisrate.Limit{Rate: 10, Period: time.Second}, 1, "redisrate: limit 10 req/s (burst 0): Burst must be at least 1 (PerSecond, PerMinute and PerHour make it the rate)"},
		{redisrate.PerSecond(0), 1, "redisrate: limit 0 req/s (burst 0): Rate must be at least 1"},
		{redisrate.Limit{Rate: 1, Burst: 1}, 1, "redisrate: limit 1 req/0s (burst 1): Period must be positive"},
		{redisrate.PerSecond(2_000_000), 1, "redisrate: limit 2000000 req/s (burst 2000000): Rate / Period must be from 1e-12 to 1000000 a second"},
		{redisrate.Limit{Rate: 1, Burst: 1_000_000, Period: 1_000_000 * time.Hour}, 1, "redisrate: limit 1 req/1000000h0m0s (burst 1000000): Burst / (Rate / Period) must be at most 1e12 seconds"},
		{redisrate.PerSecond(10), -1, "redisrate: n must be an integer from 0 to 9007199254 (got -1)"},
	} {
		if _, err := l.AllowN(ctx, "k", c.limit, c.n); err == nil || err.Error() != c.err {
			t.Errorf("%+v: %v", c, err)
		}
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if _, err := redisrate.NewLimiter(ring).Allow(ctx, "k", redisrate.PerSecond(1)); err == nil {
		t.Fatal("a Ring was taken")
	}
	app := redis.NewClient(&redis.Options{})
	defer app.Close()
	if _, err := redisrate.New(app, redisrate.Options{Mode: "fast"}); err == nil || err.Error() != `redisrate: mode: must be "auto", "module" or "script" (got "fast")` {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Allow(ctx, "k", redisrate.PerSecond(1)); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatal(err)
	}
}

// Redis gone: an error, as redis_rate returns go-redis's.
func TestRedisRateUnavailable(t *testing.T) {
	m := adaptertest.Modes[0]
	redis := m.Start(t)
	l, _ := limiter(t, redis, m)
	redis.Kill()
	if _, err := l.Allow(ctx, "k", redisrate.PerSecond(1)); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatal(err)
	}
}

// The differential: redis_rate v10 and ours on the same random call
// sequences, each on its own key of the same Redis, call after call. Where
// they may differ (README, "redisrate"):
//   - Remaining by 1: redis_rate floors a float that its float seconds
//     leave a hair under the whole number (8.9999999 for 9); ours counts
//     exact integer micro-tokens;
//   - RetryAfter and ResetAfter by a millionth of the time a token takes
//     to come back (Period / Rate / 10^6, 0.72 ms for 5 an hour): ours
//     counts whole micro-tokens, redis_rate float seconds;
//   - and by what the time between the two calls (gap) refills: redis_rate
//     reads the server's clock once per call, and so do we, a few hundred
//     microseconds later. AllowAtMost that empties the bucket takes all
//     there is, and a bucket that is full lost what flowed over: ours,
//     later, took or lost the gap's refill too, and the two buckets stay
//     that far apart (drift) until a Reset. When a token
//     comes back within the gap, one may admit what the other denied:
//     then both keys start again (counted, at most 1 call in 20).
func TestRedisRateDifferential(t *testing.T) {
	limits := []redisrate.Limit{redisrate.PerSecond(10), redisrate.PerMinute(100), redisrate.PerHour(5),
		{Rate: 7, Burst: 3, Period: 2 * time.Second}, {Rate: 3, Burst: 20, Period: 900 * time.Millisecond}}
	for _, m := range adaptertest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			redis := m.Start(t)
			ours, rdb := limiter(t, redis, m)
			theirs := redis_rate.NewLimiter(rdb)
			random := rand.New(rand.NewSource(int64(len(m.Name))))
			calls, restarts := 0, 0
			for i, limit := range limits {
				key := string(rune('a' + i))
				var drift time.Duration
				for step := 0; step < 60; step++ {
					n := random.Intn(limit.Burst + 3)
					op := random.Intn(4)
					if op == 3 && random.Intn(4) == 0 {
						if theirs.Reset(ctx, key) != nil || ours.Reset(ctx, key) != nil {
							t.Fatal("reset")
						}
						drift = 0
						continue
					}
					start := time.Now()
					var a *redis_rate.Result
					var b *redisrate.Result
					var errA, errB error
					switch op {
					case 0:
						a, errA = theirs.Allow(ctx, key, redis_rate.Limit(limit))
						b, errB = ours.Allow(ctx, key, limit)
					case 1, 3:
						a, errA = theirs.AllowN(ctx, key, redis_rate.Limit(limit), n)
						b, errB = ours.AllowN(ctx, key, limit, n)
					case 2:
						a, errA = theirs.AllowAtMost(ctx, key, redis_rate.Limit(limit), n)
						b, errB = ours.AllowAtMost(ctx, key, limit, n)
					}
					gap := time.Since(start)
					if errA != nil || errB != nil {
						t.Fatal(errA, errB)
					}
					calls++
					perSecond := float64(limit.Rate) / limit.Period.Seconds()
					refill := (gap + drift).Seconds() * perSecond
					tolerance := gap + drift + time.Duration(float64(limit.Period)/float64(limit.Rate)/1e6) + 10*time.Microsecond
					if a.Allowed != b.Allowed {
						// Only a token that came back within the gap may part them.
						if wait := max(a.RetryAfter, b.RetryAfter); wait > gap+10*time.Microsecond {
							t.Fatalf("%s op %d n %d: redis_rate %+v, ours %+v (gap %v)", limit, op, n, *a, *b, gap)
						}
						restarts++
						theirs.Reset(ctx, key)
						ours.Reset(ctx, key)
						drift = 0
						continue
					}
					if d := float64(b.Remaining - a.Remaining); d < -refill-1 || d > refill+1 {
						t.Fatalf("%s op %d n %d: remaining: redis_rate %+v, ours %+v (gap %v)", limit, op, n, *a, *b, gap)
					}
					for _, d := range [][2]time.Duration{{a.RetryAfter, b.RetryAfter}, {a.ResetAfter, b.ResetAfter}} {
						if diff := (d[1] - d[0]).Abs(); diff > tolerance {
							t.Fatalf("%s op %d n %d: durations: redis_rate %+v, ours %+v (gap %v)", limit, op, n, *a, *b, gap)
						}
					}
					// A bucket emptied by AllowAtMost, or full (or within the gap of
					// full) when it took: ours did it later, and stays behind by the gap.
					interval := limit.Period / time.Duration(limit.Rate)
					if a.Allowed > 0 && (a.Allowed < n || a.ResetAfter-time.Duration(a.Allowed)*interval <= gap) {
						drift += gap
					}
					time.Sleep(time.Duration(random.Intn(40)) * time.Millisecond)
				}
			}
			if restarts*20 > calls {
				t.Fatalf("%d of %d calls parted at a token's return", restarts, calls)
			}
			t.Logf("%d calls, %d parted at a token's return", calls, restarts)
		})
	}
}
