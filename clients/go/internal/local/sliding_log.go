package local

// logRun is count units admitted at one time.
type logRun struct {
	at    uint64
	count uint64
}

// slidingLogState is what a sliding log stores: the runs of admitted
// units, oldest first. The runs that left the window are dropped when the
// next admitted call writes the log.
type slidingLogState struct {
	runs []logRun
}

// slidingLogDecide is RL.SLIDINGLOG, exact: a unit admitted at s counts
// while s > now - window; admit when count + n <= limit. A denied request
// learns when enough of the oldest units will have left. A time before
// the newest run counts as no time passed. n = 0 only looks.
func slidingLogDecide(stored *slidingLogState, nowUs uint64, p windowParams, n uint64) outcome {
	var runs []logRun
	var newest uint64
	if stored != nil && len(stored.runs) > 0 {
		runs = stored.runs
		newest = runs[len(runs)-1].at
	}
	nowUs = max(nowUs, newest)
	// s > now - window is s >= now + 1 - window; before the first window
	// has passed nothing has left, a unit at time 0 included.
	cutoff := nowUs + 1 - min(nowUs+1, p.windowUs)
	first := 0
	for first < len(runs) && runs[first].at < cutoff {
		first++
	}
	live := runs[first:]
	var count uint64
	for _, run := range live {
		count += run.count
	}
	leaves := func(at uint64) uint64 { return msBetween(nowUs, at+p.windowUs) }
	var reset uint64
	if count > 0 {
		reset = leaves(newest)
	}
	remaining := p.limit - min(count, p.limit)
	if n > p.limit {
		return never(remaining, p.limit, reset)
	}
	if count+n > p.limit {
		// Wait for the oldest units to leave until n fit.
		mustLeave, seen := count+n-p.limit, uint64(0)
		for _, run := range live {
			if seen += run.count; seen >= mustLeave {
				return denied(remaining, p.limit, leaves(run.at), reset)
			}
		}
		return denied(remaining, p.limit, reset, reset)
	}
	if n == 0 {
		return admitted(remaining, p.limit, reset, 0, nil)
	}
	// The live runs and the new one; append may reuse the array past the
	// stored runs' end, which they never read.
	store := &slidingLogState{runs: append(live, logRun{at: nowUs, count: n})}
	return admitted(remaining-n, p.limit, leaves(nowUs), n, store)
}
