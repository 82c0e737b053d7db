package local

// leakyBucketDecide is RL.LEAKYBUCKET, the leaky bucket as a queue: up to
// capacity units wait, draining at rate units per second; a request of n
// units joins the queue when they fit, and learns its delay_ms (the sixth
// field): how long the units ahead of it take to drain.
//
//	level(t) = max(0, level(last) - (t - last) * rate); admit when level + n <= capacity
//
// A missing key is an empty queue; a time before the last update counts
// as no time passed. remaining is the free room in the queue, reset the
// time until it is empty. n = 0 only looks (its delay is the wait now).
func leakyBucketDecide(stored *bucket, nowUs uint64, p bucketParams, n uint64) outcome {
	full := p.full()
	now := bucket{last: nowUs}
	if stored != nil {
		now.last = max(nowUs, stored.last)
		now.level = stored.level.saturatingSub(p.flow(stored.last, now.last))
	}
	level := now.level
	free := func(level u128) uint64 { return whole(full.saturatingSub(level)) }
	if n > p.capacity {
		return never(free(level), p.capacity, p.msFor(level)).with(0)
	}
	queued := level.add(mul64(n, picoPerUnit))
	if full.less(queued) {
		return denied(free(level), p.capacity, p.msFor(queued.sub(full)), p.msFor(level)).with(0)
	}
	store := &bucket{level: queued, last: now.last}
	return admitted(free(queued), p.capacity, p.msFor(queued), n, store).with(p.msFor(level))
}
