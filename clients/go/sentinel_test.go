package ratelimit_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredis"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// A go-redis failover client: the limiter's own connections find the
// primary through the Sentinel, as the app's do.
func TestSentinelFailoverClient(t *testing.T) {
	primary := servers.Start(t, servers.Options{})
	sentinel := servers.StartSentinel(t, primary)
	app := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{sentinel.Addr()}})
	defer app.Close()
	client, err := goredis.New(app)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(client, ratelimit.Options[string]{Key: keyed, Limits: one(ratelimit.Limit[string]{Name: "n", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: 60})})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, want := range []bool{true, true, false} {
		if d := check(t, l, "k"); d.Allowed != want {
			t.Fatalf("check %d: %+v", i, d)
		}
	}
	if got := primary.Do("TYPE", "ratelimit:{k}:n"); got != "ratelimit" {
		t.Fatalf("TYPE %s", got)
	}
}
