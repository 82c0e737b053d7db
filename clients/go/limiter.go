package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter checks a request against its limits: one call over all of them
// (one per partition key on Redis Cluster), all or nothing: the limit's own
// command when there is one limit, RL.MULTI for several. R is the
// request type its key, limit and cost functions read (*http.Request for
// the net/http middleware). Goroutine-safe.
type Limiter[R any] struct {
	*core
	limits []*limitSpec[R]
	key    KeyFunc[R]
	prefix string
}

// core is the limiter's part that does not depend on the request type.
type core struct {
	client    Client
	modes     *modes
	link      link
	denials   *denials // nil when off
	metrics   *metrics
	local     inProcess // nil when no limit is Local
	timeout   time.Duration
	deadlines deadlines
	logger    *slog.Logger
	cluster   bool
	base      context.Context // of the undoing of late replies: cancelled by Close
	cancel    context.CancelFunc
	closed    atomic.Bool
	instance  int64
}

// New checks opts and makes a limiter that sends its commands through client.
// Close it when done: it closes client.
func New[R any](client Client, opts Options[R]) (*Limiter[R], error) {
	if client == nil {
		return nil, configError("client", "required: goredis.New(rdb) or valkey.New(option)")
	}
	s, err := opts.check()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(s.limits))
	anyLocal := false
	for i, l := range s.limits {
		names[i] = l.name
		anyLocal = anyLocal || l.onUnavailable == Local
	}
	m, err := newMetrics(s.meters, names, s.onDecision, s.logger)
	if err != nil {
		return nil, err
	}
	c := &core{client: client, modes: newModes(client, s.mode, s.scriptCall, s.logger), metrics: m, timeout: s.timeout,
		logger: s.logger, cluster: client.Cluster(), instance: s.instances}
	if s.denialCache > 0 {
		c.denials = newDenials(s.denialCache)
	}
	if anyLocal {
		c.local = newInProcess()
	}
	c.base, c.cancel = context.WithCancel(context.Background())
	return &Limiter[R]{core: c, limits: s.limits, key: s.key, prefix: s.prefix}, nil
}

// Close ends the limiter: client is closed (late replies still awaited
// are dropped), and no goroutine of the limiter is left when it returns.
func (c *core) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	return c.client.Close()
}

// Check decides for one request, taking its units when admitted.
//
// While Redis cannot answer, each limit does what its OnUnavailable says:
// with a Closed one Check returns an error that is ErrUnavailable;
// otherwise the Local ones are decided in process and the Open ones pass
// (left out of the decision). An error Redis answered (a bad argument,
// WRONGTYPE) or a key, limit or cost function's error is returned as is: a
// server error, never a pass.
func (l *Limiter[R]) Check(ctx context.Context, req R) (*Decision, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	charges, err := l.charges(ctx, req)
	if err != nil {
		return nil, err
	}
	return l.check(ctx, charges)
}

// charges are each limit's key, size and cost for this request.
func (l *Limiter[R]) charges(ctx context.Context, req R) ([]charge, error) {
	charges := make([]charge, len(l.limits))
	for i, s := range l.limits {
		keyOf := s.key
		if keyOf == nil {
			keyOf = l.key
		}
		partition, err := keyOf(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: key of limit %q: %w", s.name, err)
		}
		size, cost := s.size, s.cost
		if s.sizeFunc != nil {
			if size, err = s.sizeFunc(ctx, req); err != nil {
				return nil, fmt.Errorf("ratelimit: limit of limit %q: %w", s.name, err)
			}
			if size < 1 || size > MaxInteger || (s.isBucket() && float64(size)/s.param > 1e12) {
				return nil, fmt.Errorf("ratelimit: limit %q: LimitFunc gave %d: must be an integer from 1 to %d (and limit / rate at most 1e12 seconds)", s.name, size, int64(MaxInteger))
			}
		}
		if s.costFunc != nil {
			if cost, err = s.costFunc(ctx, req); err != nil {
				return nil, fmt.Errorf("ratelimit: cost of limit %q: %w", s.name, err)
			}
			if cost < 0 || cost > MaxInteger {
				return nil, fmt.Errorf("ratelimit: limit %q: CostFunc gave %d: must be an integer from 0 to %d", s.name, cost, int64(MaxInteger))
			}
		}
		charges[i] = charge{policy: &s.policy, key: l.prefix + "{" + partition + "}:" + keyName(&s.policy, size), size: size, cost: cost}
	}
	return charges, nil
}

// keyName is the last part of a limit's Redis key: its name; for an unnamed
// limit, what it is (algorithm, limit, rate, window or lease, and a quota
// unit other than requests), so unnamed limits share state only when they
// are the same limit.
func keyName(p *policy, size int64) string {
	if p.named {
		return p.name
	}
	name := string(p.algorithm) + ":" + strconv.FormatInt(size, 10) + ":" + p.paramText
	if p.quotaUnit != "" && p.algorithm != Concurrency {
		name += ":" + string(p.quotaUnit)
	}
	return name
}

