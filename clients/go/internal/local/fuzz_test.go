package local

import (
	"errors"
	"testing"
)

// moduleErrors are every error Multi, Release and Renew may give.
var moduleErrors = []error{ErrWrongType, errArity, errNumKeys, errRepeated, errAlgorithm, errCapacity,
	errRate, errFillTime, errLimit, errWindow, errLease, errLeaseID, errNow, errCount}

// FuzzMulti: whatever the specs and times, the math never panics, every
// error is one of the module's, and every reply keeps the module's
// promises: fields that say what the limit is, below 2^53, a wait only
// when denied, all or nothing.
func FuzzMulti(f *testing.F) {
	const last = maxTime
	for _, c := range []struct {
		algorithm       uint8
		size            int64
		param           string
		n1, n2          int64
		now1, now2      int64
		leaseID         int64
		lease, otherKey string
	}{
		{0, 10, "1", 1, 1, 1_700_000_000_000_000, 1_700_000_000_250_000, 1, "30", "b"},
		{0, maxUnits, "9007.2", maxUnits, 1, 0, last, 1, "1", "b"},
		{0, 1000000, "0.000001", 1000000, 1000000, last, 0, 1, "1", "b"},
		{1, maxUnits, "1000000000000", maxUnits, maxUnits, last, last, 0, "0.001", "b"},
		{1, 1, "0.0000005", 1, 2, 5, 4, 0, "1", "a"},
		{2, maxUnits, "0.001", maxUnits, 1, last - 1, last, 1, "1", "b"},
		{2, 4, "1000000000000", 3, 2, 0, last, 1, "1", "b"},
		{3, maxUnits, "1000000000000", maxUnits, maxUnits, last, last, 1, "1", "b"},
		{3, 1000, "3", 999, 2, 1_700_000_002_999_999, 1_700_000_003_000_000, 1, "1", "b"},
		{4, maxUnits, "0.5", maxUnits, 1, 499_999, 500_000, 1, "1", "b"},
		{4, 3, "0.0009995", 2, 2, 1, 1001, 1, "1", "b"},
		{5, maxUnits, "1000000000000", maxUnits, 1, last, last, 1, "1000000000000", "b"},
		{5, 2, "0.001", 1, 1, 0, 1000, 1, "0.0009995", "b"},
		{5, 2, "0.001", 1, 1, 1000, 999, maxUnits, "1", "b"},
		{6, -1, "", -1, maxUnits + 1, -1, last + 1, -1, "x", ""},
		{0, 0, "1e3", 0, 0, 0, 0, 0, "", "b"},
	} {
		f.Add(c.algorithm, c.size, c.param, c.n1, c.n2, c.now1, c.now2, c.leaseID, c.lease, c.otherKey)
	}
	f.Fuzz(func(t *testing.T, algorithm uint8, size int64, param string, n1, n2, now1, now2, leaseID int64, lease, otherKey string) {
		local := New(2)
		name := "bogus"
		if int(algorithm) < len(algorithmNames) {
			name = algorithmNames[algorithm]
		}
		spec := Spec{Algorithm: name, Size: size, Param: param, N: n1}
		// A key, then the key and another, with a look of another algorithm.
		call(t, local, []string{"a"}, now1, []Spec{spec})
		other := Spec{Algorithm: algorithmNames[(int(algorithm)+1)%len(algorithmNames)], Size: 5, Param: "1", N: 0}
		spec.N = n2
		call(t, local, []string{"a", otherKey}, now2, []Spec{spec, other})
		renewed, err := local.Renew("a", leaseID, lease, now2)
		checkHeld(t, renewed, err)
		released, err := local.Release("a", leaseID, now1)
		checkHeld(t, released, err)
		call(t, local, []string{"a"}, now1, []Spec{other})
	})
}

// call runs Multi and checks its answer.
func call(t *testing.T, local *Limiter, keys []string, nowUs int64, specs []Spec) {
	reply, err := local.Multi(keys, nowUs, specs)
	if err != nil {
		checkError(t, err)
		return
	}
	allowed, longest := true, int64(0)
	for i, fields := range reply.Limits {
		sixth := map[string]int{"leakybucket": 6, "concurrency": 6}[specs[i].Algorithm]
		if want := max(5, sixth); len(fields) != want {
			t.Fatalf("%v: %d fields, want %d", fields, len(fields), want)
		}
		for j, field := range fields {
			if field < 0 && !(j == 3 && field == -1) || field > maxUnits {
				t.Fatalf("%v %v: field %d out of range", specs[i], fields, j)
			}
		}
		if ok := fields[0] == 1; ok && fields[3] != 0 || !ok && fields[0] != 0 || fields[1] > fields[2] || fields[2] != specs[i].Size {
			t.Fatalf("%v: %v", specs[i], fields)
		}
		if fields[3] == -1 || longest == -1 {
			longest = -1
		} else {
			longest = max(longest, fields[3])
		}
		allowed = allowed && fields[0] == 1
	}
	if reply.Allowed != allowed || allowed && reply.RetryAfterMs != 0 || !allowed && reply.RetryAfterMs != longest {
		t.Fatalf("%v: %+v", specs, reply)
	}
}

// checkHeld checks what Release or Renew answers: [0 or 1, held, reset_after_ms].
func checkHeld(t *testing.T, reply [3]int64, err error) {
	if err != nil {
		checkError(t, err)
		return
	}
	if reply[0] != 0 && reply[0] != 1 || reply[1] < 0 || reply[1] > maxUnits || reply[2] < 0 || reply[2] > maxUnits {
		t.Fatalf("release or renew: %v", reply)
	}
}

func checkError(t *testing.T, err error) {
	for _, known := range moduleErrors {
		if errors.Is(err, known) {
			return
		}
	}
	t.Fatalf("an error that is not the module's: %v", err)
}
