package local

// The Limiter against the module (docs/clients.md, "When Redis cannot
// answer"): the same random RL.MULTI, RL.RELEASE and RL.RENEW calls, with
// the same given times, on a real redis-server with the module and in
// process; every reply field for field, and every error word for word.
// Each call runs in MULTI/EXEC with a PERSIST of its keys, so Redis
// expires nothing on its own clock while the given times run ahead or
// back (the Limiter keeps a key until it is fresh, as Redis does in use).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const maxTime = maxTimeUs

// limitChoices are each algorithm's (size, param): small and large, whole
// and fractional, the ends of the ranges, and params with a seventh
// decimal, which the module rounds.
var limitChoices = map[string][]struct {
	size  int64
	param string
}{
	"tokenbucket":   {{1, "1"}, {5, "0.5"}, {10, "2.5"}, {3, "0.001"}, {maxUnits, "1000000"}, {maxUnits, "9007.2"}, {1, "1000000000000"}, {1000000, "0.000001"}, {2, "0.0000015"}, {7, "2.4999995"}},
	"leakybucket":   {{1, "1"}, {5, "0.5"}, {10, "2.5"}, {3, "0.001"}, {maxUnits, "1000000"}, {1, "1000000000000"}, {1000000, "0.000001"}, {maxUnits, "9007.2"}, {4, "0.3333333"}},
	"fixedwindow":   {{1, "1"}, {5, "2"}, {10, "0.25"}, {3, "7.5"}, {2, "0.001"}, {maxUnits, "0.001"}, {4, "1000000000000"}, {3, "0.0009995"}, {6, "1.0000004"}},
	"slidingwindow": {{1, "1"}, {5, "2"}, {10, "0.25"}, {3, "7.5"}, {1000, "3"}, {2, "0.001"}, {maxUnits, "1000000000000"}, {7, "0.0333333"}, {maxUnits, "0.5"}},
	"slidinglog":    {{1, "1"}, {5, "2"}, {10, "0.25"}, {3, "7.5"}, {2, "0.001"}, {maxUnits, "0.5"}, {4, "1000000000000"}, {30, "0.0015"}},
	"concurrency":   {{1, "1"}, {3, "0.5"}, {5, "2.5"}, {2, "0.001"}, {maxUnits, "0.25"}, {2, "1000000000000"}, {4, "0.05"}},
}

// Each seed runs 8 keys of 8 limits in a row of this list, where the
// algorithms take turns: every seed has all six, and the 12 seeds below
// go through every choice above.
var algorithmOrder = []string{"tokenbucket", "leakybucket", "fixedwindow", "slidingwindow", "slidinglog", "concurrency"}

func isBucket(spec Spec) bool {
	return spec.Algorithm == "tokenbucket" || spec.Algorithm == "leakybucket"
}

func limitAt(i int) Spec {
	algorithm := algorithmOrder[i%len(algorithmOrder)]
	choices := limitChoices[algorithm]
	choice := choices[(i/len(algorithmOrder))%len(choices)]
	return Spec{Algorithm: algorithm, Size: choice.size, Param: choice.param}
}

// tally counts, per algorithm, the limits of the calls compared, by outcome.
type tally struct{ allowed, denied, never, released, renewed int }

// seconds is a time as the module reads it: seconds with six decimals.
func seconds(us int64) string {
	if us < 0 {
		return "-" + seconds(-us)
	}
	return fmt.Sprintf("%d.%06d", us/micro, us%micro)
}

// differential runs the calls on both sides and fails at the first reply
// or error that differs.
type differential struct {
	t      *testing.T
	client *redis.Client
	local  *Limiter
	seed   uint64
	step   int
}

// inRedis runs one command and a PERSIST of its keys, atomically: its
// reply, or its error.
func (d *differential) inRedis(args []any, keys []string) (any, error) {
	ctx := context.Background()
	var call *redis.Cmd
	_, err := d.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		call = pipe.Do(ctx, args...)
		for _, key := range keys {
			pipe.Persist(ctx, key)
		}
		return nil
	})
	if call.Err() != nil {
		return nil, call.Err()
	}
	if err != nil {
		d.t.Fatalf("seed %d step %d: %v: %v", d.seed, d.step, args, err)
	}
	return call.Val(), nil
}