// check decides once each limit's key, size and cost are known.
func (c *core) check(ctx context.Context, charges []charge) (*Decision, error) {
	cacheable := c.denials != nil && !hasConcurrency(charges)
	var cacheKey string
	if cacheable {
		cacheKey = denialKey(charges)
		if known := c.denials.answer(cacheKey, charges); known != nil {
			c.metrics.decided(OutcomeDeniedInProcess, known, 0, nil)
			return known, nil
		}
	}
	if !c.link.mayCall() {
		return c.unavailable(charges, nil, 0)
	}
	started := time.Now()
	decision, err := c.decide(ctx, charges, started)
	took := time.Since(started)
	switch {
	case err == nil:
		c.metrics.called(callOK, took)
		c.link.answered()
		if cacheable && !decision.Allowed {
			c.denials.remember(cacheKey, charges, decision)
		}
		c.metrics.decided(decision.Outcome, decision, took, nil)
		return decision, nil
	case isAnswer(err):
		c.metrics.called(callError, took)
		c.link.answered()
		return nil, err
	case errors.Is(err, context.Canceled):
		c.link.gaveUp() // the caller went away: nothing learnt about Redis
		return nil, err
	}
	var timeout timeoutError
	if errors.As(err, &timeout) {
		c.metrics.called(callTimeout, took)
	} else {
		c.metrics.called(callError, took)
	}
	c.link.failed()
	return c.unavailable(charges, err, took)
}

func hasConcurrency(charges []charge) bool {
	for i := range charges {
		if charges[i].algorithm == Concurrency {
			return true
		}
	}
	return false
}

// errNotTried: a call not made while Redis waits for its next try.
var errNotTried = errors.New("Redis did not answer the last call; tried again at most once a second")

// unavailable answers by each limit's policy: an error wrapping
// ErrUnavailable when one is Closed; else the Local ones decided in
// process; else a pass. A failed call writes one log line (cause non-nil).
func (c *core) unavailable(charges []charge, cause error, took time.Duration) (*Decision, error) {
	tried := cause != nil
	if !tried {
		cause = errNotTried
	}
	var local []charge
	closed := false
	for i := range charges {
		switch charges[i].onUnavailable {
		case Closed:
			closed = true
		case Local:
			local = append(local, charges[i])
		}
	}
	switch {
	case closed:
		c.logUnavailable(tried, cause, "refusing the request")
		c.metrics.decided(OutcomeUnavailableClosed, nil, took, cause)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, cause)
	case len(local) > 0 && c.local != nil:
		c.logUnavailable(tried, cause, "limiting in process")
		decision, err := c.decideLocally(local)
		if err != nil {
			return nil, err
		}
		c.metrics.decided(decision.Outcome, decision, took, cause)
		return decision, nil
	}
	c.logUnavailable(tried, cause, "letting the request through")
	decision := &Decision{Allowed: true, Outcome: OutcomeUnavailableOpen}
	c.metrics.decided(OutcomeUnavailableOpen, nil, took, cause)
	return decision, nil
}

func (c *core) logUnavailable(tried bool, cause error, handling string) {
	if tried {
		c.logger.Warn(fmt.Sprintf("rate limiter unavailable: %v (%s; Redis is tried again in a second)", cause, handling))
	}
}

// decide sends one call, or on a cluster one per hash tag, giving back
// what the others took when one denies or fails.
func (c *core) decide(ctx context.Context, charges []charge, now time.Time) (*Decision, error) {
	deadline := c.deadlineAt(ctx, now)
	groups := [][]int{nil}
	if c.cluster {
		groups = groupByTag(charges)
	}
	if len(groups) == 1 {
		reply, err := c.call(ctx, now, deadline, charges)
		if err != nil {
			return nil, err
		}
		allowed, limits, err := checkReply(charges, reply)
		if err != nil {
			return nil, err
		}
		return decisionOf(charges, limits, allowed, outcomeOf(allowed)), nil
	}
	return c.acrossSlots(ctx, charges, groups, now, deadline)
}

func outcomeOf(allowed bool) Outcome {
	if allowed {
		return OutcomeAllowed
	}
	return OutcomeDenied
}

// acrossSlots: one call per hash tag, all sent at once. When one denies
// or fails, the others that took their units give them back (refunds,
// leases released), and report their state after that.
func (c *core) acrossSlots(ctx context.Context, charges []charge, groups [][]int, now, deadline time.Time) (*Decision, error) {
	parts := make([][]charge, len(groups))
	replies := make([]any, len(groups))
	errs := make([]error, len(groups))
	var sent sync.WaitGroup
	for g, members := range groups {
		parts[g] = make([]charge, len(members))
		for j, i := range members {
			parts[g][j] = charges[i]
		}
		sent.Add(1)
		go func() {
			defer sent.Done()
			replies[g], errs[g] = c.call(ctx, now, deadline, parts[g])
		}()
	}
	sent.Wait()
	limits := make([]LimitDecision, len(charges))
	admitted := make([]bool, len(groups))
	var failure error
	allowed := true
	for g, reply := range replies {
		err := errs[g]
		var groupLimits []LimitDecision
		if err == nil {
			admitted[g], groupLimits, err = checkReply(parts[g], reply)
		}
		if err != nil {
			if failure == nil {
				failure = err
			}
			allowed = false
			continue
		}
		allowed = allowed && admitted[g]
		for j, i := range groups[g] {
			limits[i] = groupLimits[j]
		}
	}
	if !allowed {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		for g, members := range groups {
			if !admitted[g] {
				continue
			}
			for _, i := range members {
				after, err := c.giveBack(ctx, &charges[i], limits[i])
				if err != nil {
					c.logger.Warn(fmt.Sprintf("rate limiter: units taken for a denied request not given back: %v", err))
					continue
				}
				limits[i] = after
			}
		}
	}
	if failure != nil {
		return nil, failure
	}
	return decisionOf(charges, limits, allowed, outcomeOf(allowed)), nil
}

