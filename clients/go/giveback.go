package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// What a decision took, given back: units refunded (RL.REFUND), leases
// released (RL.RELEASE) or renewed (RL.RENEW), each on its key's node.
// These calls take nothing, so a timed-out one is not undone.

// Refund gives back units the decision took: every limit's cost when units
// is nil, else units per policy name, at most the cost each took (a request
// that reserved the most gives back the rest: name its token limit, and it
// still counts against the others). A concurrency limit's slots come back
// with Release. A denied decision took nothing, one made in process took
// nothing in Redis: both give nothing back. Redis unable to answer is an
// error that is ErrUnavailable.
func (c *core) Refund(ctx context.Context, d *Decision, units map[string]int64) error {
	back, err := unitsBack(d, units)
	if err != nil || !d.Allowed || d.local || len(back) == 0 {
		return err
	}
	if c.closed.Load() {
		return ErrClosed
	}
	if c.link.down.Load() {
		return fmt.Errorf("%w: %w", ErrUnavailable, errNotTried)
	}
	ctx, _ = c.deadlines.within(ctx, c.deadline(ctx))
	for i, n := range back {
		if n == 0 {
			continue
		}
		if _, err := c.modes.send(ctx, d.charges[i].key, refundArgs(&d.charges[i], n), nil); err != nil {
			return c.failure(err)
		}
	}
	return nil
}

// unitsBack is what Refund gives back per limit, in the decision's order.
func unitsBack(d *Decision, units map[string]int64) ([]int64, error) {
	back := make([]int64, len(d.charges))
	if units == nil {
		for i := range d.charges {
			if d.charges[i].algorithm != Concurrency {
				back[i] = d.charges[i].cost
			}
		}
		return back, nil
	}
	names := make([]string, 0, len(units))
	for name := range units {
		names = append(names, name)
	}
	sort.Strings(names) // the first bad name, the same every time
	for _, name := range names {
		i := indexOf(d, name)
		switch {
		case i < 0:
			have := make([]string, len(d.charges))
			for j := range d.charges {
				have[j] = fmt.Sprintf("%q", d.charges[j].name)
			}
			return nil, fmt.Errorf("ratelimit: refund: no limit named %q in this decision (it has %s)", name, strings.Join(have, ", "))
		case d.charges[i].algorithm == Concurrency:
			return nil, fmt.Errorf("ratelimit: refund: %q is a concurrency limit: its slots come back with Release, not a refund", name)
		case units[name] < 0 || units[name] > MaxInteger:
			return nil, fmt.Errorf("ratelimit: refund: %q: units must be an integer from 0 to %d (got %d)", name, int64(MaxInteger), units[name])
		}
		back[i] = min(units[name], d.charges[i].cost)
	}
	return back, nil
}

func indexOf(d *Decision, name string) int {
	for i := range d.charges {
		if d.charges[i].name == name {
			return i
		}
	}
	return -1
}

// Release frees the slots of every lease the decision took, once: later
// calls do nothing, as does a decision without leases. A failure is logged,
// never returned: the lease then runs out by itself. A lease taken in
// process is released in process, also once Redis answers again.
func (c *core) Release(ctx context.Context, d *Decision) {
	held := d.leases()
	if len(held) == 0 || d.released.Swap(true) {
		return
	}
	if d.local {
		c.releaseLocally(d, held)
		return
	}
	if c.closed.Load() {
		return
	}
	ctx, _ = c.deadlines.within(context.WithoutCancel(ctx), c.deadline(ctx))
	for _, i := range held {
		l := d.Limits[i]
		if _, err := c.modes.send(ctx, l.Key, releaseArgs(l.Key, l.LeaseID), nil); err != nil {
			c.logger.Warn(fmt.Sprintf("rate limiter release failed: %v (the lease runs out by itself)", err))
		}
	}
}

// Renew makes every lease the decision holds run its limit's lease from
// now, for work that outlasts it: true when each was still held, false when
// one had run out or been released, or the decision holds none (the work
// should stop: its slot may be another's). Redis unable to answer is an
// error that is ErrUnavailable (at once while Redis waits for its next
// try); an error reply is returned as it came.
func (c *core) Renew(ctx context.Context, d *Decision) (bool, error) {
	held := d.leases()
	if len(held) == 0 {
		return false, nil
	}
	if d.local {
		return c.renewLocally(d, held)
	}
	if c.closed.Load() {
		return false, ErrClosed
	}
	if c.link.down.Load() {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, errNotTried)
	}
	ctx, _ = c.deadlines.within(ctx, c.deadline(ctx))
	all := true
	for _, i := range held {
		reply, err := c.modes.send(ctx, d.Limits[i].Key, renewArgs(&d.charges[i], d.Limits[i].LeaseID), nil)
		if err != nil {
			return false, c.failure(err)
		}
		renewed, _, _, err := leaseReply(reply, command("RL.RENEW"))
		if err != nil {
			return false, err
		}
		all = all && renewed
	}
	return all, nil
}

// failure is a call's error as the caller gets it: an answer as it came,
// else Redis unavailable (and the link down until its next try).
func (c *core) failure(err error) error {
	if isAnswer(err) || errors.Is(err, context.Canceled) {
		return err
	}
	c.link.failed()
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
