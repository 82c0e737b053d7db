package ratelimit

import "sync/atomic"

// Decision is what the limiter decided for one request.
type Decision struct {
	// Allowed: every limit admitted its cost, and each took it.
	Allowed bool
	// RetryAfterMs is 0 when allowed, -1 when the request can never be
	// admitted (a cost above its limit), else the wait after which it would be.
	RetryAfterMs int64
	// NeverAllowed is RetryAfterMs == -1.
	NeverAllowed bool
	// DelayMs is the largest leaky-bucket delay: how long to wait before doing the work.
	DelayMs int64
	// Limits are the limits' parts, in the limiter's order (while Redis is
	// unavailable, only the limits decided in process).
	Limits []LimitDecision
	// Outcome says how the decision was made (the metrics' ratelimit.outcome).
	Outcome Outcome

	charges  []charge
	local    bool // decided in process: refunds give nothing, leases are the process's
	released atomic.Bool
}

// LimitDecision is one limit's part of a decision: its own command's reply fields.
type LimitDecision struct {
	Name      string
	Algorithm Algorithm
	// Key is the Redis key.
	Key string
	// Allowed: this limit alone would admit the request.
	Allowed   bool
	Remaining int64
	Limit     int64
	// RetryAfterMs is 0 when allowed, -1 when it never can; a concurrency
	// limit's is its RetryAfter hint when that is shorter than the module's.
	RetryAfterMs int64
	ResetAfterMs int64
	// DelayMs is a leaky bucket's wait before the work runs.
	DelayMs int64
	// LeaseID is a concurrency limit's lease for Release and Renew, 0 when none was taken.
	LeaseID int64
	Cost    int64
	// Param is the limit's rate, window or lease.
	Param     float64
	QuotaUnit QuotaUnit
}

// Outcome is how a decision was made: the metrics' ratelimit.outcome.
type Outcome string

// The outcomes of docs/clients.md "Metrics and onDecision".
const (
	OutcomeAllowed                 Outcome = "allowed"
	OutcomeDenied                  Outcome = "denied"
	OutcomeDeniedInProcess         Outcome = "denied_in_process"
	OutcomeUnavailableOpen         Outcome = "unavailable_open"
	OutcomeUnavailableClosed       Outcome = "unavailable_closed"
	OutcomeUnavailableLocalAllowed Outcome = "unavailable_local_allowed"
	OutcomeUnavailableLocalDenied  Outcome = "unavailable_local_denied"
)

// decisionOf makes a decision of limit results: allowed when all admitted;
// else the longest wait of the limits that denied, -1 when one never can.
func decisionOf(charges []charge, limits []LimitDecision, allowed bool, outcome Outcome) *Decision {
	d := &Decision{Allowed: allowed, Limits: limits, Outcome: outcome, charges: charges}
	for _, l := range limits {
		if allowed {
			d.DelayMs = max(d.DelayMs, l.DelayMs)
		} else if !l.Allowed && d.RetryAfterMs != -1 {
			if l.RetryAfterMs == -1 {
				d.RetryAfterMs = -1
			} else {
				d.RetryAfterMs = max(d.RetryAfterMs, l.RetryAfterMs)
			}
		}
	}
	d.NeverAllowed = d.RetryAfterMs == -1
	return d
}

// Limit is the part of the limit named name, and whether there is one.
func (d *Decision) Limit(name string) (LimitDecision, bool) {
	for _, l := range d.Limits {
		if l.Name == name {
			return l, true
		}
	}
	return LimitDecision{}, false
}

// leases are the limits that hold a lease, with their charges.
func (d *Decision) leases() []int {
	var held []int
	for i, l := range d.Limits {
		if l.LeaseID != 0 {
			held = append(held, i)
		}
	}
	return held
}
