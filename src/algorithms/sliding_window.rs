//! Sliding window counter: the previous window's count, weighted by how much
//! of it the sliding window still covers, plus the current window's count.
//!
//! estimate(t) = previous * (1 - elapsed / window) + current
//!
//! with windows aligned to the epoch as in the fixed window. All of it is
//! computed multiplied by `window`, in integers, so nothing is rounded.

use std::ffi::CStr;

pub use super::WindowParams as Params;
use super::{Verdict, ceil_div, ms_between, window_start};
use crate::error::Error;
use crate::limit::{Call, Kind, Outcome, fixed};
use crate::state::{Fixed, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Unix time of the last update, in microseconds.
    pub last_us: u64,
    /// Units admitted in the window before the one holding `last_us`.
    pub previous: u64,
    /// Units admitted in the window holding `last_us`.
    pub current: u64,
}

impl State {
    /// A state some call could have stored: counts up to the largest limit,
    /// not both 0 (that is fresh: no key).
    pub fn is_valid(&self) -> bool {
        self.previous <= super::MAX_UNITS
            && self.current <= super::MAX_UNITS
            && self.previous + self.current > 0
            && self.last_us <= super::MAX_TIME_US
    }

    /// The counts as seen from `now_us` (never before the last update):
    /// rolled forward by the windows that began since.
    fn at(stored: Option<State>, now_us: u64, window_us: u64) -> State {
        let now_us = stored.map_or(now_us, |s| now_us.max(s.last_us));
        let start = window_start(now_us, window_us);
        let (previous, current) = match stored.map(|s| (s, window_start(s.last_us, window_us))) {
            Some((s, last_start)) if last_start == start => (s.previous, s.current),
            Some((s, last_start)) if last_start + window_us == start => (s.current, 0),
            _ => (0, 0),
        };
        State { last_us: now_us, previous, current }
    }
}

/// The counts at a time `elapsed_us` into its window, for the estimate.
struct Counts {
    previous: u128,
    current: u128,
    elapsed_us: u128,
    window_us: u128,
}

impl Counts {
    fn new(state: State, window_us: u64) -> Counts {
        Counts {
            previous: u128::from(state.previous),
            current: u128::from(state.current),
            elapsed_us: u128::from(state.last_us - window_start(state.last_us, window_us)),
            window_us: u128::from(window_us),
        }
    }

    /// estimate * window.
    fn scaled_estimate(&self, extra: u64) -> u128 {
        self.previous * (self.window_us - self.elapsed_us)
            + (self.current + u128::from(extra)) * self.window_us
    }

    /// floor(limit - estimate), at least 0.
    fn remaining(&self, limit: u64) -> u64 {
        let room = (u128::from(limit) * self.window_us).saturating_sub(self.scaled_estimate(0));
        (room / self.window_us) as u64
    }

    /// The shortest wait in microseconds after which `n <= limit` more
    /// units fit, with nothing else arriving. The estimate only falls with
    /// time (continuously, also across a window edge), so this is exact.
    fn wait_for(&self, limit: u64, n: u64) -> u128 {
        let (limit, n, w) = (u128::from(limit), u128::from(n), self.window_us);
        let to_edge = w - self.elapsed_us;
        // Within this window: previous * (to_edge - wait) <= (limit - current - n) * w.
        if let Some(slack) = limit.checked_sub(self.current + n) {
            let excess = (self.previous * to_edge).saturating_sub(slack * w);
            let wait = u128::from(ceil_div(excess, self.previous.max(1)));
            if wait < to_edge {
                return wait;
            }
        }
        // In the next window, `current` becomes the weighted one:
        // current * (w - into_next) <= (limit - n) * w.
        let excess = (self.current * w).saturating_sub((limit - n) * w);
        to_edge + u128::from(ceil_div(excess, self.current.max(1)))
    }
}

/// Milliseconds until both counts have slid out: the end of this window
/// when only the previous one counts, of the next when the current does.
fn reset_after_ms(state: State, window_us: u64) -> u64 {
    let end = window_start(state.last_us, window_us) + window_us;
    match (state.previous, state.current) {
        (0, 0) => 0,
        (_, 0) => ms_between(state.last_us, end),
        _ => ms_between(state.last_us, end + window_us),
    }
}

/// Counts `n` more units at `now_us` when the estimate leaves room for them.
/// `n == 0` only looks.
pub fn decide(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let (limit, w) = (params.limit, params.window_us);
    let now = State::at(stored, now_us, w);
    let counts = Counts::new(now, w);
    if n > limit {
        return Verdict::never(counts.remaining(limit), reset_after_ms(now, w));
    }
    if counts.scaled_estimate(n) > u128::from(limit) * counts.window_us {
        let retry_after_ms = ceil_div(counts.wait_for(limit, n), 1000);
        return Verdict::denied(counts.remaining(limit), retry_after_ms, reset_after_ms(now, w));
    }
    let after = State { current: now.current + n, ..now };
    let store = (n > 0).then_some(after);
    Verdict::admitted(Counts::new(after, w).remaining(limit), reset_after_ms(after, w), store)
}

/// Uncounts up to `n` units: the current window's first, then the
/// previous one's.
pub fn refund(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let w = params.window_us;
    let now = State::at(stored, now_us, w);
    let from_current = n.min(now.current);
    let after = State {
        current: now.current - from_current,
        previous: now.previous.saturating_sub(n - from_current),
        ..now
    };
    let store = (stored.is_some() && n > 0).then_some(after);
    Verdict::admitted(
        Counts::new(after, w).remaining(params.limit),
        reset_after_ms(after, w),
        store,
    )
}

