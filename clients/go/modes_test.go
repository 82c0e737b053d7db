package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// logs is a slog.Logger whose lines a test reads.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logs) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// Script mode answers as the module does, and keeps its state in plain values.
func TestScriptModeAnswersAsTheModule(t *testing.T) {
	withModule := servers.Start(t, servers.Options{})
	without := servers.Start(t, servers.Options{NoModule: true})
	limits := []ratelimit.Limit[string]{
		{Name: "bucket", Limit: 5, Rate: 0.001},
		{Name: "leaky", Algorithm: ratelimit.LeakyBucket, Limit: 4, Rate: 0.001},
		{Name: "log", Algorithm: ratelimit.SlidingLog, Limit: 3, Window: 3600},
	}
	for _, mode := range []ratelimit.Mode{ratelimit.Script, ratelimit.Auto} {
		module := newLimiter(t, withModule, ratelimit.Options[string]{Mode: ratelimit.Module, Limits: limits, DenialCache: ratelimit.NoDenialCache})
		script := newLimiter(t, without, ratelimit.Options[string]{Mode: mode, Limits: limits, DenialCache: ratelimit.NoDenialCache})
		key := "u-" + string(mode)
		for i := 0; i < 5; i++ {
			a, b := check(t, module, key), check(t, script, key)
			if a.Allowed != b.Allowed || a.NeverAllowed != b.NeverAllowed {
				t.Fatalf("%s check %d: %+v against %+v", mode, i, a, b)
			}
			for j := range a.Limits {
				x, y := a.Limits[j], b.Limits[j]
				if x.Allowed != y.Allowed || x.Remaining != y.Remaining || x.Limit != y.Limit || (x.LeaseID != y.LeaseID) || abs(x.RetryAfterMs-y.RetryAfterMs) > 50 || abs(x.DelayMs-y.DelayMs) > 50 {
					t.Fatalf("%s check %d, %s: %+v against %+v", mode, i, x.Name, x, y)
				}
			}
		}
		if got := without.Do("TYPE", "ratelimit:{"+key+"}:bucket"); got != "string" {
			t.Fatalf("%s: script mode's key is a %s", mode, got)
		}
		if got := withModule.Do("TYPE", "ratelimit:{"+key+"}:bucket"); got != "ratelimit" {
			t.Fatalf("module mode's key is a %s", got)
		}
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// Auto uses the module where it is loaded.
func TestAutoPicksTheModule(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Name: "n"})})
	check(t, l, "k")
	if got := server.Do("TYPE", "ratelimit:{k}:n"); got != "ratelimit" {
		t.Fatalf("TYPE %s", got)
	}
}

// Auto decides again after a reconnect: the server came back without the module.
func TestAutoDecidesAgainAfterAReconnect(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, server, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Name: "n"}), Logger: (&logs{}).logger()})
	check(t, l, "a")
	server.Kill()
	server.Module = false
	server.Run()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := check(t, l, "b") // the first call may meet the dead connection: let through, tried again in a second
		if d.Outcome == ratelimit.OutcomeAllowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer from the restarted server: %+v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := server.Do("TYPE", "ratelimit:{b}:n"); got != "string" {
		t.Fatalf("after the restart without the module: TYPE %s", got)
	}
}

// NOSCRIPT (SCRIPT FLUSH, a restart) is survived: EVAL sends the source once.
func TestNoScriptSurvived(t *testing.T) {
	server := servers.Start(t, servers.Options{NoModule: true})
	l := newLimiter(t, server, ratelimit.Options[string]{Mode: ratelimit.Script, ScriptCall: ratelimit.ScriptEvalSHA, Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 3600})})
	for i := int64(0); i < 3; i++ {
		server.Do("SCRIPT", "FLUSH")
		if d := check(t, l, "k"); !d.Allowed || d.Limits[0].Remaining != 4-i {
			t.Fatalf("check %d: %+v", i, d)
		}
	}
}

// A key in the other mode's layout is refused by script mode with words that name both.
func TestScriptRefusesModuleState(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	module := newLimiter(t, server, ratelimit.Options[string]{Mode: ratelimit.Module, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Name: "n"})})
	script := newLimiter(t, server, ratelimit.Options[string]{Mode: ratelimit.Script, Limits: one(ratelimit.Limit[string]{Limit: 5, Rate: 1, Name: "n"})})
	check(t, module, "k")
	_, err := script.Check(context.Background(), "k")
	if err == nil || errors.Is(err, ratelimit.ErrUnavailable) || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "module") {
		t.Fatalf("got %v", err)
	}
}
