//! Fixed window counter: at most `limit` units per window of `window`
//! seconds, windows aligned to the Unix epoch, [k*window, (k+1)*window), so
//! every node agrees on where they start. Cheap, but up to 2 x limit can
//! pass in a short span across a window edge.

use std::ffi::CStr;

pub use super::WindowParams as Params;
use super::{Verdict, ms_between, window_start};
use crate::error::Error;
use crate::limit::{Call, Kind, Outcome, fixed};
use crate::state::{Fixed, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Unix time of the last update, in microseconds.
    pub last_us: u64,
    /// Units admitted in the window holding `last_us`.
    pub count: u64,
}

impl State {
    /// A state some call could have stored: a count of 1 to the largest
    /// limit (0 is an empty window: no key).
    pub fn is_valid(&self) -> bool {
        (1..=super::MAX_UNITS).contains(&self.count) && self.last_us <= super::MAX_TIME_US
    }
}

/// The window as seen at `now_us`: the time (never before the last
/// update) and the units counted in the window holding it.
fn current(stored: Option<State>, now_us: u64, window_us: u64) -> State {
    let now_us = stored.map_or(now_us, |s| now_us.max(s.last_us));
    let count = match stored {
        Some(s) if window_start(s.last_us, window_us) == window_start(now_us, window_us) => s.count,
        _ => 0,
    };
    State { last_us: now_us, count }
}

/// Milliseconds until the window holding `now_us` ends, for a count; 0 for
/// an empty window, which is fresh already.
fn reset_after_ms(now: State, window_us: u64) -> u64 {
    let end = window_start(now.last_us, window_us) + window_us;
    if now.count == 0 { 0 } else { ms_between(now.last_us, end) }
}

/// Counts `n` more units in the window holding `now_us` when they fit.
/// `n == 0` only looks.
pub fn decide(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let now = current(stored, now_us, params.window_us);
    let remaining = params.limit.saturating_sub(now.count);
    if n > params.limit {
        return Verdict::never(remaining, reset_after_ms(now, params.window_us));
    }
    if now.count + n > params.limit {
        // The next window starts empty, and n <= limit fits there.
        let to_end = reset_after_ms(now, params.window_us);
        return Verdict::denied(remaining, to_end, to_end);
    }
    let after = State { count: now.count + n, ..now };
    let store = (n > 0).then_some(after);
    Verdict::admitted(params.limit - after.count, reset_after_ms(after, params.window_us), store)
}

/// Uncounts up to `n` units of the current window; units counted in an
/// earlier window are gone already.
pub fn refund(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let now = current(stored, now_us, params.window_us);
    let after = State { count: now.count.saturating_sub(n), ..now };
    let store = (stored.is_some() && n > 0).then_some(after);
    let remaining = params.limit.saturating_sub(after.count);
    Verdict::admitted(remaining, reset_after_ms(after, params.window_us), store)
}

/// `RL.FIXEDWINDOW key limit window now [n]`, and `FIXEDWINDOW` in a limit
/// spec.
pub struct FixedWindow;

impl Kind for FixedWindow {
    const NAME: &'static CStr = c"FIXEDWINDOW";
    type Params = Params;

    fn run(params: &Params, call: Call, value: Option<Value>) -> Result<Outcome, Error> {
        let stored = fixed(value, |f| if let Fixed::FixedWindow(s) = f { Some(s) } else { None })?;
        let verdict = call.run([decide, refund], stored, params);
        Ok(Outcome::of(verdict, params.limit, Fixed::FixedWindow))
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_UNITS;
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn counts_within_an_epoch_aligned_window() {
        let p = Params { limit: 3, window_us: 10 * SECOND };
        let first = decide(None, T0 + 2_500_000, &p, 2);
        assert_eq!(reply(&first), (true, 1, 0, 7500));
        assert_eq!(first.store, Some(State { last_us: T0 + 2_500_000, count: 2 }));
        let denied = decide(first.store, T0 + 9 * SECOND, &p, 2);
        assert_eq!(reply(&denied), (false, 1, 1000, 1000));
        // The next window starts empty.
        let next = decide(first.store, T0 + 10 * SECOND, &p, 3);
        assert_eq!(reply(&next), (true, 0, 0, 10_000));
    }

    #[test]
    fn twice_the_limit_passes_across_an_edge() {
        let p = Params { limit: 5, window_us: SECOND };
        let end_of_one = decide(None, T0 + 999_000, &p, 5);
        assert!(end_of_one.allowed);
        let start_of_next = decide(end_of_one.store, T0 + 1_001_000, &p, 5);
        assert!(start_of_next.allowed, "the weakness of fixed windows");
    }

    #[test]
    fn peek_and_too_many() {
        let p = Params { limit: 4, window_us: SECOND };
        assert_eq!(reply(&decide(None, T0, &p, 0)), (true, 4, 0, 0));
        assert_eq!(reply(&decide(None, T0, &p, 5)), (false, 4, -1, 0));
    }

    #[test]
    fn the_largest_limit_is_exact() {
        let p = Params { limit: MAX_UNITS, window_us: SECOND };
        let all = decide(None, T0 + 250_000, &p, MAX_UNITS);
        assert_eq!(reply(&all), (true, 0, 0, 750));
        assert_eq!(reply(&decide(all.store, T0 + 500_000, &p, 1)), (false, 0, 500, 500));
        assert_eq!(reply(&decide(None, T0, &p, 1)), (true, MAX_UNITS - 1, 0, 1000));
    }

    #[test]
    fn refund_uncounts_the_current_window_only() {
        let p = Params { limit: 5, window_us: SECOND };
        let s = decide(None, T0 + 100_000, &p, 4).store;
        let v = refund(s, T0 + 200_000, &p, 1);
        assert_eq!(reply(&v), (true, 2, 0, 800));
        assert_eq!(v.store, Some(State { last_us: T0 + 200_000, count: 3 }));
        // All of it, or more: an empty window, fresh.
        assert_eq!(reply(&refund(s, T0 + 200_000, &p, 7)), (true, 5, 0, 0));
        // After the window rolled there is nothing left to give back.
        assert_eq!(reply(&refund(s, T0 + 1_200_000, &p, 2)), (true, 5, 0, 0));
    }

    #[test]
    fn backwards_clock_counts_as_no_time() {
        let p = Params { limit: 4, window_us: SECOND };
        let s = decide(None, T0 + 1_250_000, &p, 3).store;
        assert_eq!(reply(&decide(s, T0 + 500_000, &p, 1)), (true, 0, 0, 750));
    }
}
