package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// A call to Redis runs on a goroutine of its own, so the request waits only
// until its deadline while the reply is still read afterwards: Redis runs a
// command it has received even when the caller gave up (a busy or stopped
// server gets to it later), so a late reply to a call that took units or a
// lease is undone at once, on the same node. The goroutine waits up to
// lateWait and ends; Close waits for every one.

// lateWait is how long a call's reply is awaited after its caller gave up.
const lateWait = 60 * time.Second

// timeoutError is a call that got no answer by its deadline.
type timeoutError struct{ after time.Duration }

func (e timeoutError) Error() string {
	return fmt.Sprintf("no answer from Redis within %s", e.after)
}

// pending is one call in flight.
type pending struct {
	done  chan struct{} // closed once reply and err are set
	reply any
	err   error
	// state: waiting, then taken by its caller or abandoned (the caller gave
	// up: the goroutine undoes what the reply took).
	state atomic.Int32
}

const (
	waiting int32 = iota
	taken
	abandoned
)

// undoFunc gives back what a reply took, when its caller had given up.
type undoFunc func(ctx context.Context, reply any)

// start sends call on a goroutine of its own.
func (c *core) start(key string, call []string, undo undoFunc) *pending {
	p := &pending{done: make(chan struct{})}
	c.calls.Add(1)
	go func() {
		defer c.calls.Done()
		ctx, cancel := context.WithTimeout(c.base, lateWait)
		defer cancel()
		p.reply, p.err = c.modes.send(ctx, key, call)
		if !p.state.CompareAndSwap(waiting, taken) && p.err == nil && undo != nil {
			undo(ctx, p.reply)
		}
		close(p.done)
	}()
	return p
}

// wait is the call's reply, or a timeoutError at the deadline, or the
// context's error when it is cancelled first.
func (c *core) wait(ctx context.Context, deadline time.Time, p *pending) (any, error) {
	budget := time.Until(deadline)
	timer := time.NewTimer(budget)
	defer timer.Stop()
	var gaveUp error
	select {
	case <-p.done:
		return p.reply, p.err
	case <-timer.C:
		gaveUp = timeoutError{budget}
	case <-ctx.Done():
		gaveUp = ctx.Err()
		if gaveUp == context.DeadlineExceeded {
			gaveUp = timeoutError{budget}
		}
	}
	if p.state.CompareAndSwap(waiting, abandoned) {
		return nil, gaveUp
	}
	<-p.done // the reply came just now: it is the caller's
	return p.reply, p.err
}

// call sends one command and waits for it until the check's deadline.
func (c *core) call(ctx context.Context, key string, call []string, undo undoFunc) (any, error) {
	return c.wait(ctx, c.deadline(ctx), c.start(key, call, undo))
}

// deadline is the context's deadline or the limiter's timeout from now, whichever comes first.
func (c *core) deadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		return d
	}
	return deadline
}