/// `RL.SLIDINGWINDOW key limit window now [n]`, and `SLIDINGWINDOW` in a limit
/// spec.
pub struct SlidingWindow;

impl Kind for SlidingWindow {
    const NAME: &'static CStr = c"SLIDINGWINDOW";
    type Params = Params;

    fn run(params: &Params, call: Call, value: Option<Value>) -> Result<Outcome, Error> {
        let stored =
            fixed(value, |f| if let Fixed::SlidingWindow(s) = f { Some(s) } else { None })?;
        let verdict = call.run([decide, refund], stored, params);
        Ok(Outcome::of(verdict, params.limit, Fixed::SlidingWindow))
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_UNITS;
    use super::super::test_support::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn previous_window_is_weighted_by_its_overlap() {
        let p = Params { limit: 10, window_us: 10 * SECOND };
        let s = decide(None, T0 + 5 * SECOND, &p, 8).store;
        // 2.5 s into the next window: 8 * 0.75 = 6 still count.
        let v = decide(s, T0 + 12_500_000, &p, 3);
        assert_eq!(reply(&v), (true, 1, 0, 17_500));
        assert_eq!(v.store, Some(State { last_us: T0 + 12_500_000, previous: 8, current: 3 }));
        // Now 6 + 3 = 9: 2 more wait until the estimate falls to 8,
        // when previous weighs 5/8: 1.25 s later.
        let w = decide(v.store, T0 + 12_500_000, &p, 2);
        assert_eq!(reply(&w), (false, 1, 1250, 17_500));
    }

    #[test]
    fn no_burst_across_the_edge() {
        let p = Params { limit: 5, window_us: SECOND };
        let s = decide(None, T0 + 999_000, &p, 5).store;
        let v = decide(s, T0 + 1_001_000, &p, 1);
        assert!(!v.allowed);
        // One unit fits when 5 * (1 - e) <= 4: e = 0.2 s into the window.
        assert_eq!(v.retry_after_ms, 199);
    }

    #[test]
    fn retry_can_lie_in_the_next_window() {
        let p = Params { limit: 4, window_us: SECOND };
        let s = decide(None, T0 + 100_000, &p, 4).store;
        // Nothing in the previous window: 4 more need current's weight to
        // fall to 0, at the end of the next window.
        assert_eq!(reply(&decide(s, T0 + 100_000, &p, 4)), (false, 0, 1900, 1900));
    }

    #[test]
    fn peek_and_too_many() {
        let p = Params { limit: 4, window_us: SECOND };
        assert_eq!(reply(&decide(None, T0, &p, 0)), (true, 4, 0, 0));
        assert_eq!(reply(&decide(None, T0, &p, 5)), (false, 4, -1, 0));
        assert_eq!(decide(None, T0, &p, 0).store, None);
    }

    #[test]
    fn the_largest_limit_is_exact() {
        let p = Params { limit: MAX_UNITS, window_us: 10 * SECOND };
        let all = decide(None, T0 + 5 * SECOND, &p, MAX_UNITS);
        assert_eq!(reply(&all), (true, 0, 0, 15_000));
        // Half a window later half of them still weigh: 1 unit fits once
        // (2^53 - 1) * (1 - e) <= 2^53 - 2, e = 1 / (2^53 - 1) of 10 s.
        let next = decide(all.store, T0 + 10 * SECOND, &p, 1);
        assert_eq!(reply(&next), (false, 0, 1, 10_000));
        assert_eq!(reply(&decide(None, T0, &p, 1)), (true, MAX_UNITS - 1, 0, 20_000));
    }

    #[test]
    fn refund_takes_from_the_current_window_first() {
        let p = Params { limit: 10, window_us: 10 * SECOND };
        let s = decide(None, T0 + 5 * SECOND, &p, 8).store;
        let s = decide(s, T0 + 12_500_000, &p, 2).store;
        // 3 back: the current window's 2, then 1 of the previous window's 8.
        let v = refund(s, T0 + 12_500_000, &p, 3);
        assert_eq!(v.store, Some(State { last_us: T0 + 12_500_000, previous: 7, current: 0 }));
        // 7 * 0.75 = 5.25 weigh: 4 remain; fresh at the end of this window.
        assert_eq!(reply(&v), (true, 4, 0, 7500));
        assert_eq!(reply(&refund(s, T0 + 12_500_000, &p, 10)), (true, 10, 0, 0));
    }

    proptest! {
        /// After `retry_after_ms` the same request fits; a millisecond before, not.
        #[test]
        fn retry_after_is_the_shortest_wait(
            limit in 1u64..50, window_ms in 1u64..20_000, first in 0u64..50,
            gap in 0u64..40_000_000, second in 0u64..50, n in 1u64..50, gap2 in 0u64..40_000_000,
        ) {
            let p = Params { limit, window_us: window_ms * 1000 };
            let s = decide(None, T0 + 123_457, &p, first.min(limit)).store;
            let s = decide(s, T0 + 123_457 + gap, &p, second.min(limit)).store.or(s);
            let at = T0 + 123_457 + gap + gap2;
            let v = decide(s, at, &p, n.min(limit));
            if !v.allowed {
                let later = at + v.retry_after_ms as u64 * 1000;
                prop_assert!(decide(s, later, &p, n.min(limit)).allowed);
                prop_assert!(!decide(s, later - 1000, &p, n.min(limit)).allowed);
            }
            // After reset_after_ms the limiter is fresh.
            let fresh = decide(v.store.or(s), at + v.reset_after_ms * 1000, &p, 0);
            prop_assert_eq!(fresh.remaining, limit);
        }
    }
}