// same fails the test unless both sides gave the same reply, or the same error.
func (d *differential) same(args []any, module any, moduleErr error, local any, localErr error) {
	d.t.Helper()
	sameErrors := moduleErr == nil && localErr == nil ||
		moduleErr != nil && localErr != nil && moduleErr.Error() == localErr.Error()
	if !sameErrors || moduleErr == nil && !reflect.DeepEqual(module, local) {
		d.t.Fatalf("seed %d step %d: %s\nmodule: %s %v\nlocal:  %s %v\n(rerun: RATELIMIT_SEED=%d go test -race -run %s ./internal/local/)",
			d.seed, d.step, short(args), short(module), moduleErr, short(local), localErr, d.seed, d.t.Name())
	}
}

// short is a value as %v prints it, cut to a screenful.
func short(value any) string {
	text := fmt.Sprint(value)
	if len(text) > 1000 {
		return text[:1000] + "..."
	}
	return text
}

// multi sends RL.MULTI to both sides, nowText standing for nowUs in Redis.
func (d *differential) multi(keys []string, nowUs int64, nowText string, specs []Spec) (Reply, bool) {
	args := []any{"RL.MULTI", len(keys)}
	for _, key := range keys {
		args = append(args, key)
	}
	args = append(args, nowText)
	for _, spec := range specs {
		args = append(args, strings.ToUpper(spec.Algorithm), spec.Size, spec.Param, spec.N)
	}
	module, moduleErr := d.inRedis(args, keys)
	reply, localErr := d.local.Multi(keys, nowUs, specs)
	var local any
	if localErr == nil {
		local = multiReply(reply)
	}
	d.same(args, module, moduleErr, local, localErr)
	return reply, localErr == nil
}

// multiReply is a Reply as go-redis gives RL.MULTI's.
func multiReply(reply Reply) any {
	out := []any{int64(0), reply.RetryAfterMs}
	if reply.Allowed {
		out[0] = int64(1)
	}
	for _, fields := range reply.Limits {
		limit := make([]any, len(fields))
		for i, field := range fields {
			limit[i] = field
		}
		out = append(out, limit)
	}
	return out
}

// release sends RL.RELEASE to both sides.
func (d *differential) release(key string, id int64, nowUs int64) [3]int64 {
	args := []any{"RL.RELEASE", key, id, seconds(nowUs)}
	module, moduleErr := d.inRedis(args, []string{key})
	reply, localErr := d.local.Release(key, id, nowUs)
	d.same(args, module, moduleErr, heldReplyAny(reply, localErr), localErr)
	return reply
}

// renew sends RL.RENEW to both sides.
func (d *differential) renew(key string, id int64, lease string, nowUs int64) [3]int64 {
	args := []any{"RL.RENEW", key, id, lease, seconds(nowUs)}
	module, moduleErr := d.inRedis(args, []string{key})
	reply, localErr := d.local.Renew(key, id, lease, nowUs)
	d.same(args, module, moduleErr, heldReplyAny(reply, localErr), localErr)
	return reply
}

func heldReplyAny(reply [3]int64, err error) any {
	if err != nil {
		return nil
	}
	return []any{reply[0], reply[1], reply[2]}
}

func TestLocalRepliesAsTheModule(t *testing.T) {
	client := moduleServer(t)
	// Seeds 0 to 11 every run, and one more from the clock (printed on
	// failure); RATELIMIT_SEED runs that one alone.
	seeds := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, uint64(time.Now().UnixNano())}
	if text := os.Getenv("RATELIMIT_SEED"); text != "" {
		seed, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			t.Fatalf("RATELIMIT_SEED: %v", err)
		}
		seeds = []uint64{seed}
	}
	tallies := map[string]*tally{}
	for _, algorithm := range algorithmOrder {
		tallies[algorithm] = &tally{}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if err := client.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			randomCalls(&differential{t: t, client: client, local: New(0), seed: seed}, tallies)
		})
	}
	if t.Failed() || len(seeds) == 1 {
		return
	}
	// Thousands of limits of every algorithm went through, admitted,
	// denied and never admissible alike; leases released and renewed.
	for algorithm, seen := range tallies {
		t.Logf("%s: %+v", algorithm, *seen)
		if seen.allowed < 1000 || seen.denied < 100 || seen.never < 100 {
			t.Errorf("%s: too few calls of some outcome: %+v", algorithm, *seen)
		}
	}
	if seen := tallies["concurrency"]; seen.released < 100 || seen.renewed < 100 {
		t.Errorf("concurrency: too few releases or renewals: %+v", *seen)
	}
}

