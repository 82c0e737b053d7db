//! Leaky bucket as a queue (throttling): up to `capacity` queued units drain
//! at `rate` units per second. An admitted request joins the queue and is
//! told how long to wait before doing its work; a full queue rejects.
//!
//! level(t) = max(0, level(last) - (t - last) * rate)
//!
//! The queue is virtual: a level and a time, O(1) memory. Units are kept in
//! pico-units and time in microseconds, as in the token bucket.

use std::ffi::CStr;

pub use super::BucketParams as Params;
use super::{PICO_PER_UNIT, Verdict};
use crate::error::Error;
use crate::limit::{Call, Kind, Outcome, fixed};
use crate::state::{Fixed, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Units queued at `last_us`, in pico-units.
    pub level: u128,
    /// Unix time of the last update, in microseconds.
    pub last_us: u64,
}

impl State {
    /// A state some call could have stored: a queue no longer than the
    /// largest capacity, and not empty (an empty queue is no key).
    pub fn is_valid(&self) -> bool {
        (1..=u128::from(super::MAX_UNITS) * PICO_PER_UNIT).contains(&self.level)
            && self.last_us <= super::MAX_TIME_US
    }
}

/// A verdict plus `delay_ms`: how long an admitted request waits for the
/// units ahead of it to drain (0 on an empty queue); 0 when denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub verdict: Verdict<State>,
    pub delay_ms: u64,
}

/// The queue at `now_us`, drained. A missing key is an empty queue; a
/// `now_us` before the last update counts as no time passed. A shrunk
/// capacity leaves the queue as it is: it drains normally.
fn drain(stored: Option<State>, now_us: u64, params: &Params) -> State {
    match stored {
        None => State { level: 0, last_us: now_us },
        Some(state) => {
            let now_us = now_us.max(state.last_us);
            let level = state.level.saturating_sub(params.flow(state.last_us, now_us));
            State { level, last_us: now_us }
        }
    }
}

/// Units that fit on top of `level`.
fn free(params: &Params, level: u128) -> u64 {
    (params.full().saturating_sub(level) / PICO_PER_UNIT) as u64
}

