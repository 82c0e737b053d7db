package local

import "math"

// outcome is one limit's answer to a call: its reply fields (allowed,
// remaining, limit, retry_after_ms, reset_after_ms, and delay_ms or
// lease_id for the leaky bucket and the concurrency limit), and the state
// to write if the call goes on (nil: the key is left as it is). A state
// written with reset_after_ms 0 is a fresh one: the key is deleted, as
// the module deletes it.
type outcome struct {
	fields []int64
	store  any
}

// never: n is above the limit, so no wait admits it (retry_after_ms -1).
func never(remaining, size, resetMs uint64) outcome {
	return outcome{fields: []int64{0, field(remaining), field(size), -1, field(resetMs)}}
}

// denied: nothing taken; retryMs is the shortest wait that admits the same call.
func denied(remaining, size, retryMs, resetMs uint64) outcome {
	return outcome{fields: []int64{0, field(remaining), field(size), field(retryMs), field(resetMs)}}
}

// admitted: n taken (or looked at, n = 0, which writes nothing).
func admitted(remaining, size, resetMs, n uint64, store any) outcome {
	if n == 0 {
		store = nil
	}
	return outcome{fields: []int64{1, field(remaining), field(size), 0, field(resetMs)}, store: store}
}

// with adds a sixth field.
func (o outcome) with(sixth uint64) outcome {
	o.fields = append(o.fields, field(sixth))
	return o
}

func (o outcome) allowed() bool       { return o.fields[0] == 1 }
func (o outcome) resetAfterMs() int64 { return o.fields[4] }

// field is a reply integer; the ranges keep every one below 2^53 (the
// module saturates at the largest int64 where Rust would not fit it).
func field(value uint64) int64 {
	if value > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(value)
}

// msBetween is the milliseconds from one time to a later one, rounded up; 0 when it is not later.
func msBetween(fromUs, toUs uint64) uint64 {
	if toUs <= fromUs {
		return 0
	}
	return (toUs - fromUs + 999) / 1000
}

// windowStart is the start of the epoch-aligned window that holds timeUs.
func windowStart(timeUs, windowUs uint64) uint64 {
	return timeUs - timeUs%windowUs
}
