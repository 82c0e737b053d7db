package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// Redis gone: Open passes (one log line per failed call), a refused
// connection fails at once, and Redis is tried again about once a second,
// so limiting resumes within a second of Redis coming back.
func TestUnavailableOpen(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	log := &logs{}
	l := newLimiter(t, redis, ratelimit.Options[string]{Logger: log.logger(), Timeout: 5 * time.Second,
		Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: 3600})})
	check(t, l, "k")
	redis.Kill()
	started := time.Now()
	d := check(t, l, "k")
	if took := time.Since(started); took > time.Second {
		t.Fatalf("a refused connection took %s", took)
	}
	if !d.Allowed || d.Outcome != ratelimit.OutcomeUnavailableOpen || len(d.Limits) != 0 {
		t.Fatalf("%+v", d)
	}
	for i := 0; i < 5; i++ { // answered by the policy, no call, no line
		if d := check(t, l, "k"); d.Outcome != ratelimit.OutcomeUnavailableOpen {
			t.Fatalf("%+v", d)
		}
	}
	if lines := strings.Count(log.String(), "rate limiter unavailable"); lines != 1 {
		t.Fatalf("%d lines: %s", lines, log)
	}
	redis.Run()
	time.Sleep(1100 * time.Millisecond)
	if d := check(t, l, "k"); d.Outcome != ratelimit.OutcomeAllowed || d.Limits[0].Remaining != 99 {
		t.Fatalf("after Redis came back (a fresh server, the window starts anew): %+v", d)
	}
}

// Closed: an error that is ErrUnavailable, and a 503 from the middleware.
func TestUnavailableClosed(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{OnUnavailable: ratelimit.Closed, Logger: (&logs{}).logger(), Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1})})
	hl := httpLimiter(t, redis, ratelimit.Options[*http.Request]{OnUnavailable: ratelimit.Closed, Logger: (&logs{}).logger(), Limits: []ratelimit.Limit[*http.Request]{{Limit: 5, Rate: 1}}})
	server := serve(t, hl, ratelimit.MiddlewareOptions{}, nil)
	redis.Kill()
	if _, err := l.Check(context.Background(), "k"); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
	if _, err := l.Check(context.Background(), "k"); !errors.Is(err, ratelimit.ErrUnavailable) || !strings.Contains(err.Error(), "tried again at most once a second") {
		t.Fatalf("while waiting for the next try: %v", err)
	}
	if r := get(t, server.URL); r.status != 503 || r.body != `{"error":"rate_limiter_unavailable"}` || r.header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("%+v", r)
	}
}

// Per limit: a Closed limit refuses; else Local limits decide in process
// (a concurrency limit is Local by default) and Open ones pass, left out.
func TestUnavailablePerLimit(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{Logger: (&logs{}).logger(), Instances: 2, Limits: []ratelimit.Limit[string]{
		{Name: "rate", Limit: 100, Rate: 10},
		{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 5, Lease: 30},
	}})
	redis.Kill()
	ctx := context.Background()
	var held []*ratelimit.Decision
	for i := int64(0); i < 2; i++ {
		d := check(t, l, "k")
		if !d.Allowed || d.Outcome != ratelimit.OutcomeUnavailableLocalAllowed || len(d.Limits) != 1 || d.Limits[0].Name != "slots" || d.Limits[0].Limit != 2 || d.Limits[0].Remaining != 1-i {
			t.Fatalf("in process %d: %+v", i, d)
		}
		held = append(held, d)
	}
	d := check(t, l, "k")
	if d.Allowed || d.Outcome != ratelimit.OutcomeUnavailableLocalDenied || d.RetryAfterMs != 1000 {
		t.Fatalf("the third of 5 / 2 slots: %+v", d)
	}
	if renewed, err := l.Renew(ctx, held[0]); err != nil || !renewed {
		t.Fatalf("renewed in process: %v %v", renewed, err)
	}
	redis.Run()
	time.Sleep(1100 * time.Millisecond)
	l.Release(ctx, held[0]) // in process, also once Redis answers again
	if d := check(t, l, "k"); d.Outcome != ratelimit.OutcomeAllowed || len(d.Limits) != 2 {
		t.Fatalf("Redis back: %+v", d)
	}
	if got := redis.Do("EXISTS", "ratelimit:{k}:slots"); got != "1" {
		t.Fatal("the lease taken in Redis is not there")
	}

	closed := newLimiter(t, redis, ratelimit.Options[string]{Logger: (&logs{}).logger(), Limits: []ratelimit.Limit[string]{
		{Name: "rate", Limit: 100, Rate: 10, OnUnavailable: ratelimit.Closed},
		{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 5, Lease: 30},
	}})
	redis.Kill()
	if _, err := closed.Check(ctx, "k"); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("a closed limit: %v", err)
	}
}