// randomCalls is one seed's sequence: 2000 calls on 8 keys.
func randomCalls(d *differential, tallies map[string]*tally) {
	random := rand.New(rand.NewPCG(d.seed, d.seed))
	below := func(n int64) int64 { return random.Int64N(n) }
	pick := func(choices ...int64) int64 { return choices[random.IntN(len(choices))] }

	keys := make([]string, 8)
	limits := map[string]Spec{}
	var leaseKeys, otherKeys []string
	for i := range keys {
		keys[i] = fmt.Sprintf("{k}:%d", i)
		limits[keys[i]] = limitAt(int(d.seed%12)*8 + i)
		if limits[keys[i]].Algorithm == "concurrency" {
			leaseKeys = append(leaseKeys, keys[i])
		} else {
			otherKeys = append(otherKeys, keys[i])
		}
	}
	leaseIDs := map[string][]int64{}
	taken := map[string]int64{} // the time of the last call that took units, per key

	// Seed 0 starts at the epoch, seed 1 just before the last time there
	// is (and runs into it), the others anywhere between (the seed alone
	// says where: a run is the same every time).
	var now int64
	switch d.seed {
	case 0:
	case 1:
		now = maxTime - 700_000_000
	default:
		now = below(maxTime - 7_000_000_000)
	}
	for d.step = 0; d.step < 2000; d.step++ {
		// Steps of a window's length too, and a microsecond either side of
		// it, so that units leave exactly at a window's edge.
		now += pick(0, 1, below(1000), below(300_000), below(3_000_000), pick(1000, 250_000, 500_000, 1_000_000, 2_000_000)+pick(-1, 0, 1))
		// Now and then to the very microsecond a key's last units or lease
		// leave, or one either side of it (when that is within the hour).
		if key := keys[random.IntN(len(keys))]; below(10) == 0 && taken[key] > 0 && !isBucket(limits[key]) {
			if span, _ := micros(limits[key].Param); span <= 3600*micro {
				now = max(now, taken[key]+int64(span)+pick(-1, 0, 1))
			}
		}
		now = min(now, maxTime)
		// Now and then a call from the past: the module counts it as no time passed.
		at := now
		if below(8) == 0 {
			at = max(0, now-below(2_000_000))
		}

		switch {
		case below(6) == 0:
			// A lease given back or renewed: held, run out, released
			// already, never given; on a key of another algorithm now and then.
			key := leaseKeys[random.IntN(len(leaseKeys))]
			if below(20) == 0 {
				key = otherKeys[random.IntN(len(otherKeys))]
			}
			ids := append([]int64{0, 1, maxUnits, below(4)}, leaseIDs[key]...)
			id := ids[random.IntN(len(ids))]
			if below(2) == 0 {
				// For the limit's own lease, a shorter or a longer one, or the longest.
				leases := []string{limits[key].Param, "0.001", "0.3", "5", "1000000000000"}
				if d.renew(key, id, leases[random.IntN(len(leases))], at)[0] == 1 {
					tallies["concurrency"].renewed++
				}
			} else if d.release(key, id, at)[0] == 1 {
				tallies["concurrency"].released++
			}
		case below(40) == 0:
			badCall(d, random, keys, limits, at)
		default:
			var chosen []string
			for _, key := range keys {
				if below(3) == 0 && len(chosen) < 3 {
					chosen = append(chosen, key)
				}
			}
			if len(chosen) == 0 {
				chosen = append(chosen, keys[random.IntN(len(keys))])
			}
			specs := make([]Spec, len(chosen))
			for i, key := range chosen {
				spec := limits[key]
				size := spec.Size
				spread := int64(1)
				if size > 1_000_000 {
					spread = below(size)
				}
				spec.N = min(maxUnits, pick(0, 1, 1, 2, below(min(size, 12)+1), size, size+1, spread))
				specs[i] = spec
			}
			reply, ok := d.multi(chosen, at, seconds(at), specs)
			if !ok {
				d.t.Fatalf("seed %d step %d: a valid call failed", d.seed, d.step)
			}
			for i, key := range chosen {
				seen := tallies[specs[i].Algorithm]
				fields := reply.Limits[i]
				switch {
				case fields[0] == 1:
					seen.allowed++
				case fields[3] == -1:
					seen.never++
				default:
					seen.denied++
				}
				if reply.Allowed && specs[i].N > 0 {
					taken[key] = at
				}
				if specs[i].Algorithm == "concurrency" && reply.Allowed && fields[5] > 0 {
					leaseIDs[key] = append(leaseIDs[key], fields[5])
				}
			}
		}
	}
}

