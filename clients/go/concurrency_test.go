package ratelimit_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

func slots(limit int64, lease float64) []ratelimit.Limit[string] {
	return []ratelimit.Limit[string]{{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: limit, Lease: lease}}
}

// Leases: taken all or nothing, released once, renewed; a denial's retry is the hint.
func TestConcurrencyLeases(t *testing.T) {
	for _, mode := range []ratelimit.Mode{ratelimit.Module, ratelimit.Script} {
		t.Run(string(mode), func(t *testing.T) {
			redis := servers.Start(t, servers.Options{NoModule: mode == ratelimit.Script})
			l := newLimiter(t, redis, ratelimit.Options[string]{Mode: mode, Limits: slots(2, 30)})
			ctx := context.Background()
			a, b := check(t, l, "k"), check(t, l, "k")
			if !a.Allowed || !b.Allowed || a.Limits[0].LeaseID != 1 || b.Limits[0].LeaseID != 2 || b.Limits[0].Remaining != 0 {
				t.Fatalf("%+v %+v", a.Limits[0], b.Limits[0])
			}
			denied := check(t, l, "k")
			if denied.Allowed || denied.RetryAfterMs != 1000 || denied.Limits[0].RetryAfterMs != 1000 || denied.Limits[0].LeaseID != 0 {
				t.Fatalf("denied: %+v", denied)
			}
			if renewed, err := l.Renew(ctx, a); err != nil || !renewed {
				t.Fatalf("renew: %v %v", renewed, err)
			}
			l.Release(ctx, a)
			l.Release(ctx, a) // once: the second does nothing
			if got := redis.Do("PTTL", "ratelimit:{k}:slots"); got == "-2" {
				t.Fatal("the other lease went too")
			}
			if renewed, err := l.Renew(ctx, a); err != nil || renewed {
				t.Fatalf("renewing a released lease: %v %v", renewed, err)
			}
			c := check(t, l, "k")
			if !c.Allowed || c.Limits[0].LeaseID != 3 || c.Limits[0].Remaining != 0 {
				t.Fatalf("after a release: %+v", c.Limits[0])
			}
			l.Release(ctx, b)
			l.Release(ctx, c)
			if got := redis.Do("EXISTS", "ratelimit:{k}:slots"); got != "0" {
				t.Fatal("releasing the last lease leaves the key")
			}
			if err := l.Refund(ctx, c, map[string]int64{"slots": 1}); err == nil || err.Error() != `ratelimit: refund: "slots" is a concurrency limit: its slots come back with Release, not a refund` {
				t.Fatalf("refunding slots: %v", err)
			}
		})
	}
}

// RetryAfter sets the hint; the module's figure wins when shorter.
func TestConcurrencyRetryHint(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{Limits: []ratelimit.Limit[string]{{Algorithm: ratelimit.Concurrency, Limit: 1, Lease: 0.2, RetryAfter: 5}}})
	check(t, l, "k")
	d := check(t, l, "k")
	if d.Allowed || d.RetryAfterMs <= 0 || d.RetryAfterMs > 200 {
		t.Fatalf("the lease runs out sooner than the hint: %d", d.RetryAfterMs)
	}
	l = newLimiter(t, redis, ratelimit.Options[string]{Limits: []ratelimit.Limit[string]{{Algorithm: ratelimit.Concurrency, Limit: 1, Lease: 30, RetryAfter: 2.5}}})
	check(t, l, "j")
	if d := check(t, l, "j"); d.RetryAfterMs != 2500 {
		t.Fatalf("hint 2.5 s: %d", d.RetryAfterMs)
	}
}

// The middleware holds the slot until the handler returns, also when the
// client has gone away, and releases it then.
func TestMiddlewareHoldsTheSlotUntilTheHandlerReturns(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := httpLimiter(t, redis, ratelimit.Options[*http.Request]{Limits: []ratelimit.Limit[*http.Request]{{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 1, Lease: 30}}})
	started, finish := make(chan struct{}), make(chan struct{})
	var done sync.WaitGroup
	server := serve(t, l, ratelimit.MiddlewareOptions{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer done.Done()
		if r.URL.Path == "/slow" {
			close(started)
			<-finish // keeps working after its client left
		}
		io.WriteString(w, "ok")
	}))
	done.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server.URL+"/slow", nil)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
	}()
	<-started
	cancel() // the client disconnects
	time.Sleep(200 * time.Millisecond)
	if r := get(t, server.URL); r.status != 429 || r.header.Get("RateLimit-Policy") != `"inflight";q=1;qu="concurrent-requests"` || r.header.Get("Retry-After") != "1" {
		t.Fatalf("while the slow handler runs: %+v", r)
	}
	close(finish)
	done.Wait()
	for i := 0; ; i++ { // the release follows ServeHTTP's return
		done.Add(1)
		r := get(t, server.URL)
		if r.status == 200 {
			if r.header.Get("RateLimit") != `"inflight";r=0;t=30` {
				t.Fatalf("%+v", r)
			}
			break
		}
		done.Done()
		if i == 50 {
			t.Fatal("the slot was not released")
		}
		time.Sleep(20 * time.Millisecond)
	}
	done.Wait()
	time.Sleep(50 * time.Millisecond)
	if got := redis.Do("EXISTS", "ratelimit:{ip:127.0.0.1}:inflight"); got != "0" {
		t.Fatal("a lease is still held")
	}
}

// Denials of a request with a concurrency limit are never answered in process.
func TestConcurrencyNeverCached(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{Limits: slots(1, 30)})
	held := check(t, l, "k")
	if d := check(t, l, "k"); d.Allowed || d.Outcome != ratelimit.OutcomeDenied {
		t.Fatalf("%+v", d)
	}
	l.Release(context.Background(), held)
	if d := check(t, l, "k"); !d.Allowed {
		t.Fatalf("after the release: %+v", d)
	}
}
