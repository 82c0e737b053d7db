//! Token bucket: a bucket holds up to `capacity` tokens and refills at
//! `rate` tokens per second; a request for `n` tokens is admitted when the
//! bucket holds at least `n`, and then takes them.
//!
//! tokens(t) = min(capacity, tokens(last) + (t - last) * rate)
//!
//! Time is integer microseconds and tokens are integer pico-tokens (1e-12),
//! so a rate given to the micro-token per second refills an exact integer
//! number of pico-tokens every microsecond: no rounding ever accumulates.
//! Up to 2^53 - 1 tokens that is 96 bits: the math runs in `u128`.

use std::ffi::CStr;

pub use super::BucketParams as Params;
use super::{PICO_PER_UNIT, Verdict};
use crate::error::Error;
use crate::limit::{Call, Kind, Outcome, fixed};
use crate::state::{Fixed, Value};

/// What is stored per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Tokens held at `last_us`, in pico-tokens.
    pub tokens: u128,
    /// Unix time of the last update, in microseconds.
    pub last_us: u64,
}

impl State {
    /// A state some call could have stored: at most a full bucket of the
    /// largest capacity, at a time a call may give.
    pub fn is_valid(&self) -> bool {
        self.tokens <= u128::from(super::MAX_UNITS) * PICO_PER_UNIT
            && self.last_us <= super::MAX_TIME_US
    }
}

/// The bucket at `now_us`: refilled, clamped to the capacity. A missing key
/// is a full bucket; a `now_us` before the last update counts as no time.
fn refill(stored: Option<State>, now_us: u64, params: &Params) -> State {
    match stored {
        None => State { tokens: params.full(), last_us: now_us },
        Some(state) => {
            let now_us = now_us.max(state.last_us);
            let tokens = state.tokens + params.flow(state.last_us, now_us);
            State { tokens: tokens.min(params.full()), last_us: now_us }
        }
    }
}

/// Refills the bucket to `now_us` and, when `n` tokens are there, takes them.
/// `n == 0` only looks.
pub fn decide(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let State { tokens, last_us } = refill(stored, now_us, params);
    let full = params.full();
    let whole = |tokens: u128| (tokens / PICO_PER_UNIT) as u64;
    if n > params.capacity {
        return Verdict::never(whole(tokens), params.ms_for(full - tokens));
    }
    let wanted = u128::from(n) * PICO_PER_UNIT;
    if tokens < wanted {
        let retry_after_ms = params.ms_for(wanted - tokens);
        return Verdict::denied(whole(tokens), retry_after_ms, params.ms_for(full - tokens));
    }
    let left = tokens - wanted;
    let store = (n > 0).then_some(State { tokens: left, last_us });
    Verdict::admitted(whole(left), params.ms_for(full - left), store)
}

/// Gives `n` tokens back, up to a full bucket. A missing key is full
/// already: nothing to give back, nothing stored.
pub fn refund(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let State { tokens, last_us } = refill(stored, now_us, params);
    let full = params.full();
    let tokens = (tokens + u128::from(n) * PICO_PER_UNIT).min(full);
    let store = (stored.is_some() && n > 0).then_some(State { tokens, last_us });
    Verdict::admitted((tokens / PICO_PER_UNIT) as u64, params.ms_for(full - tokens), store)
}

/// `RL.TOKENBUCKET key capacity rate now [n]`, and `TOKENBUCKET` in a limit
/// spec.
pub struct TokenBucket;

impl Kind for TokenBucket {
    const NAME: &'static CStr = c"TOKENBUCKET";
    type Params = Params;

