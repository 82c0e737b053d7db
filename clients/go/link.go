package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// link is the limiter's view of Redis's health. After a call Redis could
// not answer, requests are answered by the OnUnavailable policy without a
// call, and Redis is tried again at most once a second, one call at a time
// (a probe: a request's own call), so limiting resumes within a second of
// Redis coming back.
type link struct {
	down    atomic.Bool // read on every check without the lock
	mu      sync.Mutex
	retryAt time.Time // when a probe may go
	probing bool
}

// retryInterval: after a failure, how long requests get the policy before Redis is tried again.
const retryInterval = time.Second

// mayCall reports whether a request may call Redis now, taking the probe
// when one is due. Every true is followed by answered, failed or gaveUp.
func (l *link) mayCall() bool {
	if !l.down.Load() {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.down.Load() {
		return true
	}
	if l.probing || time.Now().Before(l.retryAt) {
		return false
	}
	l.probing = true
	return true
}

// answered: Redis answered (a reply or an error reply).
func (l *link) answered() {
	if !l.down.Load() {
		return
	}
	l.mu.Lock()
	l.down.Store(false)
	l.probing = false
	l.mu.Unlock()
}

// failed: Redis could not answer; the next try in a second.
func (l *link) failed() {
	l.mu.Lock()
	l.down.Store(true)
	l.probing, l.retryAt = false, time.Now().Add(retryInterval)
	l.mu.Unlock()
}

// gaveUp: the call ended without telling whether Redis is back (the
// caller's context was cancelled): another request may probe.
func (l *link) gaveUp() {
	if !l.down.Load() {
		return
	}
	l.mu.Lock()
	l.probing = false
	l.mu.Unlock()
}