/// Drains the queue to `now_us` and, when `n` more units fit, queues them.
/// `n == 0` only looks (its delay is the current wait).
pub fn decide(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Throttle {
    let State { level, last_us } = drain(stored, now_us, params);
    let full = params.full();
    let denied = |verdict: Verdict<State>| Throttle { verdict, delay_ms: 0 };
    if n > params.capacity {
        return denied(Verdict::never(free(params, level), params.ms_for(level)));
    }
    let queued = level + u128::from(n) * PICO_PER_UNIT;
    if queued > full {
        let retry_after_ms = params.ms_for(queued - full);
        return denied(Verdict::denied(free(params, level), retry_after_ms, params.ms_for(level)));
    }
    let store = (n > 0).then_some(State { level: queued, last_us });
    Throttle {
        verdict: Verdict::admitted(free(params, queued), params.ms_for(queued), store),
        delay_ms: params.ms_for(level),
    }
}

/// Takes `n` units off the queue, not below empty; the delay is then the
/// wait of a request queued now. A missing key is an empty queue already.
pub fn refund(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Throttle {
    let State { level, last_us } = drain(stored, now_us, params);
    let level = level.saturating_sub(u128::from(n) * PICO_PER_UNIT);
    let store = (stored.is_some() && n > 0).then_some(State { level, last_us });
    Throttle {
        verdict: Verdict::admitted(free(params, level), params.ms_for(level), store),
        delay_ms: params.ms_for(level),
    }
}

/// `RL.LEAKYBUCKET key capacity rate now [n]` (its reply has a sixth
/// field, `delay_ms`), and `LEAKYBUCKET` in a limit spec.
pub struct LeakyBucket;

impl Kind for LeakyBucket {
    const NAME: &'static CStr = c"LEAKYBUCKET";
    type Params = Params;

    fn run(params: &Params, call: Call, value: Option<Value>) -> Result<Outcome, Error> {
        let stored = fixed(value, |f| if let Fixed::LeakyBucket(s) = f { Some(s) } else { None })?;
        let throttle = call.run([decide, refund], stored, params);
        let mut outcome = Outcome::of(throttle.verdict, params.capacity, Fixed::LeakyBucket);
        outcome.fields.delay_ms = Some(throttle.delay_ms);
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_UNITS;
    use super::super::test_support::*;
    use super::*;
    use proptest::prelude::*;

    fn params(capacity: u64, units_per_second: u64) -> Params {
        Params { capacity, refill_per_us: units_per_second * 1_000_000 }
    }

    fn reply(t: &Throttle) -> (bool, u64, i64, u64, u64) {
        let v = &t.verdict;
        (v.allowed, v.remaining, v.retry_after_ms, v.reset_after_ms, t.delay_ms)
    }

    #[test]
    fn requests_are_paced_one_interval_apart() {
        // 2 units/s: each queued request waits 500 ms more than the one before.
        let p = params(3, 2);
        let first = decide(None, T0, &p, 1);
        assert_eq!(reply(&first), (true, 2, 0, 500, 0));
        let second = decide(first.verdict.store, T0, &p, 1);
        assert_eq!(reply(&second), (true, 1, 0, 1000, 500));
        let third = decide(second.verdict.store, T0, &p, 1);
        assert_eq!(reply(&third), (true, 0, 0, 1500, 1000));
        // Full: the next one must wait for one unit to drain.
        let fourth = decide(third.verdict.store, T0, &p, 1);
        assert_eq!(reply(&fourth), (false, 0, 500, 1500, 0));
        assert_eq!(fourth.verdict.store, None);
        // 200 ms later 0.4 units have drained: still 100 ms to go.
        let later = decide(third.verdict.store, T0 + 200_000, &p, 1);
        assert_eq!(reply(&later), (false, 0, 300, 1300, 0));
    }

    #[test]
    fn queue_drains_to_empty() {
        let p = params(3, 2);
        let s = decide(None, T0, &p, 3).verdict.store;
        assert_eq!(reply(&decide(s, T0 + 5 * SECOND, &p, 1)), (true, 2, 0, 500, 0));
    }

    #[test]
    fn more_than_capacity_never_fits() {
        assert_eq!(reply(&decide(None, T0, &params(3, 1), 4)), (false, 3, -1, 0, 0));
    }

    #[test]
    fn peek_on_fresh_key() {
        let t = decide(None, T0, &params(5, 1), 0);
        assert_eq!(reply(&t), (true, 5, 0, 0, 0));
        assert_eq!(t.verdict.store, None);
    }

    #[test]
    fn backwards_clock_counts_as_no_time() {
        let p = params(4, 1);
        let s = decide(None, T0, &p, 2).verdict.store;
        assert_eq!(reply(&decide(s, T0 - SECOND, &p, 1)), (true, 1, 0, 3000, 2000));
    }

    #[test]
    fn the_largest_queue_is_exact() {
        let p = params(MAX_UNITS, 10_000);
        let all = decide(None, T0, &p, MAX_UNITS);
        assert_eq!(reply(&all), (true, 0, 0, 900_719_925_474_100, 0));
        let next = decide(all.verdict.store, T0, &p, 1);
        assert_eq!(reply(&next), (false, 0, 1, 900_719_925_474_100, 0));
        assert_eq!(reply(&decide(None, T0, &p, 1)), (true, MAX_UNITS - 1, 0, 1, 0));
    }

    #[test]
    fn refund_shortens_the_queue() {
        let p = params(4, 1);
        let s = decide(None, T0, &p, 3).verdict.store;
        // 3 - 0.5 drained - 2 = 0.5 queued.
        let t = refund(s, T0 + 500_000, &p, 2);
        assert_eq!(reply(&t), (true, 3, 0, 500, 500));
        // Below empty: empty, so fresh.
        assert_eq!(reply(&refund(s, T0, &p, 9)), (true, 4, 0, 0, 0));
        let missing = refund(None, T0, &p, 1);
        assert_eq!((reply(&missing), missing.verdict.store), ((true, 4, 0, 0, 0), None));
    }

    proptest! {
        /// After `retry_after_ms` the same request fits; a millisecond before, not.
        #[test]
        fn retry_after_is_the_shortest_wait(
            capacity in 1u64..100, rate in 1u64..10_000_000_000, queued in 0u64..100,
            n in 1u64..100, gap in 0u64..10_000_000,
        ) {
            let p = Params { capacity, refill_per_us: rate };
            let s = decide(None, T0, &p, queued.min(capacity)).verdict.store;
            let t = decide(s, T0 + gap, &p, n.min(capacity));
            if !t.verdict.allowed {
                let later = T0 + gap + t.verdict.retry_after_ms as u64 * 1000;
                prop_assert!(decide(s, later, &p, n.min(capacity)).verdict.allowed);
                prop_assert!(!decide(s, later - 1000, &p, n.min(capacity)).verdict.allowed);
            }
        }

        /// The delay of an admitted request is the time its predecessors drain.
        #[test]
        fn delay_is_the_wait_for_the_queue_ahead(
            capacity in 1u64..100, rate in 1u64..10_000_000_000, queued in 0u64..100,
        ) {
            let p = Params { capacity, refill_per_us: rate };
            let s = decide(None, T0, &p, queued.min(capacity)).verdict.store;
            let t = decide(s, T0, &p, 0);
            let ahead = s.map_or(0, |s| s.level);
            let drained = decide(s, T0 + t.delay_ms * 1000, &p, 0);
            prop_assert_eq!(drained.delay_ms, 0);
            prop_assert_eq!(t.delay_ms, p.ms_for(ahead));
        }
    }
}