    fn run(params: &Params, call: Call, value: Option<Value>) -> Result<Outcome, Error> {
        let stored = fixed(value, |f| if let Fixed::TokenBucket(s) = f { Some(s) } else { None })?;
        let verdict = call.run([decide, refund], stored, params);
        Ok(Outcome::of(verdict, params.capacity, Fixed::TokenBucket))
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_UNITS;
    use super::super::test_support::*;
    use super::*;
    use proptest::prelude::*;

    fn params(capacity: u64, tokens_per_second: u64) -> Params {
        Params { capacity, refill_per_us: tokens_per_second * 1_000_000 }
    }

    #[test]
    fn fresh_bucket_is_full_and_takes_one() {
        let v = decide(None, T0, &params(10, 1), 1);
        assert_eq!(reply(&v), (true, 9, 0, 1000));
        assert_eq!(v.store, Some(State { tokens: 9 * PICO_PER_UNIT, last_us: T0 }));
    }

    #[test]
    fn drained_bucket_denies_until_one_token_refilled() {
        let p = params(2, 1);
        let s = decide(None, T0, &p, 2).store;
        let v = decide(s, T0 + 250_000, &p, 1);
        assert_eq!(reply(&v), (false, 0, 750, 1750));
        assert_eq!(v.store, None);
    }

    #[test]
    fn refill_after_two_and_a_half_seconds() {
        let p = params(10, 1);
        let s = decide(None, T0, &p, 10).store;
        let v = decide(s, T0 + 2_500_000, &p, 1);
        assert_eq!(reply(&v), (true, 1, 0, 8500));
    }

    #[test]
    fn more_than_capacity_can_never_pass() {
        let v = decide(None, T0, &params(5, 1), 6);
        assert_eq!(reply(&v), (false, 5, -1, 0));
        assert_eq!(v.store, None);
    }

    #[test]
    fn peek_reports_and_stores_nothing() {
        assert_eq!(reply(&decide(None, T0, &params(7, 1), 0)), (true, 7, 0, 0));
        assert_eq!(decide(None, T0, &params(7, 1), 0).store, None);
    }

    #[test]
    fn backwards_clock_counts_as_no_time() {
        let p = params(10, 1);
        let s = decide(None, T0, &p, 5).store;
        let v = decide(s, T0 - 3 * SECOND, &p, 1);
        assert_eq!(reply(&v), (true, 4, 0, 6000));
        assert_eq!(v.store.map(|s| s.last_us), Some(T0));
    }

    #[test]
    fn shrunk_capacity_clamps_tokens() {
        let s = decide(None, T0, &params(10, 1), 1).store;
        let v = decide(s, T0, &params(3, 1), 1);
        assert_eq!(reply(&v), (true, 2, 0, 1000));
    }

    #[test]
    fn fractional_rate_is_exact() {
        // 0.000003 tokens/s is 3 pico-tokens per microsecond.
        let p = Params { capacity: 1, refill_per_us: 3 };
        let s = decide(None, T0, &p, 1).store;
        let one_token_us = (PICO_PER_UNIT / 3 + 1) as u64; // 333_333.34 s, rounded up
        assert!(!decide(s, T0 + one_token_us - 1, &p, 1).allowed);
        assert!(decide(s, T0 + one_token_us, &p, 1).allowed);
        assert_eq!(decide(s, T0, &p, 1).retry_after_ms, 333_333_334);
    }

    #[test]
    fn the_largest_bucket_is_exact() {
        // 2^53 - 1 tokens at 10,000/s: the slowest rate that refills it
        // within MAX_SPAN_US.
        let p = params(MAX_UNITS, 10_000);
        let all = decide(None, T0, &p, MAX_UNITS);
        assert_eq!(reply(&all), (true, 0, 0, 900_719_925_474_100));
        assert_eq!(reply(&decide(all.store, T0, &p, 1)), (false, 0, 1, 900_719_925_474_100));
        assert_eq!(reply(&decide(None, T0, &p, 1)), (true, MAX_UNITS - 1, 0, 1));
        assert_eq!(reply(&decide(None, T0, &p, MAX_UNITS + 1)), (false, MAX_UNITS, -1, 0));
    }

    #[test]
    fn refund_gives_tokens_back_up_to_full() {
        let p = params(10, 1);
        let s = decide(None, T0, &p, 6).store;
        let v = refund(s, T0 + 500_000, &p, 2);
        // 4 + 0.5 refilled + 2 = 6.5 tokens.
        assert_eq!(reply(&v), (true, 6, 0, 3500));
        assert_eq!(v.store, Some(State { tokens: 6_500_000_000_000, last_us: T0 + 500_000 }));
        // More than was taken: full, so fresh (reset 0).
        assert_eq!(reply(&refund(s, T0, &p, 100)), (true, 10, 0, 0));
        // A missing key: full already, nothing to store.
        let missing = refund(None, T0, &p, 3);
        assert_eq!((reply(&missing), missing.store), ((true, 10, 0, 0), None));
        // n = 0 only looks.
        assert_eq!(refund(s, T0, &p, 0).store, None);
    }

    proptest! {
        /// Waiting exactly `retry_after_ms` admits the request; a microsecond
        /// less than the exact wait does not.
        #[test]
        fn retry_after_is_the_shortest_wait(
            capacity in 1u64..1000, rate in 1u64..10_000_000_000, taken in 0u64..1000,
            n in 1u64..1000, gap in 0u64..10_000_000,
        ) {
            let p = Params { capacity, refill_per_us: rate };
            let s = decide(None, T0, &p, taken.min(capacity)).store;
            let v = decide(s, T0 + gap, &p, n.min(capacity));
            if !v.allowed {
                let later = T0 + gap + v.retry_after_ms as u64 * 1000;
                prop_assert!(decide(s, later, &p, n.min(capacity)).allowed);
                prop_assert!(!decide(s, later - 1000, &p, n.min(capacity)).allowed);
            }
        }

        /// After `reset_after_ms` the bucket is full again.
        #[test]
        fn reset_after_refills_completely(
            capacity in 1u64..1000, rate in 1u64..10_000_000_000, n in 1u64..1000,
        ) {
            let p = Params { capacity, refill_per_us: rate };
            let v = decide(None, T0, &p, n.min(capacity));
            let later = T0 + v.reset_after_ms * 1000;
            prop_assert_eq!(decide(v.store, later, &p, 0).remaining, capacity);
            let before = decide(v.store, later - 1000, &p, 0);
            prop_assert!(before.reset_after_ms > 0);
        }
    }
}
