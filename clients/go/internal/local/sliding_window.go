package local

// slidingWindowState is what a sliding window stores: the units counted
// in the window that holds last and in the one before.
type slidingWindowState struct {
	last     uint64
	previous uint64
	current  uint64
}

// slidingWindowDecide is RL.SLIDINGWINDOW, the sliding window counter:
// the previous window's count, weighted by how much of it the sliding
// window still covers, plus the current window's count,
//
//	estimate(t) = previous * (1 - elapsed / window) + current; admit when estimate + n <= limit
//
// with windows aligned to the epoch as the fixed window's. All of it is
// taken times window, in integers, so nothing is rounded. n = 0 only looks.
func slidingWindowDecide(stored *slidingWindowState, nowUs uint64, p windowParams, n uint64) outcome {
	w := p.windowUs
	var previous, current uint64
	if stored != nil {
		nowUs = max(nowUs, stored.last)
		switch lastStart, start := windowStart(stored.last, w), windowStart(nowUs, w); {
		case lastStart == start:
			previous, current = stored.previous, stored.current
		case lastStart+w == start:
			previous = stored.current
		}
	}
	start := windowStart(nowUs, w)
	toEdge := w - (nowUs - start)
	// estimate * window, with current counting cur units.
	estimate := func(cur uint64) u128 { return mul64(previous, toEdge).add(mul64(cur, w)) }
	// floor(limit - estimate), at least 0.
	remaining := func(cur uint64) uint64 { return mul64(p.limit, w).saturatingSub(estimate(cur)).div(w) }
	// Until both counts have slid out: the end of this window when only the
	// previous one counts, of the next when the current one does.
	reset := func(cur uint64) uint64 {
		switch {
		case previous == 0 && cur == 0:
			return 0
		case cur == 0:
			return msBetween(nowUs, start+w)
		default:
			return msBetween(nowUs, start+2*w)
		}
	}
	if n > p.limit {
		return never(remaining(current), p.limit, reset(current))
	}
	if mul64(p.limit, w).less(estimate(current + n)) {
		waitUs := slidingWindowWait(previous, current, toEdge, w, p.limit, n)
		return denied(remaining(current), p.limit, (waitUs+999)/1000, reset(current))
	}
	after := current + n
	store := &slidingWindowState{last: nowUs, previous: previous, current: after}
	return admitted(remaining(after), p.limit, reset(after), n, store)
}

// slidingWindowWait is the shortest wait in microseconds after which
// n <= limit more units fit, with nothing else arriving. The estimate only
// falls with time (across a window's edge too), so this is exact.
func slidingWindowWait(previous, current, toEdge, w, limit, n uint64) uint64 {
	// Within this window: previous * (toEdge - wait) <= (limit - current - n) * w.
	if limit >= current+n {
		excess := mul64(previous, toEdge).saturatingSub(mul64(limit-current-n, w))
		if wait := ceilDiv(excess, max(previous, 1)); wait < toEdge {
			return wait
		}
	}
	// In the next window current becomes the weighted count:
	// current * (w - intoNext) <= (limit - n) * w.
	excess := mul64(current, w).saturatingSub(mul64(limit-n, w))
	return toEdge + ceilDiv(excess, max(current, 1))
}