// badCall sends a call the module refuses, or one at the edge of what it
// takes, or a key of another algorithm (a look, so a missing key stays
// missing): the same error, or the same reply, from both sides.
func badCall(d *differential, random *rand.Rand, keys []string, limits map[string]Spec, at int64) {
	key := keys[random.IntN(len(keys))]
	spec := limits[key]
	spec.N = 1
	nowText := seconds(at)
	var callKeys = []string{key}
	switch random.IntN(12) {
	case 0:
		spec.Algorithm = []string{"bogus", "", "TOKEN_BUCKET", "gcra"}[random.IntN(4)]
	case 1:
		spec.Size = []int64{0, -1, maxUnits + 1, -maxUnits}[random.IntN(4)]
	case 2:
		spec.Param = []string{"0", "", ".", "1e3", " 1", "-1", "+1", "0.0000004", "1.2.3", "0x10", "١", "99999999999999999999", "000000000000000000001"}[random.IntN(13)]
	case 3:
		spec.Param = []string{"1000000000000.0000004", "1000000000000.0000005", "0.0009994", "0.0009995", "0.0000005", "1000000000001", "3."}[random.IntN(7)]
	case 4: // capacity / rate just past 10^12 s, or just within
		spec = Spec{Algorithm: []string{"tokenbucket", "leakybucket"}[random.IntN(2)], Size: maxUnits, Param: []string{"9007", "9007.2", "9007.199254", "9007.199255"}[random.IntN(4)], N: 0}
	case 5:
		spec.N = []int64{-1, maxUnits + 1}[random.IntN(2)]
	case 6:
		at = []int64{-1, maxTime + 1}[random.IntN(2)]
		nowText = seconds(at)
	case 7:
		callKeys = []string{key, key}
	case 8, 9: // another algorithm's limit on the key: WRONGTYPE when it holds state
		spec = limits[keys[random.IntN(len(keys))]]
		spec.N = 0
	case 10:
		d.release(key, []int64{-1, maxUnits + 1}[random.IntN(2)], at)
		return
	case 11:
		d.renew(key, 1, []string{"0", "0.0009994", "x", "1000000000000.000001", ""}[random.IntN(5)], at)
		return
	}
	specs := make([]Spec, len(callKeys))
	for i := range specs {
		specs[i] = spec
	}
	d.multi(callKeys, at, nowText, specs)
}

