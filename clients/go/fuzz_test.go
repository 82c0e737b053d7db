package ratelimit

import (
	"math"
	"strconv"
	"testing"
)

// decodeReply turns fuzz bytes into a reply of the shapes a client gives:
// 'i' int64 (8 bytes), 's' string (length byte), 'n' nil, 'a' array (count byte).
func decodeReply(data []byte) (any, []byte) {
	if len(data) == 0 {
		return nil, nil
	}
	switch data[0] {
	case 'i':
		var v int64
		for i := 1; i < 9 && i < len(data); i++ {
			v = v<<8 | int64(data[i])
		}
		return v, data[min(9, len(data)):]
	case 's':
		if len(data) < 2 {
			return "", nil
		}
		n := min(int(data[1]), len(data)-2)
		return string(data[2 : 2+n]), data[2+n:]
	case 'a':
		if len(data) < 2 {
			return []any{}, nil
		}
		items := make([]any, 0, data[1])
		rest := data[2:]
		for i := 0; i < int(data[1]) && len(rest) > 0; i++ {
			var item any
			item, rest = decodeReply(rest)
			items = append(items, item)
		}
		return items, rest
	}
	return nil, data[1:]
}

func encodeInts(values ...int64) []byte {
	out := []byte{'a', byte(len(values))}
	for _, v := range values {
		out = append(out, 'i')
		for shift := 56; shift >= 0; shift -= 8 {
			out = append(out, byte(v>>shift))
		}
	}
	return out
}

func fuzzCharges() []charge {
	return []charge{
		{policy: &policy{algorithm: TokenBucket, name: "a"}, key: "k:a", size: 5, cost: 1},
		{policy: &policy{algorithm: LeakyBucket, name: "b"}, key: "k:b", size: 5, cost: 1},
		{policy: &policy{algorithm: Concurrency, name: "c", retryAfterMs: 1000}, key: "k:c", size: 5, cost: 1},
	}
}

// Any reply, of any shape, is an error or a decision, never a panic.
func FuzzMultiReply(f *testing.F) {
	good := append([]byte{'a', 5}, encodeInts(1, 0)[2:]...)
	good = append(good, encodeInts(1, 4, 5, 0, 200)...)
	good = append(good, encodeInts(1, 3, 5, 0, 400, 0)...)
	good = append(good, encodeInts(1, 4, 5, 0, 30000, 7)...)
	f.Add(good)
	f.Add(encodeInts(0, -1))
	f.Add([]byte("a\x05i\x00\x00\x00\x00\x00\x00\x00\x02s\x01x"))
	f.Add([]byte("s\x0bERR nothing"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		reply, _ := decodeReply(data)
		charges := fuzzCharges()
		allowed, limits, err := checkReply(charges, reply)
		if err == nil && (len(limits) != len(charges) || (allowed && !limits[0].Allowed)) {
			t.Fatalf("accepted %#v as %v %+v", reply, allowed, limits)
		}
		if err == nil {
			decisionOf(charges, limits, allowed, outcomeOf(allowed))
		}
		_, _, _ = checkReply(charges[:1], reply) // one limit's own command's reply
		for i := range charges {
			_, _ = limitResult(&charges[i], reply, command("fuzz"))
		}
		_, _, _, _ = leaseReply(reply, command("fuzz"))
		items, _ := reply.([]any)
		_ = describe(reply)
		_ = len(items)
	})
}

// Any option values are refused with a ConfigError or make a limit whose
// words the module takes, never a panic.
func FuzzLimitOptions(f *testing.F) {
	f.Add("tokenbucket", int64(10), 0.5, 0.0, 0.0, int64(1), "burst", "", "", 0.0)
	f.Add("fixedwindow", int64(5), 0.0, 60.0, 0.0, int64(0), "", "content-bytes", "local", 0.0)
	f.Add("concurrency", int64(10), 0.0, 0.0, 30.0, int64(2), "slots", "concurrent-requests", "open", 2.5)
	f.Add("leakybucket", int64(9007199254740991), 1e-6, 0.0, 0.0, int64(-1), "x\x00", "requests", "closed", 0.0)
	f.Fuzz(func(t *testing.T, algorithm string, limit int64, rate, window, lease float64, cost int64, name, unit, policy string, retryAfter float64) {
		l := Limit[string]{Algorithm: Algorithm(algorithm), Limit: limit, Rate: rate, Window: window, Lease: lease, Cost: cost,
			Name: name, QuotaUnit: QuotaUnit(unit), OnUnavailable: OnUnavailable(policy), RetryAfter: retryAfter}
		spec, err := checkLimit("limits[0]", l, true, Open)
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		param, perr := strconv.ParseFloat(spec.paramText, 64)
		if perr != nil || param <= 0 || math.Abs(param-spec.param) > 5e-7 || spec.size < 1 || spec.size > MaxInteger || spec.cost < 1 {
			t.Fatalf("accepted %+v as %+v", l, spec)
		}
		if len(spec.name) == 0 || len(spec.name) > 64 || (spec.onUnavailable != Open && spec.onUnavailable != Closed && spec.onUnavailable != Local) {
			t.Fatalf("accepted %+v as %+v", l, spec)
		}
		_ = keyName(&spec.policy, spec.size)
		_ = dividedRate(spec.paramText, 3)
	})
}

// Any address is keyed, never a panic; an IPv6 key is a prefix.
func FuzzIPKey(f *testing.F) {
	for _, a := range []string{"203.0.113.7", "::ffff:1.2.3.4", "2001:db8::1", "fe80::1%eth0", "", "[::1]", "1.2.3.4.5"} {
		f.Add(a, 56)
	}
	f.Fuzz(func(t *testing.T, address string, subnet int) {
		if subnet != WholeIPv6 && (subnet < 1 || subnet > 128) {
			subnet = 56
		}
		if key := IPKey(address, subnet); len(key) < 3 {
			t.Fatalf("%q", key)
		}
	})
}

// The local share of a rate: divided, rounded down to six decimals, at least 0.000001.
func TestDividedRate(t *testing.T) {
	for _, c := range [][3]string{{"20", "4", "5"}, {"1", "3", "0.333333"}, {"0.000001", "4", "0.000001"}, {"12.5", "2", "6.25"}, {"1000000000000", "7", "142857142857.142857"}} {
		n, _ := strconv.ParseInt(c[1], 10, 64)
		if got := dividedRate(c[0], n); got != c[2] {
			t.Errorf("%s / %s = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}
