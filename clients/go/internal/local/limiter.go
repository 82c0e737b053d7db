// Package local is the module's math in process, for a limit's
// OnUnavailable "local": the five algorithms and the concurrency limit of
// src/algorithms/*.rs in exact integers (a bucket's tokens in pico-units,
// 10^12 a unit, in 128 bits; time in microseconds), so that every reply
// is the module's, field for field. Multi answers what RL.MULTI would,
// Release what RL.RELEASE would and Renew what RL.RENEW would, for the
// same keys, times and limits; the state lives in the Limiter (least
// recently used out) instead of Redis.
package local

import (
	"container/list"
	"sync"
)

// DefaultMaxKeys is the most keys a Limiter keeps when New is given 0 or
// less, as the Node and Python clients keep.
const DefaultMaxKeys = 100_000

// Spec is one limit of a call, as RL.MULTI gets it: `ALGORITHM size param n`.
type Spec struct {
	// Algorithm is tokenbucket, leakybucket, fixedwindow, slidingwindow,
	// slidinglog or concurrency (in any case, as the module takes it).
	Algorithm string
	// Size is the capacity (buckets) or the limit (windows, concurrency).
	Size int64
	// Param is the rate (units per second), the window or the lease
	// (seconds), as the decimal text the module gets: `0.5`, `60`.
	Param string
	// N is the units to take; 0 only looks.
	N int64
}

// Reply is RL.MULTI's reply.
type Reply struct {
	// Allowed: every limit admitted its N and took it; else none took anything.
	Allowed bool
	// RetryAfterMs is 0 when allowed; else -1 when some limit never admits
	// its N, else the longest of the limits' waits.
	RetryAfterMs int64
	// Limits holds each limit's fields, in the order of the call:
	// allowed, remaining, limit, retry_after_ms, reset_after_ms, and a
	// sixth, delay_ms (leaky bucket) or lease_id (concurrency).
	Limits [][]int64
}

// Limiter keeps the limits' state in process and answers as the module
// does. It is safe for use by several goroutines; each call runs alone,
// as a command runs alone on Redis.
type Limiter struct {
	mu      sync.Mutex
	maxKeys int
	keys    map[string]*list.Element // of *entry
	recent  *list.List               // of *entry, the most recently used first
}

// entry is a key's state and the algorithm it is for.
type entry struct {
	key       string
	algorithm algorithm
	state     any
}

// New returns a Limiter that keeps at most maxKeys keys (DefaultMaxKeys
// for 0 or less): a new one pushes out the key used longest ago, a look
// being a use.
func New(maxKeys int) *Limiter {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Limiter{maxKeys: maxKeys, keys: make(map[string]*list.Element), recent: list.New()}
}

