package local

// windowParams are a window algorithm's limit (units per window) and window.
type windowParams struct {
	limit    uint64
	windowUs uint64
}

// fixedWindowState is what a fixed window stores: the units counted in
// the window that holds last.
type fixedWindowState struct {
	last  uint64
	count uint64
}

// fixedWindowDecide is RL.FIXEDWINDOW: at most limit units per window,
// the windows [k * window, (k + 1) * window) aligned to the Unix epoch;
// admit when count + n <= limit. A denied request fits when the next
// window starts. n = 0 only looks.
func fixedWindowDecide(stored *fixedWindowState, nowUs uint64, p windowParams, n uint64) outcome {
	var count uint64
	if stored != nil {
		nowUs = max(nowUs, stored.last)
		if windowStart(stored.last, p.windowUs) == windowStart(nowUs, p.windowUs) {
			count = stored.count
		}
	}
	end := windowStart(nowUs, p.windowUs) + p.windowUs
	// Until the window ends; 0 for an empty window, which is fresh already.
	reset := func(count uint64) uint64 {
		if count == 0 {
			return 0
		}
		return msBetween(nowUs, end)
	}
	remaining := p.limit - min(count, p.limit)
	if n > p.limit {
		return never(remaining, p.limit, reset(count))
	}
	if count+n > p.limit {
		return denied(remaining, p.limit, reset(count), reset(count))
	}
	after := count + n
	return admitted(p.limit-after, p.limit, reset(after), n, &fixedWindowState{last: nowUs, count: after})
}
