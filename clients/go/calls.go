package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A check's call to Redis waits until the check's deadline. Redis runs a
// command it has received even when the caller gave up (a busy or stopped
// server gets to it later), so the call is sent with Client.DoLate: its
// late reply is still read, by the client, and what it took undone at once
// on the same node. The request's goroutine makes the call itself: no
// goroutine is started while replies come in time.

// timeoutError is a call that got no answer by its deadline.
type timeoutError struct{ after time.Duration }

func (e timeoutError) Error() string {
	return fmt.Sprintf("no answer from Redis within %s", e.after)
}

// call sends the charges' one call (checkArgs), at now, and waits for it
// until deadline (the check's: ctx's is not later); a late reply that took
// something is undone.
func (c *core) call(ctx context.Context, now, deadline time.Time, charges []charge) (any, error) {
	budget := deadline.Sub(now)
	ctx, deadline = c.deadlines.within(ctx, deadline)
	late := func(reply any) { c.undoCall(c.base, charges, reply) }
	reply, err := c.modes.send(ctx, charges[0].key, checkArgs(charges), late)
	if err != nil && !errors.Is(err, context.Canceled) && !isAnswer(err) && !time.Now().Before(deadline) {
		return nil, timeoutError{budget}
	}
	return reply, err
}

// deadline is the context's deadline or the limiter's timeout from now, whichever comes first.
func (c *core) deadline(ctx context.Context) time.Time { return c.deadlineAt(ctx, time.Now()) }

func (c *core) deadlineAt(ctx context.Context, now time.Time) time.Time {
	deadline := now.Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		return d
	}
	return deadline
}
