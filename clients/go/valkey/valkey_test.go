package valkey_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/valkey"
)

// No goroutine of ours is left after Close. valkey-go's own lazy topology
// refresh (started after a connection error) sleeps up to a second and ends
// by itself after its client closed: not ours to wait for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valkey-io/valkey-go.(*call).LazyDo.func1"))
}

func keyed(_ context.Context, req string) (string, error) { return req, nil }

func newLimiter(t *testing.T, addrs []string, opts ratelimit.Options[string]) *ratelimit.Limiter[string] {
	t.Helper()
	client, err := valkey.New(valkeygo.ClientOption{InitAddress: addrs})
	if err != nil {
		t.Fatal(err)
	}
	opts.Key = keyed
	l, err := ratelimit.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func check(t *testing.T, l *ratelimit.Limiter[string], req string) *ratelimit.Decision {
	t.Helper()
	d, err := l.Check(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var limits = []ratelimit.Limit[string]{
	{Name: "window", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: 3600},
	{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 5, Lease: 30},
}

// Through valkey-go: module mode, script mode (FCALL), auto; all or nothing, leases.
func exercise(t *testing.T, server *servers.Server, mode ratelimit.Mode, wantType string) {
	l := newLimiter(t, []string{server.Addr()}, ratelimit.Options[string]{Mode: mode, Limits: limits})
	a := check(t, l, "k")
	b := check(t, l, "k")
	denied := check(t, l, "k")
	window, _ := a.Limit("window")
	slots, _ := b.Limit("slots")
	if !a.Allowed || !b.Allowed || window.Remaining != 1 || slots.LeaseID != 2 || slots.Remaining != 3 || denied.Allowed || denied.RetryAfterMs < 3599000 {
		t.Fatalf("%s: %+v %+v %+v", mode, a, b, denied)
	}
	if held, _ := denied.Limit("slots"); held.LeaseID != 0 || held.Remaining != 3 {
		t.Fatalf("%s: a denial took a lease: %+v", mode, held)
	}
	l.Release(context.Background(), a)
	if renewed, err := l.Renew(context.Background(), b); err != nil || !renewed {
		t.Fatalf("%s: renew %v %v", mode, renewed, err)
	}
	if got := server.Do("TYPE", "ratelimit:{k}:window"); got != wantType {
		t.Fatalf("%s: TYPE %s", mode, got)
	}
}

func TestRedisWithTheModule(t *testing.T) {
	exercise(t, servers.Start(t, servers.Options{}), ratelimit.Auto, "ratelimit")
}

func TestRedisWithoutTheModule(t *testing.T) {
	server := servers.Start(t, servers.Options{NoModule: true})
	exercise(t, server, ratelimit.Auto, "string")
	if stats := server.Do("INFO", "commandstats"); !strings.Contains(stats, "cmdstat_fcall:") {
		t.Fatalf("not through FCALL: %s", stats)
	}
}

// Valkey 9 (scripts/servers.sh installs it: WITH_SERVERS=1 make test), with and without the module.
func TestValkey9(t *testing.T) {
	binary := servers.Valkey9()
	if binary == "" {
		// CI installs it: there a missing server is a failure, never a skip.
		if os.Getenv("WITH_SERVERS") == "1" {
			t.Fatal("WITH_SERVERS=1 but no Valkey 9 in target/servers: scripts/servers.sh install failed?")
		}
		t.Skip("no Valkey 9: scripts/servers.sh install puts it in target/servers (WITH_SERVERS=1 make test does)")
	}
	exercise(t, servers.Start(t, servers.Options{Binary: binary}), ratelimit.Auto, "ratelimit")
	server := servers.Start(t, servers.Options{Binary: binary, NoModule: true})
	exercise(t, server, ratelimit.Script, "string")
	if stats := server.Do("INFO", "commandstats"); !strings.Contains(stats, "cmdstat_fcall:") {
		t.Fatalf("not through FCALL: %s", stats)
	}
}

// A cluster through valkey-go: limits of two partition keys, a denial gives back the other node's units.
func TestCluster(t *testing.T) {
	cluster := servers.StartCluster(t, servers.Options{})
	client, err := valkey.New(valkeygo.ClientOption{InitAddress: cluster.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	if !client.Cluster() {
		t.Fatal("not seen as a cluster")
	}
	l, err := ratelimit.New(client, ratelimit.Options[string]{Key: keyed, Limits: []ratelimit.Limit[string]{
		{Name: "per-user", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: 3600},
		{Name: "per-ip", Algorithm: ratelimit.SlidingLog, Limit: 100, Window: 3600, Key: func(context.Context, string) (string, error) { return "ip:1", nil }},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	user := ""
	for i := 0; user == "" || cluster.OwnerOf("ratelimit:{"+user+"}:per-user") == cluster.OwnerOf("ratelimit:{ip:1}:per-ip"); i++ {
		user = "user:" + string(rune('a'+i))
	}
	check(t, l, user)
	d := check(t, l, user)
	ip, _ := d.Limit("per-ip")
	if d.Allowed || ip.Remaining != 99 {
		t.Fatalf("%+v", d)
	}
	if got := cluster.OwnerOf("ratelimit:{ip:1}:per-ip").Do("RL.PEEK", "ratelimit:{ip:1}:per-ip", "SLIDINGLOG", "100", "3600", "*", "0"); !strings.HasPrefix(got, "1\n99\n") {
		t.Fatalf("per-ip: %q", got)
	}
}

// A check that timed out on a stopped server is undone once it runs.
func TestTimedOutCheckUndone(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	l := newLimiter(t, []string{server.Addr()}, ratelimit.Options[string]{Timeout: 200 * time.Millisecond, OnUnavailable: ratelimit.Open,
		Limits: []ratelimit.Limit[string]{limits[0], {Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 5, Lease: 30, OnUnavailable: ratelimit.Open}}})
	check(t, l, "warm")
	server.Pause()
	if d := check(t, l, "k"); d.Outcome != ratelimit.OutcomeUnavailableOpen {
		t.Fatalf("%+v", d)
	}
	time.Sleep(300 * time.Millisecond)
	server.Resume()
	resumed := time.Now()
	for time.Since(resumed) < 1500*time.Millisecond || server.Do("EXISTS", "ratelimit:{k}:window", "ratelimit:{k}:slots") != "0" {
		if time.Since(resumed) > 5*time.Second {
			t.Fatal("the timed-out check's units or lease are still held")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Closing while a timed-out check's reply is awaited (the server stopped)
// returns at once, leaving no goroutine (TestMain's goleak).
func TestCloseWhileALateReplyIsAwaited(t *testing.T) {
	server := servers.Start(t, servers.Options{})
	client, err := valkey.New(valkeygo.ClientOption{InitAddress: []string{server.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(client, ratelimit.Options[string]{Key: keyed, Timeout: 200 * time.Millisecond, Limits: limits[:1]})
	if err != nil {
		t.Fatal(err)
	}
	check(t, l, "warm")
	server.Pause()
	defer server.Resume()
	if d := check(t, l, "k"); d.Outcome != ratelimit.OutcomeUnavailableOpen {
		t.Fatalf("%+v", d)
	}
	started := time.Now()
	l.Close()
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("Close took %s", took)
	}
}
