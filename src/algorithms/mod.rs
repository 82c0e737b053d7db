//! The limiters' math: pure functions of (stored state, time, parameters, n).
//! Nothing in here knows about Redis.
//!
//! Every number has a stated range (docs/commands.md), checked when a command
//! is parsed, inside which all of the arithmetic below is exact: no result
//! is ever saturated or wrapped into a different answer.

pub mod concurrency;
pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;
pub mod varint;

use std::ffi::CStr;

/// The algorithms a limit spec names (`ALGORITHM a b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    TokenBucket,
    LeakyBucket,
    FixedWindow,
    SlidingWindow,
    SlidingLog,
    /// At most `limit` slots held at once, under leases (RL.ACQUIRE).
    Concurrency,
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::Concurrency,
    ];

    /// Its name in a limit spec and in RL.SETSTATE (and, but for the
    /// concurrency limit's RL.ACQUIRE, after `RL.`).
    pub fn name(self) -> &'static CStr {
        match self {
            Algorithm::TokenBucket => c"TOKENBUCKET",
            Algorithm::LeakyBucket => c"LEAKYBUCKET",
            Algorithm::FixedWindow => c"FIXEDWINDOW",
            Algorithm::SlidingWindow => c"SLIDINGWINDOW",
            Algorithm::SlidingLog => c"SLIDINGLOG",
            Algorithm::Concurrency => c"CONCURRENCY",
        }
    }

    /// The algorithm named `name`, in any case.
    pub fn named(name: &[u8]) -> Option<Algorithm> {
        Self::ALL.into_iter().find(|a| name.eq_ignore_ascii_case(a.name().to_bytes()))
    }

    /// Whether its parameters are `capacity rate` (else `limit window`).
    pub fn is_bucket(self) -> bool {
        matches!(self, Algorithm::TokenBucket | Algorithm::LeakyBucket)
    }
}

/// Fixed-point scale of the buckets: one unit (token) is 10^12 pico-units,
/// so a rate kept to 10^-6 units/s refills a whole number of pico-units
/// every microsecond.
pub const PICO_PER_UNIT: u128 = 1_000_000_000_000;

/// The most units a limit holds or a call takes: 2^53 - 1, exact in every
/// client language (a JavaScript number, a double).
pub const MAX_UNITS: u64 = (1 << 53) - 1;

/// The latest time a call may give: 9999-12-31T23:59:59.999999Z.
pub const MAX_TIME_US: u64 = 253_402_300_799_999_999;

/// The longest window, and the longest time a bucket takes to refill or
/// drain completely: 10^12 s (about 31,700 years). So every reply's
/// milliseconds, at most two windows, stay below 2^53.
pub const MAX_SPAN_US: u64 = 1_000_000_000_000_000_000;

/// The outcome of one call, in the reply's terms, plus what to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<S> {
    pub allowed: bool,
    /// Units that could still be admitted right now.
    pub remaining: u64,
    /// 0 when allowed, -1 when never, else milliseconds (rounded up).
    pub retry_after_ms: i64,
    /// Milliseconds (rounded up) until the limiter is fresh again; 0 when it
    /// is fresh, so a written state with 0 here is no state at all.
    pub reset_after_ms: u64,
    /// The change to write, or `None` to leave the key as it is.
    pub store: Option<S>,
}

impl<S> Verdict<S> {
    fn denied(remaining: u64, retry_after_ms: u64, reset_after_ms: u64) -> Self {
        let retry_after_ms = i64::try_from(retry_after_ms).unwrap_or(i64::MAX);
        Verdict { allowed: false, remaining, retry_after_ms, reset_after_ms, store: None }
    }

    fn never(remaining: u64, reset_after_ms: u64) -> Self {
        Verdict { retry_after_ms: -1, ..Self::denied(remaining, 0, reset_after_ms) }
    }

    /// An admitted call, or a refund: what is left after it.
    fn admitted(remaining: u64, reset_after_ms: u64, store: Option<S>) -> Self {
        Verdict { allowed: true, remaining, retry_after_ms: 0, reset_after_ms, store }
    }
}

/// `a / b` rounded up; the ranges keep every quotient taken here in `u64`.
fn ceil_div(a: u128, b: u128) -> u64 {
    u64::try_from(a.div_ceil(b)).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::Verdict;

    pub const SECOND: u64 = 1_000_000;
    /// A multiple of 10 s, so that windows of 1, 2, 5 and 10 s start there.
    pub const T0: u64 = 1_700_000_000 * SECOND;

    /// The reply's fields a test compares: allowed, remaining, retry, reset.
    pub fn reply<S>(v: &Verdict<S>) -> (bool, u64, i64, u64) {
        (v.allowed, v.remaining, v.retry_after_ms, v.reset_after_ms)
    }
}
