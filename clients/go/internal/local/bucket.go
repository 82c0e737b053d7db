package local

// picoPerUnit is the buckets' fixed point: a unit (token) is 10^12
// pico-units, so a rate kept to 10^-6 units per second flows a whole number
// of pico-units every microsecond and no rounding ever builds up.
const picoPerUnit = 1_000_000_000_000

// bucket is what a token bucket or a leaky bucket stores: its level
// (tokens held, or units queued) at last, in pico-units.
type bucket struct {
	level u128
	last  uint64 // microseconds
}

// bucketParams are a bucket's capacity and its refill (or drain) in
// pico-units per microsecond, which is the rate in micro-units per second.
type bucketParams struct {
	capacity uint64
	refill   uint64
}

// full is the capacity in pico-units.
func (p bucketParams) full() u128 { return mul64(p.capacity, picoPerUnit) }

// msFor is the milliseconds, rounded up, for pico pico-units to flow:
// ceil(pico / (refill * 1000)), taken as ceil(ceil(pico / refill) / 1000),
// which is the same for positive integers and keeps the divisor in 64 bits.
func (p bucketParams) msFor(pico u128) uint64 {
	return ceilDiv(pico.divCeil(p.refill), 1000)
}

// flow is the pico-units that flow from one time to a later one.
func (p bucketParams) flow(fromUs, toUs uint64) u128 { return mul64(toUs-fromUs, p.refill) }

// whole is the whole units in pico pico-units.
func whole(pico u128) uint64 { return pico.div(picoPerUnit) }