func TestWrongTypeChangesNothing(t *testing.T) {
	client := moduleServer(t)
	d := &differential{t: t, client: client, local: New(0)}
	now := int64(1_700_000_000_000_000)
	keys := []string{"{k}:a", "{k}:b"}
	specs := []Spec{{Algorithm: "fixedwindow", Size: 5, Param: "60", N: 1}, {Algorithm: "tokenbucket", Size: 5, Param: "1", N: 1}}
	d.multi(keys, now, seconds(now), specs)
	swapped := []Spec{specs[0], {Algorithm: "leakybucket", Size: 5, Param: "1", N: 1}}
	if _, err := d.local.Multi(keys, now, swapped); !errors.Is(err, ErrWrongType) {
		t.Fatalf("another algorithm's key: %v, want ErrWrongType", err)
	}
	d.multi(keys, now, seconds(now), swapped)
	d.release("{k}:a", 1, now)
	d.renew("{k}:a", 1, "5", now)
	// The fixed window kept its count: 3 left after one more.
	reply, _ := d.multi(keys, now, seconds(now), specs)
	if got := reply.Limits[0][:2]; !reflect.DeepEqual(got, []int64{1, 3}) {
		t.Fatalf("the fixed window after WRONGTYPE: %v, want [1 3]", got)
	}
}

// The module's examples (docs/commands.md), in process: the numbers a
// reader checks by hand.
func TestTheDocumentedExamples(t *testing.T) {
	local := New(0)
	at := func(seconds float64) int64 { return int64(seconds * micro) }
	take := func(key, algorithm string, size int64, param string, now, n int64) func() ([]int64, error) {
		return func() ([]int64, error) {
			reply, err := local.Multi([]string{key}, now, []Spec{{Algorithm: algorithm, Size: size, Param: param, N: n}})
			if err != nil {
				return nil, err
			}
			return reply.Limits[0], nil
		}
	}
	lease := func(reply [3]int64, err error) ([]int64, error) { return reply[:], err }
	for i, step := range []struct {
		call func() ([]int64, error)
		want []int64
	}{
		{take("user:42", "tokenbucket", 10, "1", at(1000), 1), []int64{1, 9, 10, 0, 1000}},
		{take("user:42", "tokenbucket", 10, "1", at(1000), 9), []int64{1, 0, 10, 0, 10000}},
		{take("user:42", "tokenbucket", 10, "1", at(1000.25), 1), []int64{0, 0, 10, 750, 9750}},
		{take("user:42", "tokenbucket", 10, "1", at(1002.5), 1), []int64{1, 1, 10, 0, 8500}},
		{take("user:42", "tokenbucket", 10, "1", at(1002.5), 11), []int64{0, 1, 10, -1, 8500}},
		{take("jobs:42", "leakybucket", 3, "2", at(1000), 1), []int64{1, 2, 3, 0, 500, 0}},
		{take("jobs:42", "leakybucket", 3, "2", at(1000), 1), []int64{1, 1, 3, 0, 1000, 500}},
		{take("jobs:42", "leakybucket", 3, "2", at(1000), 2), []int64{0, 1, 3, 500, 1000, 0}},
		{take("jobs:42", "leakybucket", 3, "2", at(1000.5), 1), []int64{1, 1, 3, 0, 1000, 500}},
		{take("api:42", "fixedwindow", 100, "60", at(1700000050), 1), []int64{1, 99, 100, 0, 50000}},
		{take("api:42", "fixedwindow", 100, "60", at(1700000099), 99), []int64{1, 0, 100, 0, 1000}},
		{take("api:42", "fixedwindow", 100, "60", at(1700000099.5), 1), []int64{0, 0, 100, 500, 500}},
		{take("api:7", "slidingwindow", 10, "10", at(1700000005), 8), []int64{1, 2, 10, 0, 15000}},
		{take("api:7", "slidingwindow", 10, "10", at(1700000012.5), 3), []int64{1, 1, 10, 0, 17500}},
		{take("api:7", "slidingwindow", 10, "10", at(1700000012.5), 2), []int64{0, 1, 10, 1250, 17500}},
		{take("login:42", "slidinglog", 3, "10", at(1000), 1), []int64{1, 2, 3, 0, 10000}},
		{take("login:42", "slidinglog", 3, "10", at(1004), 2), []int64{1, 0, 3, 0, 10000}},
		{take("login:42", "slidinglog", 3, "10", at(1009), 1), []int64{0, 0, 3, 1000, 5000}},
		{take("login:42", "slidinglog", 3, "10", at(1010), 1), []int64{1, 0, 3, 0, 10000}},
		{take("db:7", "concurrency", 3, "30", at(1000), 2), []int64{1, 1, 3, 0, 30000, 1}},
		{take("db:7", "concurrency", 3, "30", at(1010), 1), []int64{1, 0, 3, 0, 30000, 2}},
		{take("db:7", "concurrency", 3, "30", at(1015), 1), []int64{0, 0, 3, 15000, 25000, 0}},
		{func() ([]int64, error) { return lease(local.Renew("db:7", 1, "30", at(1020))) }, []int64{1, 3, 30000}},
		{func() ([]int64, error) { return lease(local.Release("db:7", 2, at(1021))) }, []int64{1, 2, 29000}},
		{take("db:7", "concurrency", 3, "30", at(1021), 1), []int64{1, 0, 3, 0, 30000, 3}},
		{func() ([]int64, error) { return lease(local.Release("db:7", 2, at(1022))) }, []int64{0, 3, 29000}},
	} {
		if got, err := step.call(); err != nil || !reflect.DeepEqual(got, step.want) {
			t.Errorf("step %d: got %v %v, want %v", i, got, err, step.want)
		}
	}
}