// groupByTag groups the charges' indexes by their key's hash tag, so each group shares a cluster slot.
func groupByTag(charges []charge) [][]int {
	var groups [][]int
	tags := map[string]int{}
	for i := range charges {
		tag := hashTag(charges[i].key)
		g, ok := tags[tag]
		if !ok {
			g = len(groups)
			tags[tag] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// hashTag is what Redis Cluster hashes of key: the part inside its first {...}, when not empty.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						return key[i+1 : j]
					}
					return key
				}
			}
			return key
		}
	}
	return key
}

// undoCall gives back what a check's late reply took: each limit's cost
// refunded, each lease released. A denied reply took nothing.
func (c *core) undoCall(ctx context.Context, charges []charge, reply any) {
	allowed, limits, err := checkReply(charges, reply)
	if err != nil || !allowed {
		return
	}
	for i := range charges {
		if _, err := c.giveBack(ctx, &charges[i], limits[i]); err != nil {
			c.logger.Warn(fmt.Sprintf("rate limiter: a timed-out check's units not given back: %v", err))
		}
	}
}

// giveBack gives back what one limit took: its cost refunded, or its lease
// released. Its state after that; taken as it was when there was nothing.
func (c *core) giveBack(ctx context.Context, ch *charge, taken LimitDecision) (LimitDecision, error) {
	if ch.algorithm == Concurrency {
		if taken.LeaseID == 0 {
			return taken, nil
		}
		reply, err := c.modes.send(ctx, ch.key, releaseArgs(ch.key, taken.LeaseID), nil)
		if err != nil {
			return taken, err
		}
		_, held, reset, err := leaseReply(reply, command("RL.RELEASE"))
		if err != nil {
			return taken, err
		}
		taken.Remaining, taken.ResetAfterMs, taken.LeaseID = max(0, ch.size-held), reset, 0
		return taken, nil
	}
	if ch.cost == 0 {
		return taken, nil
	}
	reply, err := c.modes.send(ctx, ch.key, refundArgs(ch, ch.cost), nil)
	if err != nil {
		return taken, err
	}
	after, err := limitResult(ch, reply, command("RL.REFUND"))
	if err != nil {
		return taken, err
	}
	taken.Remaining, taken.ResetAfterMs, taken.DelayMs = after.Remaining, after.ResetAfterMs, after.DelayMs
	return taken, nil
}

// Peek tells whether the request would be admitted now, taking nothing
// (RL.PEEK of each limit). While Redis cannot answer: an error that is
// ErrUnavailable when a limit is Closed, else an allowed decision without
// limits (Outcome OutcomeUnavailableOpen).
func (l *Limiter[R]) Peek(ctx context.Context, req R) (*Decision, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	charges, err := l.charges(ctx, req)
	if err != nil {
		return nil, err
	}
	return l.peek(ctx, charges)
}

func (c *core) peek(ctx context.Context, charges []charge) (*Decision, error) {
	if !c.link.mayCall() {
		return c.peekUnavailable(charges, errNotTried)
	}
	ctx, _ = c.deadlines.within(ctx, c.deadline(ctx))
	limits := make([]LimitDecision, len(charges))
	allowed := true
	for i := range charges {
		reply, err := c.modes.send(ctx, charges[i].key, peekArgs(&charges[i]), nil)
		if err == nil {
			limits[i], err = limitResult(&charges[i], reply, command("RL.PEEK"))
		}
		switch {
		case err == nil:
		case isAnswer(err):
			c.link.answered()
			return nil, err
		case errors.Is(err, context.Canceled):
			c.link.gaveUp()
			return nil, err
		default:
			c.link.failed()
			return c.peekUnavailable(charges, err)
		}
		allowed = allowed && limits[i].Allowed
	}
	c.link.answered()
	return decisionOf(charges, limits, allowed, outcomeOf(allowed)), nil
}

func (c *core) peekUnavailable(charges []charge, cause error) (*Decision, error) {
	for i := range charges {
		if charges[i].onUnavailable == Closed {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, cause)
		}
	}
	return &Decision{Allowed: true, Outcome: OutcomeUnavailableOpen}, nil
}
