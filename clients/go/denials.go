package ratelimit

import (
	"container/list"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Denials answered in process: after Redis denies a request, the same
// partition keys and limits, at the same or a larger cost, are denied here
// until the denial's retry_after_ms has passed, without a Redis call. A
// flood from one client then costs Redis one call per Retry-After, not one
// per request. It can only be stricter than Redis: a refund made elsewhere
// meanwhile is not seen. Never for a concurrency limit (a release frees a
// slot long before the lease's retry time): the limiter does not ask.

// neverFor is how long a never admissible denial (retry_after_ms -1) is kept.
const neverFor = time.Second

type denial struct {
	key      string
	decision *Decision
	costs    []int64 // each limit's cost in the denied request
	at       time.Time
	until    time.Time
}

type denials struct {
	size    int
	mu      sync.Mutex
	order   *list.List // most recently used first
	entries map[string]*list.Element
}

func newDenials(size int) *denials {
	return &denials{size: size, order: list.New(), entries: map[string]*list.Element{}}
}

// denialKey is what a denial is remembered by: the Redis keys and the sizes
// a LimitFunc gave for the request (the limits of one limiter are fixed:
// one limit of a fixed size is known by its key alone).
func denialKey(charges []charge) string {
	if len(charges) == 1 && charges[0].sizeText != "" {
		return charges[0].key
	}
	var b strings.Builder
	for i := range charges {
		b.WriteString(charges[i].key)
		b.WriteByte('\n')
		if charges[i].sizeText == "" {
			b.WriteString(strconv.FormatInt(charges[i].size, 10))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// answer is the kept denial for key at these costs, counted down to now; nil when there is none.
func (d *denials) answer(key string, charges []charge) *Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	element, ok := d.entries[key]
	if !ok {
		return nil
	}
	entry := element.Value.(*denial)
	now := time.Now()
	if !now.Before(entry.until) {
		d.order.Remove(element)
		delete(d.entries, key)
		return nil
	}
	for i := range charges {
		if charges[i].cost < entry.costs[i] {
			return nil
		}
	}
	d.order.MoveToFront(element)
	return countedDown(entry.decision, now.Sub(entry.at).Milliseconds())
}

// remember keeps a denial Redis gave.
func (d *denials) remember(key string, charges []charge, decision *Decision) {
	costs := make([]int64, len(charges))
	for i := range charges {
		costs[i] = charges[i].cost
	}
	at := time.Now()
	until := at.Add(time.Duration(decision.RetryAfterMs) * time.Millisecond)
	if decision.RetryAfterMs == -1 {
		until = at.Add(neverFor)
	}
	entry := &denial{key: key, decision: decision, costs: costs, at: at, until: until}
	d.mu.Lock()
	defer d.mu.Unlock()
	if element, ok := d.entries[key]; ok {
		element.Value = entry
		d.order.MoveToFront(element)
		return
	}
	d.entries[key] = d.order.PushFront(entry)
	if d.order.Len() > d.size {
		oldest := d.order.Back()
		d.order.Remove(oldest)
		delete(d.entries, oldest.Value.(*denial).key)
	}
}

// countedDown is the decision elapsed ms later: its waits and resets shorter by that.
func countedDown(d *Decision, elapsed int64) *Decision {
	less := func(ms int64) int64 {
		if ms > 0 {
			return max(0, ms-elapsed)
		}
		return ms
	}
	limits := make([]LimitDecision, len(d.Limits))
	for i, l := range d.Limits {
		l.RetryAfterMs = less(l.RetryAfterMs)
		l.ResetAfterMs = less(l.ResetAfterMs)
		limits[i] = l
	}
	return &Decision{Allowed: false, RetryAfterMs: less(d.RetryAfterMs), NeverAllowed: d.NeverAllowed, Limits: limits,
		Outcome: OutcomeDeniedInProcess, charges: d.charges}
}
