package ratelimit_test

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// A request with one limit sends that limit's own command (RL.ACQUIRE for
// a concurrency limit), cheaper for Redis than RL.MULTI and answering the
// same fields; two limits or more, RL.MULTI. In module mode as it is, in
// script mode as FCALL of the library. The server's SLOWLOG (every command,
// with its arguments) shows what was sent.
func TestOneLimitSendsItsOwnCommand(t *testing.T) {
	for _, mode := range []ratelimit.Mode{ratelimit.Module, ratelimit.Script} {
		t.Run(string(mode), func(t *testing.T) {
			server := servers.Start(t, servers.Options{NoModule: mode == ratelimit.Script})
			server.Do("CONFIG", "SET", "slowlog-log-slower-than", "0")
			server.Do("CONFIG", "SET", "slowlog-max-len", "1000")
			// wire is a call as the server gets it; in script mode, FCALL numkeys keys... COMMAND args...
			wire := func(command string, keys []string, args ...string) []string {
				numkeys := strconv.Itoa(len(keys))
				if mode == ratelimit.Script {
					return append(append(append([]string{"FCALL", ratelimit.LibraryName, numkeys}, keys...), command), args...)
				}
				call := []string{command}
				if command == "RL.MULTI" {
					call = append(call, numkeys)
				}
				return append(append(call, keys...), args...)
			}
			ctx := context.Background()
			limiter := func(limits ...ratelimit.Limit[string]) *ratelimit.Limiter[string] {
				opts := ratelimit.Options[string]{Mode: mode, Limits: limits}
				if mode == ratelimit.Script {
					opts.ScriptCall = ratelimit.ScriptFCall
				}
				return newLimiter(t, server, opts)
			}

			bucket := limiter(ratelimit.Limit[string]{Name: "rate", Limit: 5, Rate: 1})
			check(t, bucket, "warm") // script mode loads the library on the first call
			var d *ratelimit.Decision
			got := sent(t, server, func() { d = check(t, bucket, "k") })
			want := [][]string{wire("RL.TOKENBUCKET", []string{"ratelimit:{k}:rate"}, "5", "1", "*", "1")}
			if !reflect.DeepEqual(got, want) || !d.Allowed || d.Limits[0].Remaining != 4 || d.Limits[0].Limit != 5 {
				t.Fatalf("token bucket: sent %q, want %q; %+v", got, want, d)
			}

			slots := limiter(ratelimit.Limit[string]{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 2, Lease: 30})
			got = sent(t, server, func() { d = check(t, slots, "k") })
			want = [][]string{wire("RL.ACQUIRE", []string{"ratelimit:{k}:slots"}, "2", "30", "*", "1")}
			if !reflect.DeepEqual(got, want) || !d.Allowed || d.Limits[0].LeaseID != 1 || d.Limits[0].Remaining != 1 {
				t.Fatalf("concurrency: sent %q, want %q; %+v", got, want, d)
			}
			got = sent(t, server, func() { slots.Release(ctx, d) })
			want = [][]string{wire("RL.RELEASE", []string{"ratelimit:{k}:slots"}, "1", "*")}
			if !reflect.DeepEqual(got, want) || server.Do("EXISTS", "ratelimit:{k}:slots") != "0" {
				t.Fatalf("release: sent %q, want %q", got, want)
			}

			two := limiter(ratelimit.Limit[string]{Name: "rate", Limit: 5, Rate: 1},
				ratelimit.Limit[string]{Name: "hourly", Algorithm: ratelimit.FixedWindow, Limit: 3, Window: 3600})
			got = sent(t, server, func() { d = check(t, two, "k") })
			want = [][]string{wire("RL.MULTI", []string{"ratelimit:{k}:rate", "ratelimit:{k}:hourly"}, "*", "TOKENBUCKET", "5", "1", "1", "FIXEDWINDOW", "3", "3600", "1")}
			if !reflect.DeepEqual(got, want) || !d.Allowed || limitOf(t, d, "rate").Remaining != 3 || limitOf(t, d, "hourly").Remaining != 2 {
				t.Fatalf("two limits: sent %q, want %q; %+v", got, want, d)
			}
		})
	}
}

// sent is what the limiter sent while do ran: the arguments of each
// RL.* and FCALL command the server logged, oldest first.
func sent(t *testing.T, server *servers.Server, do func()) [][]string {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer client.Close()
	ctx := context.Background()
	if err := client.SlowLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	do()
	entries, err := client.SlowLogGet(ctx, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for i := len(entries) - 1; i >= 0; i-- {
		args := entries[i].Args
		if strings.HasPrefix(strings.ToUpper(args[0]), "RL.") || strings.EqualFold(args[0], "FCALL") {
			calls = append(calls, args)
		}
	}
	return calls
}