// Multi is RL.MULTI at nowUs (microseconds since the epoch): every limit
// admits its N and takes it, or nothing changes. keys[i] is specs[i]'s key.
// Errors are the module's, and change nothing: a bad argument's ERR, and
// ErrWrongType for a key that holds another algorithm's state.
func (l *Limiter) Multi(keys []string, nowUs int64, specs []Spec) (Reply, error) {
	limits, counts, now, err := parseMulti(keys, nowUs, specs)
	if err != nil {
		return Reply{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	states := make([]any, len(keys))
	outcomes := make([]outcome, len(keys))
	allowed := true
	for i, key := range keys {
		if states[i], err = l.state(key, limits[i].algorithm); err != nil {
			return Reply{}, err
		}
		outcomes[i] = limits[i].decide(states[i], now, counts[i])
		allowed = allowed && outcomes[i].allowed()
	}
	reply := Reply{Allowed: allowed, Limits: make([][]int64, len(keys))}
	for i, key := range keys {
		if allowed {
			l.store(key, limits[i].algorithm, outcomes[i])
		} else if outcomes[i].allowed() {
			// Nothing is taken: a limit that would admit reports the state
			// it keeps, as a look (n = 0) does.
			outcomes[i] = limits[i].decide(states[i], now, 0)
		}
		reply.Limits[i] = outcomes[i].fields
	}
	if !allowed {
		reply.RetryAfterMs = longestWait(reply.Limits)
	}
	return reply, nil
}

// longestWait is a denied call's wait: -1 when some limit never admits,
// else the longest of the limits' waits.
func longestWait(limits [][]int64) int64 {
	var longest int64
	for _, fields := range limits {
		if fields[3] < 0 {
			return -1
		}
		longest = max(longest, fields[3])
	}
	return longest
}

// Release is RL.RELEASE: frees lease leaseID of the concurrency limit at
// key when it is still held at nowUs. It answers [released, held,
// reset_after_ms]: 1 when the lease was held, the slots held after the
// call, and the milliseconds until the last lease runs out (0: none left,
// and the key is gone).
func (l *Limiter) Release(key string, leaseID int64, nowUs int64) ([3]int64, error) {
	id, err := parseLeaseID(leaseID)
	if err != nil {
		return [3]int64{}, err
	}
	now, err := parseNow(nowUs)
	if err != nil {
		return [3]int64{}, err
	}
	return l.onLeases(key, func(stored *leases) outcome { return releaseDecide(stored, now, id) })
}

// Renew is RL.RENEW: lease leaseID of the concurrency limit at key, when
// still held at nowUs, runs out lease seconds (the decimal text the module
// gets) from nowUs instead. It answers [renewed, held, reset_after_ms].
func (l *Limiter) Renew(key string, leaseID int64, lease string, nowUs int64) ([3]int64, error) {
	id, err := parseLeaseID(leaseID)
	if err != nil {
		return [3]int64{}, err
	}
	leaseUs, err := parseLease(lease)
	if err != nil {
		return [3]int64{}, err
	}
	now, err := parseNow(nowUs)
	if err != nil {
		return [3]int64{}, err
	}
	return l.onLeases(key, func(stored *leases) outcome { return renewDecide(stored, now, id, leaseUs) })
}

// onLeases runs RL.RELEASE or RL.RENEW on the leases at key and writes
// what it changes.
func (l *Limiter) onLeases(key string, call func(*leases) outcome) ([3]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	stored, err := l.state(key, concurrency)
	if err != nil {
		return [3]int64{}, err
	}
	held, _ := stored.(*leases)
	o := call(held)
	l.store(key, concurrency, o)
	return [3]int64{o.fields[0], o.fields[1], o.fields[4]}, nil
}

// parseMulti checks RL.MULTI's arguments in the order Redis and the
// module do: the count of arguments (`RL.MULTI numkeys key... now` and 4
// a limit, at least 8), the number of keys, one limit a key, each limit
// and its n, the time, then that no key is given twice.
func parseMulti(keys []string, nowUs int64, specs []Spec) ([]limit, []uint64, uint64, error) {
	if 3+len(keys)+4*len(specs) < 8 {
		return nil, nil, 0, errArity
	}
	if len(keys) < 1 || len(keys) > maxMultiKeys {
		return nil, nil, 0, errNumKeys
	}
	if len(specs) != len(keys) {
		return nil, nil, 0, errArity
	}
	limits := make([]limit, len(specs))
	counts := make([]uint64, len(specs))
	for i, spec := range specs {
		var err error
		if limits[i], err = parseLimit(spec); err != nil {
			return nil, nil, 0, err
		}
		if counts[i], err = parseCount(spec.N); err != nil {
			return nil, nil, 0, err
		}
	}
	now, err := parseNow(nowUs)
	if err != nil {
		return nil, nil, 0, err
	}
	seen := make(map[string]struct{}, len(keys))
	for _, key := range keys {
		if _, repeated := seen[key]; repeated {
			return nil, nil, 0, errRepeated
		}
		seen[key] = struct{}{}
	}
	return limits, counts, now, nil
}

// decide runs the limit's algorithm on a key's state (nil: a missing key).
func (lim limit) decide(state any, nowUs, n uint64) outcome {
	buckets := bucketParams{capacity: lim.size, refill: lim.per}
	windows := windowParams{limit: lim.size, windowUs: lim.per}
	switch lim.algorithm {
	case tokenBucket:
		stored, _ := state.(*bucket)
		return tokenBucketDecide(stored, nowUs, buckets, n)
	case leakyBucket:
		stored, _ := state.(*bucket)
		return leakyBucketDecide(stored, nowUs, buckets, n)
	case fixedWindow:
		stored, _ := state.(*fixedWindowState)
		return fixedWindowDecide(stored, nowUs, windows, n)
	case slidingWindow:
		stored, _ := state.(*slidingWindowState)
		return slidingWindowDecide(stored, nowUs, windows, n)
	case slidingLog:
		stored, _ := state.(*slidingLogState)
		return slidingLogDecide(stored, nowUs, windows, n)
	default:
		stored, _ := state.(*leases)
		return acquireDecide(stored, nowUs, windows, n)
	}
}

// state is key's state, now used; nil for a missing key, ErrWrongType
// when it holds another algorithm's.
func (l *Limiter) state(key string, alg algorithm) (any, error) {
	element, ok := l.keys[key]
	if !ok {
		return nil, nil
	}
	e := element.Value.(*entry)
	if e.algorithm != alg {
		return nil, ErrWrongType
	}
	l.recent.MoveToFront(element)
	return e.state, nil
}

// store writes an outcome's state, if it has one; a fresh state
// (reset_after_ms 0) deletes the key, as Redis deletes it. Past maxKeys,
// the keys used longest ago go.
func (l *Limiter) store(key string, alg algorithm, o outcome) {
	if o.store == nil {
		return
	}
	element, ok := l.keys[key]
	if o.resetAfterMs() == 0 {
		if ok {
			l.recent.Remove(element)
			delete(l.keys, key)
		}
		return
	}
	if ok {
		element.Value.(*entry).state = o.store
		l.recent.MoveToFront(element)
		return
	}
	l.keys[key] = l.recent.PushFront(&entry{key: key, algorithm: alg, state: o.store})
	for l.recent.Len() > l.maxKeys {
		oldest := l.recent.Back()
		delete(l.keys, l.recent.Remove(oldest).(*entry).key)
	}
}
