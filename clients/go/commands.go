package ratelimit

import (
	"fmt"
	"strconv"
)

// The module's commands as argument lists, and their replies checked and
// named. A reply of any other shape is an error, never a panic: it is what
// a server that is not what the limiter expects would send.

// charge is one limit applied to one request: its Redis key, its limit for
// this request (a LimitFunc's answer) and its cost.
type charge struct {
	*policy
	key  string
	size int64
	cost int64
}

func (c *charge) spec() []string {
	return []string{c.command, c.sizeArg(), c.paramText}
}

// sizeArg is the charge's limit as the module takes it.
func (c *charge) sizeArg() string {
	if c.sizeText != "" { // the limit's own: no LimitFunc
		return c.sizeText
	}
	return strconv.FormatInt(c.size, 10)
}

// checkArgs is a check's one call, now = * (the server's clock): for one
// charge its limit's own command, RL.TOKENBUCKET key a b now n (RL.ACQUIRE
// for a concurrency limit), which costs Redis less than RL.MULTI and
// answers the fields RL.MULTI would; for several, RL.MULTI numkeys key...
// now ALGORITHM a b n ...
func checkArgs(charges []charge) []string {
	if len(charges) == 1 {
		c := &charges[0]
		return []string{c.own, c.key, c.sizeArg(), c.paramText, "*", strconv.FormatInt(c.cost, 10)}
	}
	args := make([]string, 0, 3+5*len(charges))
	args = append(args, "RL.MULTI", strconv.Itoa(len(charges)))
	for i := range charges {
		args = append(args, charges[i].key)
	}
	args = append(args, "*")
	for i := range charges {
		c := &charges[i]
		args = append(args, c.command, c.sizeArg(), c.paramText, strconv.FormatInt(c.cost, 10))
	}
	return args
}

func peekArgs(c *charge) []string {
	return append(append([]string{"RL.PEEK", c.key}, c.spec()...), "*", strconv.FormatInt(c.cost, 10))
}

func refundArgs(c *charge, units int64) []string {
	return append(append([]string{"RL.REFUND", c.key}, c.spec()...), "*", strconv.FormatInt(units, 10))
}

func releaseArgs(key string, leaseID int64) []string {
	return []string{"RL.RELEASE", key, strconv.FormatInt(leaseID, 10), "*"}
}

// renewArgs: the lease runs the limit's own lease from now.
func renewArgs(c *charge, leaseID int64) []string {
	return []string{"RL.RENEW", c.key, strconv.FormatInt(leaseID, 10), c.paramText, "*"}
}

// integers reads a reply that must be an array of n integers (or, with
// optional, n+1; n < 6): the integers, and how many.
func integers(reply any, what fmt.Stringer, n int, optional bool) ([6]int64, int, error) {
	var out [6]int64
	items, ok := reply.([]any)
	if !ok {
		return out, 0, fmt.Errorf("ratelimit: %s: unexpected reply %T (want an array of %d integers)", what, reply, n)
	}
	if len(items) != n && !(optional && len(items) == n+1) {
		return out, 0, fmt.Errorf("ratelimit: %s: unexpected reply of %d fields (want %d)", what, len(items), n)
	}
	for i, item := range items {
		v, ok := item.(int64)
		if !ok {
			return out, 0, fmt.Errorf("ratelimit: %s: unexpected field %d: %T (want an integer)", what, i+1, item)
		}
		out[i] = v
	}
	return out, len(items), nil
}

// limitResult names a limit's reply fields: [allowed, remaining, limit,
// retry_after_ms, reset_after_ms] and a leaky bucket's delay_ms or a
// concurrency limit's lease_id.
func limitResult(c *charge, reply any, what fmt.Stringer) (LimitDecision, error) {
	sixth := c.algorithm == LeakyBucket || c.algorithm == Concurrency
	f, n, err := integers(reply, what, 5, sixth)
	if err != nil {
		return LimitDecision{}, err
	}
	if f[0] != 0 && f[0] != 1 {
		return LimitDecision{}, fmt.Errorf("ratelimit: %s: allowed is %d (want 0 or 1)", what, f[0])
	}
	l := LimitDecision{Name: c.name, Algorithm: c.algorithm, Key: c.key, Allowed: f[0] == 1, Remaining: f[1], Limit: f[2],
		RetryAfterMs: f[3], ResetAfterMs: f[4], Cost: c.cost, Param: c.param, QuotaUnit: c.quotaUnit}
	if n == 6 {
		if c.algorithm == Concurrency {
			l.LeaseID = f[5]
		} else {
			l.DelayMs = f[5]
		}
	}
	// Slots free as requests end, long before leases run out: the hint, unless the module's figure is shorter.
	if c.algorithm == Concurrency && l.RetryAfterMs > c.retryAfterMs {
		l.RetryAfterMs = c.retryAfterMs
	}
	return l, nil
}

// checkReply reads checkArgs' reply: one limit's own fields, or RL.MULTI's
// [allowed, retry_after_ms, [fields]...].
func checkReply(charges []charge, reply any) (bool, []LimitDecision, error) {
	if len(charges) == 1 {
		l, err := limitResult(&charges[0], reply, command(charges[0].own))
		if err != nil {
			return false, nil, err
		}
		return l.Allowed, []LimitDecision{l}, nil
	}
	items, ok := reply.([]any)
	if !ok || len(items) != 2+len(charges) {
		return false, nil, fmt.Errorf("ratelimit: RL.MULTI: unexpected reply %s (want an array of %d)", describe(reply), 2+len(charges))
	}
	allowed, ok := items[0].(int64)
	if !ok || (allowed != 0 && allowed != 1) {
		return false, nil, fmt.Errorf("ratelimit: RL.MULTI: unexpected allowed field %s", describe(items[0]))
	}
	if _, ok := items[1].(int64); !ok {
		return false, nil, fmt.Errorf("ratelimit: RL.MULTI: unexpected retry_after_ms field %s", describe(items[1]))
	}
	limits := make([]LimitDecision, len(charges))
	for i := range charges {
		l, err := limitResult(&charges[i], items[2+i], multiLimit(i+1))
		if err != nil {
			return false, nil, err
		}
		limits[i] = l
	}
	return allowed == 1, limits, nil
}

// command names a reply's command in an error.
type command string

func (c command) String() string { return string(c) }

// multiLimit names RL.MULTI's nth limit in an error: written only then.
type multiLimit int

func (n multiLimit) String() string { return "RL.MULTI limit " + strconv.Itoa(int(n)) }

// leaseReply is RL.RELEASE's and RL.RENEW's [done, held, reset_after_ms].
func leaseReply(reply any, what fmt.Stringer) (done bool, held, resetAfterMs int64, err error) {
	f, _, err := integers(reply, what, 3, false)
	if err != nil {
		return false, 0, 0, err
	}
	return f[0] == 1, f[1], f[2], nil
}

func describe(v any) string {
	switch v := v.(type) {
	case []any:
		return fmt.Sprintf("(an array of %d)", len(v))
	case nil:
		return "(nil)"
	default:
		return fmt.Sprintf("%T %v", v, v)
	}
}
