//! One limit: an algorithm and its parameters (`ALGORITHM a b`, or a
//! command's own `a b`). It decides, refunds and says what to write, for
//! the single-key commands, RL.MULTI, RL.PEEK and RL.REFUND alike. Pure:
//! the glue reads the key before and writes it after.

use crate::algorithms::concurrency;
use crate::algorithms::sliding_log::{Append, Removal};
use crate::algorithms::{
    Algorithm, BucketParams, Verdict, WindowParams, fixed_window, leaky_bucket, sliding_log,
    sliding_window, token_bucket,
};
use crate::error::Error;
use crate::state::{Fixed, Value};

/// A limit with validated parameters: each algorithm's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    TokenBucket(BucketParams),
    LeakyBucket(BucketParams),
    FixedWindow(WindowParams),
    SlidingWindow(WindowParams),
    SlidingLog(WindowParams),
    Concurrency(concurrency::Params),
}

/// A limit's reply: `[allowed, remaining, limit, retry_after_ms,
/// reset_after_ms]`, and `delay_ms` for the leaky bucket or `lease_id`
/// for a concurrency limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    pub allowed: bool,
    pub remaining: u64,
    pub limit: u64,
    pub retry_after_ms: i64,
    pub reset_after_ms: u64,
    pub delay_ms: Option<u64>,
    /// The lease taken, 0 when none was.
    pub lease_id: Option<u64>,
}

/// What a call changes in its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Write this state (a fresh one, `reset_after_ms` 0, deletes the key).
    Put(Fixed),
    /// Log units in the sliding log.
    Append(Append),
    /// Take units out of the sliding log.
    Remove(Removal),
    /// Take, free or renew a lease.
    Lease(concurrency::Change),
}

/// A limit's answer: its reply, and the change to make if the call goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub fields: Fields,
    pub change: Option<Change>,
}

/// Take `n` units, or give them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Take,
    Refund,
}

/// The key's state when it is a `Fixed::$variant`: `None` for a missing
/// key, `WRONGTYPE` for another algorithm's.
macro_rules! stored {
    ($value:expr, $variant:ident) => {
        match $value {
            None => None,
            Some(Value::Fixed(Fixed::$variant(state))) => Some(state),
            Some(_) => return Err(Error::WrongType),
        }
    };
}

impl Limit {
    /// The algorithm the limit runs.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Limit::TokenBucket(_) => Algorithm::TokenBucket,
            Limit::LeakyBucket(_) => Algorithm::LeakyBucket,
            Limit::FixedWindow(_) => Algorithm::FixedWindow,
            Limit::SlidingWindow(_) => Algorithm::SlidingWindow,
            Limit::SlidingLog(_) => Algorithm::SlidingLog,
            Limit::Concurrency(_) => Algorithm::Concurrency,
        }
    }

    /// The capacity or limit: the reply's third field.
    pub fn size(&self) -> u64 {
        match self {
            Limit::TokenBucket(p) | Limit::LeakyBucket(p) => p.capacity,
            Limit::FixedWindow(p) | Limit::SlidingWindow(p) | Limit::SlidingLog(p) => p.limit,
            Limit::Concurrency(p) => p.limit,
        }
    }

    /// Applies `op` for `n` units at `now_us` to the key's state `value`.
    pub fn run(&self, op: Op, value: Option<Value>, now_us: u64, n: u64) -> Result<Outcome, Error> {
        let take = op == Op::Take;
        Ok(match self {
            Limit::TokenBucket(params) => {
                let run = if take { token_bucket::decide } else { token_bucket::refund };
                let verdict = run(stored!(value, TokenBucket), now_us, params, n);
                self.outcome(verdict, None, |s| Change::Put(Fixed::TokenBucket(s)))
            }
            Limit::LeakyBucket(params) => {
                let run = if take { leaky_bucket::decide } else { leaky_bucket::refund };
                let throttle = run(stored!(value, LeakyBucket), now_us, params, n);
                self.outcome(throttle.verdict, Some(throttle.delay_ms), |s| {
                    Change::Put(Fixed::LeakyBucket(s))
                })
            }
            Limit::FixedWindow(params) => {
                let run = if take { fixed_window::decide } else { fixed_window::refund };
                let verdict = run(stored!(value, FixedWindow), now_us, params, n);
                self.outcome(verdict, None, |s| Change::Put(Fixed::FixedWindow(s)))
            }
            Limit::SlidingWindow(params) => {
                let run = if take { sliding_window::decide } else { sliding_window::refund };
                let verdict = run(stored!(value, SlidingWindow), now_us, params, n);
                self.outcome(verdict, None, |s| Change::Put(Fixed::SlidingWindow(s)))
            }
            Limit::SlidingLog(params) => {
                let log = match value {
                    None => None,
                    Some(Value::Log(log)) => Some(log),
                    Some(_) => return Err(Error::WrongType),
                };
                match op {
                    Op::Take => {
                        let verdict = sliding_log::decide(log.as_deref(), now_us, params, n);
                        self.outcome(verdict, None, Change::Append)
                    }
                    Op::Refund => {
                        let verdict = sliding_log::refund(log.as_deref(), now_us, params, n);
                        self.outcome(verdict, None, Change::Remove)
                    }
                }
            }
            Limit::Concurrency(params) => {
                let leases = match value {
                    None => None,
                    Some(Value::Leases(leases)) => Some(leases),
                    Some(_) => return Err(Error::WrongType),
                };
                // A slot comes back by its lease's id: RL.RELEASE.
                if op == Op::Refund {
                    return Err(Error::RefundConcurrency);
                }
                let verdict = concurrency::acquire(leases.as_deref(), now_us, params, n);
                let lease_id = match verdict.store {
                    Some(concurrency::Change::Acquire { lease, .. }) => lease.id,
                    _ => 0,
                };
                let mut outcome = self.outcome(verdict, None, Change::Lease);
                outcome.fields.lease_id = Some(lease_id);
                outcome
            }
        })
    }

    fn outcome<S>(
        &self,
        verdict: Verdict<S>,
        delay_ms: Option<u64>,
        change: impl FnOnce(S) -> Change,
    ) -> Outcome {
        let fields = Fields {
            allowed: verdict.allowed,
            remaining: verdict.remaining,
            limit: self.size(),
            retry_after_ms: verdict.retry_after_ms,
            reset_after_ms: verdict.reset_after_ms,
            delay_ms,
            lease_id: None,
        };
        Outcome { fields, change: verdict.store.map(change) }
    }
}
