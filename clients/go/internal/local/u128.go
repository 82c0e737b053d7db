package local

import (
	"math"
	"math/bits"
)

// u128 is an unsigned 128-bit integer, for a bucket's pico-units (up to
// (2^53 - 1) * 10^12, 93 bits) and the sliding window's estimate scaled by
// its window (up to 2^53 * 10^18, 113 bits), as the module's u128. The
// ranges of the arguments keep every sum and difference taken here within
// 128 bits and at least 0.
type u128 struct{ hi, lo uint64 }

// mul64 is a * b, exact.
func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (a u128) add(b u128) u128 {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, carry)
	return u128{hi, lo}
}

// sub is a - b, for a >= b.
func (a u128) sub(b u128) u128 {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, borrow)
	return u128{hi, lo}
}

// saturatingSub is a - b, or 0 when b > a.
func (a u128) saturatingSub(b u128) u128 {
	if a.less(b) {
		return u128{}
	}
	return a.sub(b)
}

func (a u128) less(b u128) bool {
	return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo)
}

func min128(a, b u128) u128 {
	if b.less(a) {
		return b
	}
	return a
}

// quoRem is a / d and a % d, for d > 0.
func (a u128) quoRem(d uint64) (u128, uint64) {
	hi, rem := a.hi/d, a.hi%d
	lo, rem := bits.Div64(rem, a.lo, d)
	return u128{hi, lo}, rem
}

// divCeil is a / d rounded up, for d > 0.
func (a u128) divCeil(d uint64) u128 {
	q, rem := a.quoRem(d)
	if rem != 0 {
		q = q.add(u128{lo: 1})
	}
	return q
}

// saturate is a as a uint64, the largest one when it does not fit (the
// module's `u64::try_from(..).unwrap_or(u64::MAX)`; the ranges never get
// there).
func (a u128) saturate() uint64 {
	if a.hi != 0 {
		return math.MaxUint64
	}
	return a.lo
}

// div is floor(a / d) for d > 0, as a uint64.
func (a u128) div(d uint64) uint64 {
	q, _ := a.quoRem(d)
	return q.saturate()
}

// ceilDiv is ceil(a / d) for d > 0, as a uint64: the module's ceil_div.
func ceilDiv(a u128, d uint64) uint64 {
	return a.divCeil(d).saturate()
}
