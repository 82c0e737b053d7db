package local

// tokenBucketDecide is RL.TOKENBUCKET: a bucket holds up to capacity tokens
// and refills at rate tokens per second; a request for n tokens is admitted
// when the bucket holds n, and takes them.
//
//	tokens(t) = min(capacity, tokens(last) + (t - last) * rate)
//
// A missing key is a full bucket; a time before the last update counts as
// no time passed. n = 0 only looks.
func tokenBucketDecide(stored *bucket, nowUs uint64, p bucketParams, n uint64) outcome {
	full := p.full()
	now := bucket{level: full, last: nowUs}
	if stored != nil {
		now.last = max(nowUs, stored.last)
		now.level = min128(full, stored.level.add(p.flow(stored.last, now.last)))
	}
	tokens := now.level
	if n > p.capacity {
		return never(whole(tokens), p.capacity, p.msFor(full.sub(tokens)))
	}
	wanted := mul64(n, picoPerUnit)
	if tokens.less(wanted) {
		return denied(whole(tokens), p.capacity, p.msFor(wanted.sub(tokens)), p.msFor(full.sub(tokens)))
	}
	left := tokens.sub(wanted)
	return admitted(whole(left), p.capacity, p.msFor(full.sub(left)), n, &bucket{level: left, last: now.last})
}
