//! One limit: an algorithm and its parameters (`ALGORITHM a b`, or a
//! command's own `a b`). Each algorithm says, as a `Kind`, how its
//! parameters are read and how it decides, refunds and says what to write,
//! for the single-key commands, RL.MULTI, RL.PEEK and RL.REFUND alike.
//! Pure: the glue reads the key before and writes it after.

use std::ffi::CStr;

use crate::algorithms::Verdict;
use crate::algorithms::concurrency::{self, Concurrency};
use crate::algorithms::fixed_window::{self, FixedWindow};
use crate::algorithms::leaky_bucket::{self, LeakyBucket};
use crate::algorithms::sliding_log::{self, Append, Removal, SlidingLog};
use crate::algorithms::sliding_window::{self, SlidingWindow};
use crate::algorithms::token_bucket::{self, TokenBucket};
use crate::error::Error;
use crate::state::{Fixed, Value};

/// An algorithm as the commands run it; each algorithm's file implements
/// it, beside the math.
pub trait Kind {
    /// Its name in a limit spec (`ALGORITHM a b`).
    const NAME: &'static CStr;
    /// Its parameters, each in its range.
    type Params: Parameters;
    /// Runs `call` on the key's state `value` (`None`: no key): the reply
    /// and the change to write.
    fn run(params: &Self::Params, call: Call, value: Option<Value>) -> Result<Outcome, Error>;
}

/// An algorithm's parameters, as a command gives them (`a b`).
pub trait Parameters: Copy {
    /// Reads `a b`, checking their ranges.
    fn parse(a: &[u8], b: &[u8]) -> Result<Self, Error>;
}

/// An algorithm's `decide` or `refund`: (stored state, now_us, parameters,
/// n) to its verdict.
pub type Step<S, P, V> = fn(S, u64, &P, u64) -> V;

/// One call of a limit: take `n` units at `now_us`, or give them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub op: Op,
    pub now_us: u64,
    pub n: u64,
}

impl Call {
    /// `decide` or `refund`, as the call's `op` says, on the stored state.
    pub fn run<S, P, V>(self, [decide, refund]: [Step<S, P, V>; 2], stored: S, p: &P) -> V {
        let run = if self.op == Op::Take { decide } else { refund };
        run(stored, self.now_us, p, self.n)
    }
}

/// A limit that RL.MULTI, RL.PEEK or RL.REFUND names: each algorithm with
/// its own parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    TokenBucket(token_bucket::Params),
    LeakyBucket(leaky_bucket::Params),
    FixedWindow(fixed_window::Params),
    SlidingWindow(sliding_window::Params),
    SlidingLog(sliding_log::Params),
    Concurrency(concurrency::Params),
}

impl Limit {
    /// `ALGORITHM a b`: the algorithm named so, in any case, and its
    /// parameters.
    pub fn parse(name: &[u8], a: &[u8], b: &[u8]) -> Result<Limit, Error> {
        parse_as::<TokenBucket>(name, a, b, Limit::TokenBucket)
            .or_else(|| parse_as::<LeakyBucket>(name, a, b, Limit::LeakyBucket))
            .or_else(|| parse_as::<FixedWindow>(name, a, b, Limit::FixedWindow))
            .or_else(|| parse_as::<SlidingWindow>(name, a, b, Limit::SlidingWindow))
            .or_else(|| parse_as::<SlidingLog>(name, a, b, Limit::SlidingLog))
            .or_else(|| parse_as::<Concurrency>(name, a, b, Limit::Concurrency))
            .unwrap_or(Err(Error::Algorithm))
    }

    /// Runs `call` on the key's state `value`.
    pub fn run(&self, call: Call, value: Option<Value>) -> Result<Outcome, Error> {
        match self {
            Limit::TokenBucket(params) => TokenBucket::run(params, call, value),
            Limit::LeakyBucket(params) => LeakyBucket::run(params, call, value),
            Limit::FixedWindow(params) => FixedWindow::run(params, call, value),
            Limit::SlidingWindow(params) => SlidingWindow::run(params, call, value),
            Limit::SlidingLog(params) => SlidingLog::run(params, call, value),
            Limit::Concurrency(params) => Concurrency::run(params, call, value),
        }
    }
}

