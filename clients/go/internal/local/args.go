package local

import (
	"errors"
	"math"
	"math/bits"
	"strings"
)

// The ranges of the module's arguments (docs/commands.md): inside them
// every reply is exact and every field below 2^53.
const (
	maxUnits     = 1<<53 - 1                 // the most units a limit holds or a call takes; also the last lease id
	maxTimeUs    = 253_402_300_799_999_999   // 9999-12-31T23:59:59.999999Z
	maxSpanUs    = 1_000_000_000_000_000_000 // the longest window or lease, and time to fill a bucket: 10^12 s
	maxRate      = 1_000_000_000_000 * micro // the fastest rate, 10^12 units/s, in micro-units per second
	minSpanUs    = 1000                      // the shortest window or lease: 1 ms
	micro        = 1_000_000                 // microseconds a second; rates, windows and leases are read to six decimals
	maxMultiKeys = 1000                      // the most keys of one RL.MULTI
)

// ErrWrongType is the module's reply for a key that holds another
// algorithm's state; the call changes nothing.
var ErrWrongType = errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")

// The module's other errors, word for word (src/error.rs): a call that
// gets one changes nothing.
var (
	errArity     = errors.New("ERR wrong number of arguments for 'RL.MULTI' command")
	errNumKeys   = errors.New("ERR numkeys must be an integer from 1 to 1000")
	errRepeated  = errors.New("ERR a key may appear only once")
	errAlgorithm = errors.New("ERR algorithm must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG or CONCURRENCY")
	errCapacity  = errors.New("ERR capacity must be an integer from 1 to 9007199254740991")
	errRate      = errors.New("ERR rate must be a decimal number of units per second from 0.000001 to 1000000000000")
	errFillTime  = errors.New("ERR capacity / rate must be at most 1000000000000 seconds (the time to refill or drain the whole bucket)")
	errLimit     = errors.New("ERR limit must be an integer from 1 to 9007199254740991")
	errWindow    = errors.New("ERR window must be a decimal number of seconds from 0.001 to 1000000000000")
	errLease     = errors.New("ERR lease must be a decimal number of seconds from 0.001 to 1000000000000")
	errLeaseID   = errors.New("ERR lease_id must be an integer from 0 to 9007199254740991")
	errNow       = errors.New("ERR now must be * or a decimal Unix time in seconds from 0 to 253402300799.999999")
	errCount     = errors.New("ERR n must be an integer from 0 to 9007199254740991")
)

// algorithm is what a key's state is for.
type algorithm uint8

const (
	tokenBucket algorithm = iota
	leakyBucket
	fixedWindow
	slidingWindow
	slidingLog
	concurrency
)

var algorithmNames = [...]string{"tokenbucket", "leakybucket", "fixedwindow", "slidingwindow", "slidinglog", "concurrency"}

// limit is a Spec checked as the module checks it: its size (capacity or
// limit) and per, the refill in pico-units per microsecond (= micro-units
// per second) or the window or lease in microseconds.
type limit struct {
	algorithm algorithm
	size      uint64
	per       uint64
}

// parseLimit checks `ALGORITHM size param` in the module's order: the
// algorithm, the size, the parameter, then a bucket's time to fill.
func parseLimit(spec Spec) (limit, error) {
	alg := -1
	for i, name := range algorithmNames {
		if strings.EqualFold(spec.Algorithm, name) {
			alg = i
		}
	}
	if alg < 0 {
		return limit{}, errAlgorithm
	}
	l := limit{algorithm: algorithm(alg)}
	sizeOK := spec.Size >= 1 && spec.Size <= maxUnits
	l.size = uint64(spec.Size)
	switch l.algorithm {
	case tokenBucket, leakyBucket:
		if !sizeOK {
			return limit{}, errCapacity
		}
		rate, ok := micros(spec.Param)
		if !ok || rate < 1 || rate > maxRate {
			return limit{}, errRate
		}
		// capacity / rate <= 10^12 s: the pico-units to fill, at most what flows in that time.
		if mul64(maxSpanUs, rate).less(mul64(l.size, picoPerUnit)) {
			return limit{}, errFillTime
		}
		l.per = rate
	default:
		if !sizeOK {
			return limit{}, errLimit
		}
		span, ok := duration(spec.Param)
		if !ok {
			if l.algorithm == concurrency {
				return limit{}, errLease
			}
			return limit{}, errWindow
		}
		l.per = span
	}
	return l, nil
}

// parseCount checks a call's n, 0 to 2^53 - 1.
func parseCount(n int64) (uint64, error) {
	if n < 0 || n > maxUnits {
		return 0, errCount
	}
	return uint64(n), nil
}

// parseNow checks a call's time, microseconds from the epoch to the end of year 9999.
func parseNow(nowUs int64) (uint64, error) {
	if nowUs < 0 || nowUs > maxTimeUs {
		return 0, errNow
	}
	return uint64(nowUs), nil
}

// parseLeaseID checks a lease id, 0 (never given) to 2^53 - 1.
func parseLeaseID(id int64) (uint64, error) {
	if id < 0 || id > maxUnits {
		return 0, errLeaseID
	}
	return uint64(id), nil
}

// parseLease checks RL.RENEW's lease, as a concurrency limit's.
func parseLease(text string) (uint64, error) {
	span, ok := duration(text)
	if !ok {
		return 0, errLease
	}
	return span, nil
}

// duration is a window or a lease: seconds, 0.001 to 10^12, in microseconds.
func duration(text string) (uint64, bool) {
	us, ok := micros(text)
	return us, ok && us >= minSpanUs && us <= maxSpanUs
}

// micros reads a non-negative decimal (`12`, `0.5`, `.25`, `3.`) in
// millionths, rounded half up at the seventh decimal, as the module does:
// plain ASCII digits and at most one dot, nothing else.
func micros(text string) (uint64, bool) {
	whole, fraction, _ := strings.Cut(text, ".")
	if whole == "" && fraction == "" {
		return 0, false
	}
	var units uint64
	if whole != "" {
		var ok bool
		if units, ok = integer(whole); !ok {
			return 0, false
		}
	}
	var millionths uint64
	for i := 0; i < len(fraction); i++ {
		digit := fraction[i]
		if digit < '0' || digit > '9' {
			return 0, false
		}
		if i < 6 {
			millionths = millionths*10 + uint64(digit-'0')
		}
	}
	for i := len(fraction); i < 6; i++ {
		millionths *= 10
	}
	if len(fraction) > 6 && fraction[6] >= '5' {
		millionths++
	}
	if units > (math.MaxUint64-millionths)/micro {
		return 0, false
	}
	return units*micro + millionths, true
}

// integer reads plain ASCII digits, at most 20 of them, into a uint64.
func integer(text string) (uint64, bool) {
	if text == "" || len(text) > 20 {
		return 0, false
	}
	var value uint64
	for i := 0; i < len(text); i++ {
		digit := uint64(text[i]) - '0'
		if digit > 9 {
			return 0, false
		}
		hi, lo := bits.Mul64(value, 10)
		sum, carry := bits.Add64(lo, digit, 0)
		if hi != 0 || carry != 0 {
			return 0, false
		}
		value = sum
	}
	return value, true
}