// Every refused argument, on both sides: the same error, and nothing
// written anywhere.
func TestArgumentErrorsAsTheModule(t *testing.T) {
	client := moduleServer(t)
	d := &differential{t: t, client: client, local: New(0)}
	now := int64(1_700_000_000_000_000)
	good := Spec{Algorithm: "fixedwindow", Size: 3, Param: "60", N: 1}
	many := func(n int) ([]string, []Spec) {
		keys, specs := make([]string, n), make([]Spec, n)
		for i := range keys {
			keys[i], specs[i] = fmt.Sprintf("{k}:%d", i), good
		}
		return keys, specs
	}
	keys1000, specs1000 := many(1000)
	keys1001, specs1001 := many(1001)
	for i, c := range []struct {
		keys  []string
		now   int64
		specs []Spec
		err   error
	}{
		{nil, now, nil, errArity},
		{nil, now, []Spec{good}, errArity},
		{nil, now, []Spec{good, good}, errNumKeys},
		{[]string{"a"}, now, nil, errArity},
		{[]string{"a", "b"}, now, []Spec{good}, errArity},
		{[]string{"a"}, now, []Spec{good, good}, errArity},
		{keys1001, now, specs1001, errNumKeys},
		{keys1000, now, specs1000, nil},
		{[]string{"a", "b"}, now, []Spec{good, {Algorithm: "gcra", Size: 1, Param: "1"}}, errAlgorithm},
		{[]string{"a"}, now, []Spec{{Algorithm: "tokenbucket", Size: 0, Param: "1"}}, errCapacity},
		{[]string{"a"}, now, []Spec{{Algorithm: "leakybucket", Size: 1, Param: "0.0000004"}}, errRate},
		{[]string{"a"}, now, []Spec{{Algorithm: "tokenbucket", Size: maxUnits, Param: "9007"}}, errFillTime},
		{[]string{"a"}, now, []Spec{{Algorithm: "slidinglog", Size: maxUnits + 1, Param: "1"}}, errLimit},
		{[]string{"a"}, now, []Spec{{Algorithm: "slidingwindow", Size: 1, Param: "0.0009994"}}, errWindow},
		{[]string{"a"}, now, []Spec{{Algorithm: "concurrency", Size: 1, Param: "1e3"}}, errLease},
		{[]string{"a"}, now, []Spec{{Algorithm: "fixedwindow", Size: 1, Param: "1", N: -1}}, errCount},
		{[]string{"a", "b"}, -1, []Spec{good, good}, errNow},
		{[]string{"a", "b"}, maxTime + 1, []Spec{good, good}, errNow},
		// The first refused argument is the one reported.
		{[]string{"a", "b"}, -1, []Spec{{Algorithm: "tokenbucket", Size: 1, Param: "0"}, {Algorithm: "x"}}, errRate},
		{[]string{"a", "a"}, -1, []Spec{good, good}, errNow},
		{[]string{"a", "a"}, now, []Spec{good, good}, errRepeated},
	} {
		scratch := New(0)
		if _, err := scratch.Multi(c.keys, c.now, c.specs); !errors.Is(err, c.err) {
			t.Errorf("case %d: %v, want %v", i, err, c.err)
		}
		if c.err != nil && len(scratch.keys) != 0 {
			t.Errorf("case %d: a refused call wrote %d keys", i, len(scratch.keys))
		}
		d.step = i
		d.multi(c.keys, c.now, seconds(c.now), c.specs)
	}
	for i, c := range []struct {
		id    int64
		lease string
		err   error
	}{
		{-1, "1", errLeaseID},
		{maxUnits + 1, "1", errLeaseID},
		{maxUnits, "0.0009994", errLease},
		{maxUnits, "1000000000000.0000005", errLease},
		{maxUnits, "1000000000000.0000004", nil},
		{0, "0.0009995", nil},
	} {
		d.step = 100 + i
		if _, err := New(0).Renew("a", c.id, c.lease, now); !errors.Is(err, c.err) {
			t.Errorf("renew case %d: %v, want %v", i, err, c.err)
		}
		d.renew("a", c.id, c.lease, now)
		d.release("a", c.id, now)
	}
	if keys, err := client.Keys(context.Background(), "*").Result(); err != nil || len(keys) != 1000 {
		t.Fatalf("keys in Redis: %d %v, want the 1000 of the one good call", len(keys), err)
	}
}

