package ratelimit_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

func clusterLimiter(t *testing.T, c *servers.Cluster, opts ratelimit.Options[string]) *ratelimit.Limiter[string] {
	t.Helper()
	app := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer app.Close()
	client, err := goredis.New(app)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Key == nil {
		opts.Key = keyed
	}
	l, err := ratelimit.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Limits of different partition keys live on different nodes: one call
// each, and when one denies, what the others took is given back.
func TestClusterAcrossSlots(t *testing.T) {
	for _, withModule := range []bool{true, false} {
		cluster := servers.StartCluster(t, servers.Options{NoModule: !withModule})
		user := func(_ context.Context, req string) (string, error) { return "user:" + req, nil }
		ip := func(_ context.Context, req string) (string, error) { return "ip:203.0.113.7", nil }
		l := clusterLimiter(t, cluster, ratelimit.Options[string]{Limits: []ratelimit.Limit[string]{
			{Name: "per-user", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: 3600, Key: user},
			{Name: "per-ip", Algorithm: ratelimit.SlidingLog, Limit: 100, Window: 3600, Key: ip},
			{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 5, Lease: 30, Key: ip},
		}})
		ipNode := cluster.OwnerOf("ratelimit:{ip:203.0.113.7}:per-ip")
		id, userNode := "", ipNode
		for i := 1; userNode == ipNode; i++ { // a user whose key is on another node
			id = strconv.Itoa(i)
			userNode = cluster.OwnerOf("ratelimit:{user:" + id + "}:per-user")
		}
		d := check(t, l, id)
		if !d.Allowed || limitOf(t, d, "per-ip").Remaining != 99 || limitOf(t, d, "slots").LeaseID == 0 {
			t.Fatalf("%+v", d)
		}
		denied := check(t, l, id)
		ipPart, slotsPart := limitOf(t, denied, "per-ip"), limitOf(t, denied, "slots")
		if denied.Allowed || limitOf(t, denied, "per-user").Allowed || ipPart.Remaining != 99 || slotsPart.LeaseID != 0 || slotsPart.Remaining != 4 {
			t.Fatalf("denied: %+v", denied)
		}
		// On the ip node: one unit and one lease, the first request's (a peek answers as if taking one more).
		ipOnly := clusterLimiter(t, cluster, ratelimit.Options[string]{Key: ip, Limits: []ratelimit.Limit[string]{
			{Name: "per-ip", Algorithm: ratelimit.SlidingLog, Limit: 100, Window: 3600},
			{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 5, Lease: 30},
		}})
		peeked, err := ipOnly.Peek(context.Background(), id)
		if err != nil || limitOf(t, peeked, "per-ip").Remaining != 98 || limitOf(t, peeked, "slots").Remaining != 3 {
			t.Fatalf("after the denial: %+v %v", peeked, err)
		}
		l.Release(context.Background(), d)
		if got := ipNode.Do("EXISTS", "ratelimit:{ip:203.0.113.7}:slots"); got != "0" {
			t.Fatal("the lease is still held")
		}
		want := "ratelimit"
		if !withModule {
			want = "string"
		}
		if got := userNode.Do("TYPE", "ratelimit:{user:"+id+"}:per-user"); got != want {
			t.Fatalf("module %v: TYPE %s", withModule, got)
		}
	}
}

// A slot that moved (resharding) is followed: MOVED, then the new owner.
func TestClusterSlotMoved(t *testing.T) {
	cluster := servers.StartCluster(t, servers.Options{})
	l := clusterLimiter(t, cluster, ratelimit.Options[string]{Limits: one(ratelimit.Limit[string]{Name: "n", Algorithm: ratelimit.SlidingLog, Limit: 10, Window: 3600})})
	key := "ratelimit:{k}:n"
	check(t, l, "k")
	target := cluster.MoveSlot(key)
	d := check(t, l, "k")
	if d.Outcome != ratelimit.OutcomeAllowed || d.Limits[0].Remaining != 8 {
		t.Fatalf("after the move: %+v", d)
	}
	if got := target.Do("RL.PEEK", key, "SLIDINGLOG", "10", "3600", "*", "0"); !strings.HasPrefix(got, "1\n8\n") {
		t.Fatalf("on the new owner: %q", got)
	}
}
