//! The limiters' math: pure functions of (stored state, time, parameters, n).
//! Nothing in here knows about Redis.

pub mod fixed_window;
pub mod leaky_bucket;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;

/// Fixed-point scale: one unit (token) is 10^12 pico-units.
pub const PICO_PER_UNIT: u64 = 1_000_000_000_000;

/// The outcome of one call, in the reply's terms, plus what to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<S> {
    pub allowed: bool,
    /// Units that could still be admitted right now.
    pub remaining: u64,
    /// 0 when allowed, -1 when never, else milliseconds (rounded up).
    pub retry_after_ms: i64,
    /// Milliseconds (rounded up) until the limiter is fresh again.
    pub reset_after_ms: u64,
    /// The new state to write, or `None` to leave the key as it is.
    pub store: Option<S>,
}

impl<S> Verdict<S> {
    fn denied(remaining: u64, retry_after_ms: i64, reset_after_ms: u64) -> Self {
        Verdict { allowed: false, remaining, retry_after_ms, reset_after_ms, store: None }
    }
}

/// `a / b` rounded up, saturated to `u64`.
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