// Calls at the very microsecond something runs out (a lease, a unit in
// the log, a window, a token's refill) and one either side of it, on
// both sides.
func TestEdgesAsTheModule(t *testing.T) {
	client := moduleServer(t)
	d := &differential{t: t, client: client, local: New(0)}
	t0 := int64(1_700_000_000_000_000) // a multiple of every window below
	take := func(key string, at int64, spec Spec) []int64 {
		t.Helper()
		d.step++
		reply, _ := d.multi([]string{key}, at, seconds(at), []Spec{spec})
		return reply.Limits[0]
	}
	second := int64(micro)
	for _, spec := range []Spec{
		{Algorithm: "tokenbucket", Size: 2, Param: "1"},
		{Algorithm: "leakybucket", Size: 2, Param: "1"},
		{Algorithm: "fixedwindow", Size: 2, Param: "1"},
		{Algorithm: "slidingwindow", Size: 2, Param: "1"},
		{Algorithm: "slidinglog", Size: 2, Param: "1"},
		{Algorithm: "concurrency", Size: 2, Param: "1"},
	} {
		key := "{e}:" + spec.Algorithm
		for _, at := range []int64{t0, t0 + 1, t0 + second - 1, t0 + second, t0 + second + 1, t0 + 2*second - 1, t0 + 2*second, t0 + 2*second + 1, t0 + 4*second} {
			for _, n := range []int64{1, 0, 2} {
				spec.N = n
				take(key, at, spec)
			}
		}
	}
	// Lease ids start again at 1 once every lease has run out, at the very microsecond.
	spec := Spec{Algorithm: "concurrency", Size: 3, Param: "1", N: 1}
	for i, at := range []int64{t0, t0 + 1, t0 + 2} {
		if id := take("{e}:ids", at, spec)[5]; id != int64(i+1) {
			t.Fatalf("lease %d: id %d", i+1, id)
		}
	}
	spec.N = 2
	if fields := take("{e}:ids", t0+second, spec); fields[0] != 0 || fields[3] != 1 {
		t.Fatalf("2 slots when the first lease ran out: %v, want denied, retry 1 ms", fields)
	}
	spec.N = 1
	if id := take("{e}:ids", t0+second, spec)[5]; id != 4 {
		t.Fatalf("a lease while others are held: id %d, want 4", id)
	}
	d.release("{e}:ids", 2, t0+second+1)
	d.renew("{e}:ids", 3, "0.001", t0+second+2)
	for _, at := range []int64{t0 + second + 1002, t0 + 2*second, t0 + 2*second} {
		take("{e}:ids", at, spec)
	}
}