/// `K`'s limit when `name` is its name.
fn parse_as<K: Kind>(
    name: &[u8],
    a: &[u8],
    b: &[u8],
    limit: fn(K::Params) -> Limit,
) -> Option<Result<Limit, Error>> {
    name.eq_ignore_ascii_case(K::NAME.to_bytes()).then(|| K::Params::parse(a, b).map(limit))
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

impl From<Fixed> for Change {
    fn from(fixed: Fixed) -> Change {
        Change::Put(fixed)
    }
}

/// A limit's answer: its reply, and the change to make if the call goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub fields: Fields,
    pub change: Option<Change>,
}

impl Outcome {
    /// A verdict's reply, `limit` its third field, and its change.
    pub fn of<S, C: Into<Change>>(
        verdict: Verdict<S>,
        limit: u64,
        change: impl FnOnce(S) -> C,
    ) -> Outcome {
        let fields = Fields {
            allowed: verdict.allowed,
            remaining: verdict.remaining,
            limit,
            retry_after_ms: verdict.retry_after_ms,
            reset_after_ms: verdict.reset_after_ms,
            delay_ms: None,
            lease_id: None,
        };
        Outcome { fields, change: verdict.store.map(|store| change(store).into()) }
    }
}

/// Take `n` units, or give them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Take,
    Refund,
}

/// The key's state as `of` reads it: `None` for a missing key, `WRONGTYPE`
/// when it holds another algorithm's.
pub fn stored<'a, S>(
    value: Option<Value<'a>>,
    of: impl FnOnce(Value<'a>) -> Option<S>,
) -> Result<Option<S>, Error> {
    value.map(|value| of(value).ok_or(Error::WrongType)).transpose()
}

/// The key's state, when it holds a fixed state that `of` reads: as
/// `stored`.
pub fn fixed<S>(
    value: Option<Value>,
    of: impl FnOnce(Fixed) -> Option<S>,
) -> Result<Option<S>, Error> {
    stored(value, |value| if let Value::Fixed(fixed) = value { of(fixed) } else { None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithms_by_name() {
        let window = sliding_log::Params { limit: 1, window_us: 1_000_000 };
        assert_eq!(Limit::parse(b"slidingLog", b"1", b"1"), Ok(Limit::SlidingLog(window)));
        let lease = concurrency::Params { limit: 1, lease_us: 1_000_000 };
        assert_eq!(Limit::parse(b"concurrency", b"1", b"1"), Ok(Limit::Concurrency(lease)));
        assert_eq!(Limit::parse(b"LEAKYBUCKET", b"1", b"0"), Err(Error::Rate));
        assert_eq!(Limit::parse(b"GCRA", b"1", b"1"), Err(Error::Algorithm));
        assert_eq!(Limit::parse(b"THROTTLE", b"1", b"1"), Err(Error::Algorithm));
    }

    #[test]
    fn concurrency_arguments() {
        use crate::algorithms::{MAX_SPAN_US, MAX_UNITS};
        let cc = |a: &[u8], b: &[u8]| concurrency::Params::parse(a, b);
        let spec = |limit, lease_us| Ok(concurrency::Params { limit, lease_us });
        assert_eq!(cc(b"10", b"30"), spec(10, 30_000_000));
        assert_eq!(cc(b"9007199254740991", b"0.001"), spec(MAX_UNITS, 1000));
        assert_eq!(cc(b"1", b"1000000000000"), spec(1, MAX_SPAN_US));
        assert_eq!(cc(b"0", b"30"), Err(Error::Limit));
        assert_eq!(cc(b"1", b"0.0009"), Err(Error::Lease));
        assert_eq!(cc(b"1", b"1000000000000.000001"), Err(Error::Lease));
    }
}