// Local divides each bucket's capacity and rate by the instances: 40 at
// 20/s over 4 processes is 10 at once and 5 a second in each.
func TestUnavailableLocalDivides(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{OnUnavailable: ratelimit.Local, Instances: 4, Logger: (&logs{}).logger(),
		Limits: one(ratelimit.Limit[string]{Limit: 40, Rate: 20})})
	redis.Kill()
	for i := int64(0); i < 10; i++ {
		d := check(t, l, "k")
		if !d.Allowed || d.Limits[0].Limit != 10 || d.Limits[0].Remaining != 9-i || d.Limits[0].Param != 5 {
			t.Fatalf("%d: %+v", i, d.Limits[0])
		}
	}
	d := check(t, l, "k")
	if d.Allowed || d.Outcome != ratelimit.OutcomeUnavailableLocalDenied || d.RetryAfterMs <= 0 || d.RetryAfterMs > 200 {
		t.Fatalf("the eleventh: %+v", d)
	}
	if err := l.Refund(context.Background(), d, nil); err != nil {
		t.Fatal(err)
	}
}

// A check that timed out on a stopped server is undone once the server
// runs it: its units refunded, its lease released. Two limits (RL.MULTI),
// and a lease alone (RL.ACQUIRE).
func TestTimedOutCheckUndone(t *testing.T) {
	window := ratelimit.Limit[string]{Name: "window", Algorithm: ratelimit.FixedWindow, Limit: 10, Window: 3600, OnUnavailable: ratelimit.Open}
	slots := ratelimit.Limit[string]{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 3, Lease: 30, OnUnavailable: ratelimit.Open}
	for _, limits := range [][]ratelimit.Limit[string]{{window, slots}, {slots}} {
		for _, mode := range []ratelimit.Mode{ratelimit.Module, ratelimit.Script} {
			t.Run(fmt.Sprintf("%s/%d limits", mode, len(limits)), func(t *testing.T) {
				redis := servers.Start(t, servers.Options{NoModule: mode == ratelimit.Script})
				var outcomes atomic.Value
				l := newLimiter(t, redis, ratelimit.Options[string]{Mode: mode, Timeout: 200 * time.Millisecond, Logger: (&logs{}).logger(),
					OnDecision: func(e ratelimit.DecisionEvent) { outcomes.Store(e) }, Limits: limits})
				check(t, l, "warm") // the mode is known, the connection open
				redis.Pause()
				started := time.Now()
				d := check(t, l, "k")
				took := time.Since(started)
				if d.Outcome != ratelimit.OutcomeUnavailableOpen || took < 150*time.Millisecond || took > 2*time.Second {
					t.Fatalf("%+v after %s", d, took)
				}
				event := outcomes.Load().(ratelimit.DecisionEvent)
				if event.Err == nil || !strings.Contains(event.Err.Error(), "no answer from Redis within") {
					t.Fatalf("%+v", event)
				}
				time.Sleep(300 * time.Millisecond)
				redis.Resume()
				// The late call runs once Redis reads it: give it 1.5 s, then nothing may be held.
				resumed := time.Now()
				deadline := resumed.Add(5 * time.Second)
				for time.Since(resumed) < 1500*time.Millisecond || redis.Do("EXISTS", "ratelimit:{k}:window", "ratelimit:{k}:slots") != "0" {
					if time.Now().After(deadline) {
						t.Fatalf("still held: window %s, slots %s", redis.Do("GET", "ratelimit:{k}:window"), redis.Do("PTTL", "ratelimit:{k}:slots"))
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
	}
}

// A context deadline sooner than the timeout is the check's deadline; a
// busy server (a slow script) runs the check later, and it is undone.
func TestContextDeadlineOnABusyServer(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{Logger: (&logs{}).logger(), Limits: one(ratelimit.Limit[string]{Name: "w", Algorithm: ratelimit.FixedWindow, Limit: 10, Window: 3600})})
	check(t, l, "warm")
	go redis.Try("EVAL", "local t = redis.call('TIME') local e = t[1] * 1000000 + t[2] + 1500000 while true do local n = redis.call('TIME') if n[1] * 1000000 + n[2] > e then break end end return 1", "0")
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	started := time.Now()
	d, err := l.Check(ctx, "k")
	if err != nil || d.Outcome != ratelimit.OutcomeUnavailableOpen || time.Since(started) > 900*time.Millisecond {
		t.Fatalf("%+v %v after %s", d, err, time.Since(started))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := redis.Try("EXISTS", "ratelimit:{k}:w")
		if err == nil && got == "0" && time.Since(started) > 1500*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late check is still counted: %v %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Calls that take nothing (Peek, Refund, Release, Renew) end at the
// check's deadline too on a stopped server, and report Redis unavailable.
func TestDeadlineOfCallsThatTakeNothing(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := newLimiter(t, redis, ratelimit.Options[string]{Timeout: 200 * time.Millisecond, Logger: (&logs{}).logger(),
		Limits: one(ratelimit.Limit[string]{Name: "w", Algorithm: ratelimit.FixedWindow, Limit: 10, Window: 3600, OnUnavailable: ratelimit.Closed})})
	d := check(t, l, "k")
	redis.Pause()
	defer redis.Resume()
	started := time.Now()
	_, err := l.Peek(context.Background(), "k")
	if took := time.Since(started); !errors.Is(err, ratelimit.ErrUnavailable) || took < 150*time.Millisecond || took > 2*time.Second {
		t.Fatalf("Peek: %v after %s", err, took)
	}
	redis.Resume()
	time.Sleep(1100 * time.Millisecond) // Redis is tried again: the check answered
	if d := check(t, l, "k"); d.Outcome != ratelimit.OutcomeAllowed {
		t.Fatalf("%+v", d)
	}
	redis.Pause()
	started = time.Now()
	err = l.Refund(context.Background(), d, nil)
	if took := time.Since(started); !errors.Is(err, ratelimit.ErrUnavailable) || took < 150*time.Millisecond || took > 2*time.Second {
		t.Fatalf("Refund: %v after %s", err, took)
	}
}

// Closing the limiter while a timed-out check's reply is still awaited (the
// server stopped) returns at once: the reply is dropped, and no goroutine
// is left (TestMain's goleak).
func TestCloseWhileALateReplyIsAwaited(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l, err := ratelimit.New(clientOf(t, redis), ratelimit.Options[string]{Key: keyed, Timeout: 200 * time.Millisecond, Logger: (&logs{}).logger(),
		Limits: one(ratelimit.Limit[string]{Name: "w", Algorithm: ratelimit.FixedWindow, Limit: 10, Window: 3600})})
	if err != nil {
		t.Fatal(err)
	}
	check(t, l, "warm")
	redis.Pause()
	defer redis.Resume()
	if d := check(t, l, "k"); d.Outcome != ratelimit.OutcomeUnavailableOpen {
		t.Fatalf("%+v", d)
	}
	started := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("Close took %s", took)
	}
}
