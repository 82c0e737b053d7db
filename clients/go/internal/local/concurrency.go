package local

import (
	"cmp"
	"slices"
)

// lease holds n slots until it runs out at expires (unless released or renewed).
type lease struct {
	id      uint64
	expires uint64 // microseconds
	n       uint64
}

// leases is what a concurrency limit stores. The key lives while a lease
// is held: with none left it is deleted, and ids start again at 1.
type leases struct {
	last   uint64  // the time of the last change, microseconds
	nextID uint64  // the id the next lease gets
	held   []lease // in the order taken (ascending ids)
}

// freshLeases is a missing key: no lease, ids from 1.
var freshLeases = &leases{nextID: 1}

// live is the leases not run out at nowUs: a lease that runs out at E
// holds its slots while now < E.
func (l *leases) live(nowUs uint64) []lease {
	return slices.DeleteFunc(slices.Clone(l.held), func(x lease) bool { return x.expires <= nowUs })
}

// heldAt is the slots held at nowUs.
func (l *leases) heldAt(nowUs uint64) uint64 {
	var held uint64
	for _, x := range l.held {
		if x.expires > nowUs {
			held += x.n
		}
	}
	return held
}

// resetAfterMs is the milliseconds from nowUs until every live lease has run out.
func (l *leases) resetAfterMs(nowUs uint64) uint64 {
	var longest uint64
	for _, x := range l.held {
		if x.expires > nowUs {
			longest = max(longest, msBetween(nowUs, x.expires))
		}
	}
	return longest
}

// holds says whether lease id is live at nowUs.
func (l *leases) holds(nowUs, id uint64) bool {
	return slices.ContainsFunc(l.held, func(x lease) bool { return x.id == id && x.expires > nowUs })
}

// after is the leases at nowUs (never before the last change), before a
// change: those run out by then gone, and ids from 1 when none is left.
func (l *leases) after(nowUs uint64) *leases {
	next := &leases{last: nowUs, nextID: l.nextID, held: l.live(nowUs)}
	if len(next.held) == 0 {
		next.nextID = 1
	}
	return next
}

// acquireDecide is RL.ACQUIRE (CONCURRENCY in RL.MULTI): take n slots at
// now under a new lease that runs out lease later, when
//
//	held(now) + n <= limit
//
// The sixth field is the new lease's id, 0 when none was taken. A time
// before the last change counts as no time passed; n = 0 only looks.
func acquireDecide(stored *leases, nowUs uint64, p windowParams, n uint64) outcome {
	if stored == nil {
		stored = freshLeases
	}
	nowUs = max(nowUs, stored.last)
	held := stored.heldAt(nowUs)
	reset := stored.resetAfterMs(nowUs)
	remaining := p.limit - min(held, p.limit)
	if n > p.limit {
		return never(remaining, p.limit, reset).with(0)
	}
	if held+n > p.limit {
		// Wait for the leases that run out first until n fit.
		ends := stored.live(nowUs)
		slices.SortFunc(ends, func(a, b lease) int { return cmp.Compare(a.expires, b.expires) })
		mustFree, freed := held+n-p.limit, uint64(0)
		for _, x := range ends {
			if freed += x.n; freed >= mustFree {
				return denied(remaining, p.limit, msBetween(nowUs, x.expires), reset).with(0)
			}
		}
		return denied(remaining, p.limit, reset, reset).with(0)
	}
	id := stored.nextID
	if held == 0 {
		id = 1
	}
	if n > 0 && id > maxUnits {
		// Every id was given out: they start again once no lease is left.
		return denied(remaining, p.limit, reset, reset).with(0)
	}
	if n == 0 {
		return admitted(remaining, p.limit, reset, 0, nil).with(0)
	}
	taken := lease{id: id, expires: nowUs + p.windowUs, n: n}
	store := stored.after(nowUs)
	store.nextID = max(store.nextID, id+1)
	store.held = append(store.held, taken)
	return admitted(remaining-n, p.limit, max(reset, msBetween(nowUs, taken.expires)), n, store).with(id)
}

// releaseDecide is RL.RELEASE: frees lease id when it is still held at now.
func releaseDecide(stored *leases, nowUs, id uint64) outcome {
	return changeLease(stored, nowUs, id, func(after *leases, _ uint64) {
		after.held = slices.DeleteFunc(after.held, func(x lease) bool { return x.id == id })
	})
}

// renewDecide is RL.RENEW: lease id, when still held at now, runs out
// leaseUs from now instead (later or sooner).
func renewDecide(stored *leases, nowUs, id, leaseUs uint64) outcome {
	return changeLease(stored, nowUs, id, func(after *leases, nowUs uint64) {
		for i := range after.held {
			if after.held[i].id == id {
				after.held[i].expires = nowUs + leaseUs
			}
		}
	})
}

// changeLease makes a change to lease id while it is held at now (on the
// leases then, those run out gone); else nothing changes, so a second
// release is harmless. The outcome's fields are RL.RELEASE's and
// RL.RENEW's answer in an outcome's places, [done, held, 0, 0,
// reset_after_ms]: the fifth says whether the key is left fresh.
func changeLease(stored *leases, nowUs, id uint64, change func(after *leases, nowUs uint64)) outcome {
	if stored == nil {
		stored = freshLeases
	}
	nowUs = max(nowUs, stored.last)
	if !stored.holds(nowUs, id) {
		return outcome{fields: []int64{0, field(stored.heldAt(nowUs)), 0, 0, field(stored.resetAfterMs(nowUs))}}
	}
	after := stored.after(nowUs)
	change(after, nowUs)
	return outcome{fields: []int64{1, field(after.heldAt(nowUs)), 0, 0, field(after.resetAfterMs(nowUs))}, store: after}
}
