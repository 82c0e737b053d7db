//! Token bucket: a bucket holds up to `capacity` tokens and refills at
//! `rate` tokens per second; a request for `n` tokens is admitted when the
//! bucket holds at least `n`, and then takes them.
//!
//! tokens(t) = min(capacity, tokens(last) + (t - last) * rate)
//!
//! Time is integer microseconds and tokens are integer pico-tokens (1e-12),
//! so a rate given to the micro-token per second refills an exact integer
//! number of pico-tokens every microsecond: no rounding ever accumulates.

use super::{PICO_PER_UNIT, Verdict, ceil_div};

/// The largest capacity whose pico-token count fits in a `u64`.
pub const MAX_CAPACITY: u64 = u64::MAX / PICO_PER_UNIT;

/// The parameters of one call, already validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Most tokens the bucket holds, 1..=MAX_CAPACITY.
    pub capacity: u64,
    /// Refill in pico-tokens per microsecond (= micro-tokens per second), >= 1.
    pub refill_per_us: u64,
}

/// What is stored per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Tokens held at `last_us`, in pico-tokens.
    pub tokens: u64,
    /// Unix time of the last update, in microseconds.
    pub last_us: u64,
}

impl Params {
    fn full(&self) -> u64 {
        self.capacity * PICO_PER_UNIT
    }

    /// Milliseconds, rounded up, for `pico` pico-units to flow at the rate.
    pub(super) fn ms_for(&self, pico: u64) -> u64 {
        ceil_div(u128::from(pico), u128::from(self.refill_per_us) * 1000)
    }
}

/// Refills the bucket to `now_us` and, when `n` tokens are there, takes them.
/// A missing key is a full bucket; a `now_us` before the last update counts
/// as no time passed. `n == 0` only looks.
pub fn decide(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let full = params.full();
    let (tokens, last_us) = match stored {
        None => (full, now_us),
        Some(state) => {
            let now_us = now_us.max(state.last_us);
            let refill = (now_us - state.last_us).saturating_mul(params.refill_per_us);
            (full.min(state.tokens.saturating_add(refill)), now_us)
        }
    };
    let reset_after_ms = |tokens: u64| params.ms_for(full - tokens);

    if n > params.capacity {
        return Verdict::denied(tokens / PICO_PER_UNIT, -1, reset_after_ms(tokens));
    }
    let wanted = n * PICO_PER_UNIT;
    if tokens < wanted {
        let retry_after_ms = params.ms_for(wanted - tokens);
        return Verdict::denied(
            tokens / PICO_PER_UNIT,
            i64::try_from(retry_after_ms).unwrap_or(i64::MAX),
            reset_after_ms(tokens),
        );
    }
    let left = tokens - wanted;
    Verdict {
        allowed: true,
        remaining: left / PICO_PER_UNIT,
        retry_after_ms: 0,
        reset_after_ms: reset_after_ms(left),
        store: (n > 0).then_some(State { tokens: left, last_us }),
    }
}

#[cfg(test)]
mod tests {
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
        let one_token_us = PICO_PER_UNIT / 3 + 1; // 333_333.34 s, rounded up
        assert!(!decide(s, T0 + one_token_us - 1, &p, 1).allowed);
        assert!(decide(s, T0 + one_token_us, &p, 1).allowed);
        assert_eq!(decide(s, T0, &p, 1).retry_after_ms, 333_333_334);
    }

    #[test]
    fn huge_values_saturate() {
        let p = Params { capacity: MAX_CAPACITY, refill_per_us: u64::MAX };
        let s = Some(State { tokens: 0, last_us: 0 });
        let v = decide(s, u64::MAX, &p, MAX_CAPACITY);
        assert_eq!(reply(&v), (true, 0, 0, 1));
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
