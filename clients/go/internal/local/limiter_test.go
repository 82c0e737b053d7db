package local

import (
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTheLeastRecentlyUsedKeyGoesFirst(t *testing.T) {
	local := New(2)
	now := int64(1_700_000_000_000_000)
	remaining := func(key string, n int64) int64 {
		t.Helper()
		reply, err := local.Multi([]string{key}, now, []Spec{{Algorithm: "fixedwindow", Size: 3, Param: "60", N: n}})
		if err != nil {
			t.Fatal(err)
		}
		return reply.Limits[0][1]
	}
	steps := []struct {
		key        string
		n, remains int64
	}{
		{"a", 1, 2}, {"b", 1, 2}, {"a", 1, 1},
		{"c", 1, 2},              // b was used longest ago: forgotten
		{"b", 0, 3}, {"a", 0, 1}, // a look is a use
		{"d", 1, 2}, // so c goes, not a
		{"c", 0, 3}, {"a", 0, 1},
	}
	for i, step := range steps {
		if got := remaining(step.key, step.n); got != step.remains {
			t.Fatalf("step %d (%s, n %d): remaining %d, want %d", i, step.key, step.n, got, step.remains)
		}
	}
}

func TestAFreshStateForgetsTheKey(t *testing.T) {
	local := New(0)
	now := int64(1_700_000_000_000_000)
	reply, err := local.Multi([]string{"db"}, now, []Spec{{Algorithm: "concurrency", Size: 2, Param: "30", N: 1}})
	if err != nil || reply.Limits[0][5] != 1 {
		t.Fatalf("acquire: %v %v", reply, err)
	}
	if got, err := local.Release("db", 1, now); err != nil || got != [3]int64{1, 0, 0} {
		t.Fatalf("release of the last lease: %v %v, want [1 0 0]", got, err)
	}
	// Gone, as Redis deletes it: another algorithm may use the key now.
	if _, err := local.Multi([]string{"db"}, now, []Spec{{Algorithm: "tokenbucket", Size: 2, Param: "1", N: 1}}); err != nil {
		t.Fatalf("the released key still holds leases: %v", err)
	}
	if len(local.keys) != 1 || local.recent.Len() != 1 {
		t.Fatalf("%d keys, %d in the LRU list, want 1", len(local.keys), local.recent.Len())
	}
}

func TestMicros(t *testing.T) {
	for text, want := range map[string]uint64{
		"0": 0, "12": 12_000_000, "0.5": 500_000, ".25": 250_000, "3.": 3_000_000,
		"0.0000004": 0, "0.0000005": 1, "2.4999995": 2_500_000, "0.1234564999": 123_456,
		"000000000000000000001": 0, // 21 digits: refused, as the module refuses them
		"18446744073709.551615": 18446744073709551615, "18446744073709.5516155": 0, "18446744073709.551616": 0,
	} {
		got, ok := micros(text)
		if wantOK := want != 0 || text == "0" || text == "0.0000004"; got != want || ok != wantOK {
			t.Errorf("micros(%q) = %d %v, want %d %v", text, got, ok, want, wantOK)
		}
	}
	for _, bad := range []string{"", ".", "-1", "+1", " 1", "1 ", "1e3", "0x1", "1.2.3", "١", "NaN", "inf"} {
		if got, ok := micros(bad); ok {
			t.Errorf("micros(%q) = %d, want refused", bad, got)
		}
	}
}

// Calls from many goroutines run one at a time: a bucket of 1000 that
// does not refill in the test's time admits exactly 1000 of 2000 calls,
// and a concurrency limit of 5 gives each lease its own id while held
// (so each release frees one), never more than 5 at once.
func TestGoroutinesTakeTurns(t *testing.T) {
	local := New(0)
	now := int64(1_700_000_000_000_000)
	tokens := []Spec{{Algorithm: "tokenbucket", Size: 1000, Param: "0.000001", N: 1}}
	slots := []Spec{{Algorithm: "concurrency", Size: 5, Param: "1000000000000", N: 1}}
	var admitted, acquired atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				reply, err := local.Multi([]string{"bucket"}, now, tokens)
				if err != nil {
					t.Error(err)
					return
				}
				if reply.Allowed {
					admitted.Add(1)
				}
				if reply, err = local.Multi([]string{"slots"}, now, slots); err != nil || !reply.Allowed {
					continue
				}
				acquired.Add(1)
				fields := reply.Limits[0]
				if fields[1] < 0 || fields[1] > 4 {
					t.Errorf("remaining %d slots after an acquire", fields[1])
				}
				if released, err := local.Release("slots", fields[5], now); err != nil || released[0] != 1 {
					t.Errorf("release of lease %d: %v %v", fields[5], released, err)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 1000 || acquired.Load() < 400 {
		t.Fatalf("admitted %d (want 1000), acquired %d of 2000 (want most)", admitted.Load(), acquired.Load())
	}
	reply, _ := local.Multi([]string{"bucket", "slots"}, now, []Spec{
		{Algorithm: "tokenbucket", Size: 1000, Param: "0.000001", N: 0},
		{Algorithm: "concurrency", Size: 5, Param: "1", N: 0},
	})
	// Empty: 1000 tokens at 0.000001 a second refill in 10^9 s.
	if want := [][]int64{{1, 0, 1000, 0, 1_000_000_000_000}, {1, 5, 5, 0, 0, 0}}; !reflect.DeepEqual(reply.Limits, want) {
		t.Fatalf("after: %v, want %v", reply.Limits, want)
	}
}
