package ratelimit

import (
	"context"
	"sync/atomic"
	"time"
)

// A call to Redis carries its deadline in its context. context.WithDeadline
// on each request's context costs a timer and an entry in that context's
// children, more CPU than the rest of a check besides the round trip; so
// calls whose deadlines fall in the same millisecond share one context done
// then (the deadline rounded down: never later than the check's), and a
// call's context is the request's for its values with that one's deadline.
// A cancelled request does not end its call: the call ends with its reply
// or at its deadline, and go-redis does not watch cancellation either.

// deadlines hands out the shared contexts.
type deadlines struct {
	last atomic.Pointer[deadline]
}

// deadline is the context done at the end of one millisecond.
type deadline struct {
	ms     int64 // Unix milliseconds
	ctx    context.Context
	cancel context.CancelFunc // not needed: the timer fires
}

// within is ctx (its values) with the deadline at, or ctx itself when its
// own is not later; and the deadline the call gets.
func (d *deadlines) within(ctx context.Context, at time.Time) (context.Context, time.Time) {
	if own, ok := ctx.Deadline(); ok && !own.After(at) {
		return ctx, own
	}
	ns := at.UnixNano()
	ms := ns / int64(time.Millisecond)
	shared := d.last.Load()
	if shared == nil || shared.ms != ms {
		shared = &deadline{ms: ms}
		shared.ctx, shared.cancel = context.WithDeadline(context.Background(), at.Add(-time.Duration(ns%int64(time.Millisecond))))
		d.last.Store(shared)
	}
	at, _ = shared.ctx.Deadline()
	return withDeadline{ctx, shared.ctx}, at
}

// withDeadline is a context's values with another's deadline.
type withDeadline struct {
	context.Context // the values
	done            context.Context
}

func (w withDeadline) Deadline() (time.Time, bool) { return w.done.Deadline() }
func (w withDeadline) Done() <-chan struct{}       { return w.done.Done() }
func (w withDeadline) Err() error                  { return w.done.Err() }
