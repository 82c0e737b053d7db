package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// Script mode calls the library with FCALL, loading it once per node, and
// again after FUNCTION FLUSH; no fallback line is written.
func TestFCall(t *testing.T) {
	server := servers.Start(t, servers.Options{NoModule: true})
	log := &logs{}
	l := newLimiter(t, server, ratelimit.Options[string]{Mode: ratelimit.Script, Logger: log.logger(),
		Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 3600})})
	for i := int64(0); i < 3; i++ {
		if i == 2 {
			server.Do("FUNCTION", "FLUSH")
		}
		if d := check(t, l, "k"); !d.Allowed || d.Limits[0].Remaining != 4-i {
			t.Fatalf("check %d: %+v", i, d)
		}
		if got := server.Do("FUNCTION", "LIST", "LIBRARYNAME", ratelimit.LibraryName); !strings.Contains(got, ratelimit.LibraryName) {
			t.Fatalf("FUNCTION LIST: %q", got)
		}
	}
	stats := server.Do("INFO", "commandstats")
	if !strings.Contains(stats, "cmdstat_fcall:calls=") || strings.Contains(stats, "cmdstat_evalsha") || log.String() != "" {
		t.Fatalf("%s\n%s", stats, log)
	}
	// A library already there (another process loaded it) is used as it is.
	other := newLimiter(t, server, ratelimit.Options[string]{Mode: ratelimit.Script, Logger: log.logger(),
		Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 3600})})
	if d := check(t, other, "k"); !d.Allowed || d.Limits[0].Remaining != 1 {
		t.Fatalf("%+v", d)
	}
}

// A user who may not load Functions gets EVALSHA, with one line saying why;
// with ScriptCall fcall, an error that says what to allow.
func TestFCallRefused(t *testing.T) {
	server := servers.Start(t, servers.Options{NoModule: true})
	server.Do("ACL", "SETUSER", "app", "on", ">secret", "~*", "+@all", "-function")
	app := redis.NewClient(&redis.Options{Addr: server.Addr(), Username: "app", Password: "secret"})
	defer app.Close()
	for _, call := range []ratelimit.ScriptCall{ratelimit.ScriptAuto, ratelimit.ScriptFCall} {
		client, err := goredis.New(app)
		if err != nil {
			t.Fatal(err)
		}
		log := &logs{}
		l, err := ratelimit.New(client, ratelimit.Options[string]{Key: keyed, Mode: ratelimit.Script, ScriptCall: call, Logger: log.logger(),
			Limits: one(ratelimit.Limit[string]{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: 3600})})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		d, err := l.Check(context.Background(), "k")
		if call == ratelimit.ScriptFCall {
			var mode *ratelimit.ModeError
			if !errors.As(err, &mode) || !strings.HasPrefix(err.Error(), "scriptCall 'fcall': this node refuses Redis Functions (NOPERM") {
				t.Fatalf("fcall only: %v", err)
			}
			continue
		}
		if err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
		check(t, l, "k")
		if got := strings.Count(log.String(), "EVALSHA, not FCALL"); got != 1 {
			t.Fatalf("%d lines: %s", got, log)
		}
	}
}
