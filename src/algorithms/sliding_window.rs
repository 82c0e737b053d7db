//! Sliding window counter: the previous window's count, weighted by how much
//! of it the sliding window still covers, plus the current window's count.
//!
//! estimate(t) = previous * (1 - elapsed / window) + current
//!
//! with windows aligned to the epoch as in the fixed window. All of it is
//! computed multiplied by `window`, in integers, so nothing is rounded.

use super::fixed_window::{Params, ms_between, window_start};
use super::{Verdict, ceil_div};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Unix time of the last update, in microseconds.
    pub last_us: u64,
    /// Units admitted in the window before the one holding `last_us`.
    pub previous: u64,
    /// Units admitted in the window holding `last_us`.
    pub current: u64,
}

/// The counts as seen from a time `elapsed_us` into its window.
struct Counts {
    previous: u128,
    current: u128,
    elapsed_us: u128,
    window_us: u128,
}

impl Counts {
    /// estimate * window.
    fn scaled_estimate(&self, extra: u64) -> u128 {
        self.previous * (self.window_us - self.elapsed_us)
            + (self.current + u128::from(extra)) * self.window_us
    }

    /// floor(limit - estimate), at least 0.
    fn remaining(&self, limit: u64) -> u64 {
        let room = (u128::from(limit) * self.window_us).saturating_sub(self.scaled_estimate(0));
        u64::try_from(room / self.window_us).unwrap_or(u64::MAX)
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
            let wait = ceil_div(excess, self.previous.max(1)) as u128;
            if wait < to_edge {
                return wait;
            }
        }
        // In the next window, `current` becomes the weighted one:
        // current * (w - into_next) <= (limit - n) * w.
        let excess = (self.current * w).saturating_sub((limit - n) * w);
        to_edge + ceil_div(excess, self.current.max(1)) as u128
    }
}

/// Counts `n` more units at `now_us` when the estimate leaves room for them.
/// A `now_us` before the last update counts as no time passed; `n == 0`
/// only looks.
pub fn decide(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let w = params.window_us;
    let now_us = stored.map_or(now_us, |s| now_us.max(s.last_us));
    let window_start = window_start(now_us, w);
    let (previous, current) = match stored.map(|s| (s, self::window_start(s.last_us, w))) {
        Some((s, start)) if start == window_start => (s.previous, s.current),
        Some((s, start)) if start.saturating_add(w) == window_start => (s.current, 0),
        _ => (0, 0),
    };
    let counts = Counts {
        previous: u128::from(previous),
        current: u128::from(current),
        elapsed_us: u128::from(now_us - window_start),
        window_us: u128::from(w),
    };
    let to_edge = window_start.saturating_add(w);
    let reset_after_ms = |current: u64| match (previous, current) {
        (0, 0) => 0,
        (_, 0) => ms_between(now_us, to_edge),
        _ => ms_between(now_us, to_edge.saturating_add(w)),
    };
    let limit = params.limit;

    if n > limit {
        return Verdict::denied(counts.remaining(limit), -1, reset_after_ms(current));
    }
    if counts.scaled_estimate(n) > u128::from(limit) * counts.window_us {
        let wait_ms = ceil_div(counts.wait_for(limit, n), 1000);
        let retry_after_ms = i64::try_from(wait_ms).unwrap_or(i64::MAX);
        return Verdict::denied(counts.remaining(limit), retry_after_ms, reset_after_ms(current));
    }
    let current = current + n;
    let after = Counts { current: u128::from(current), ..counts };
    Verdict {
        allowed: true,
        remaining: after.remaining(limit),
        retry_after_ms: 0,
        reset_after_ms: reset_after_ms(current),
        store: (n > 0).then_some(State { last_us: now_us, previous, current }),
    }
}

#[cfg(test)]
mod tests {
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
