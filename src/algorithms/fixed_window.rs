//! Fixed window counter: at most `limit` units per window of `window`
//! seconds, windows aligned to the Unix epoch, [k*window, (k+1)*window), so
//! every node agrees on where they start. Cheap, but up to 2 x limit can
//! pass in a short span across a window edge.

use super::{Verdict, ceil_div};

/// The parameters of the window algorithms, already validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Most units per window, >= 1.
    pub limit: u64,
    /// Window length in microseconds, >= 1000.
    pub window_us: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// Unix time of the last update, in microseconds.
    pub last_us: u64,
    /// Units admitted in the window holding `last_us`.
    pub count: u64,
}

/// Milliseconds, rounded up, from `from_us` to `to_us`.
pub(super) fn ms_between(from_us: u64, to_us: u64) -> u64 {
    ceil_div(u128::from(to_us.saturating_sub(from_us)), 1000)
}

/// The start of the window holding `time_us`.
pub(super) fn window_start(time_us: u64, window_us: u64) -> u64 {
    time_us - time_us % window_us
}

/// Counts `n` more units in the window holding `now_us` when they fit.
/// A `now_us` before the last update counts as no time passed; `n == 0`
/// only looks.
pub fn decide(stored: Option<State>, now_us: u64, params: &Params, n: u64) -> Verdict<State> {
    let w = params.window_us;
    let now_us = stored.map_or(now_us, |s| now_us.max(s.last_us));
    let start = window_start(now_us, w);
    let count = match stored {
        Some(s) if window_start(s.last_us, w) == start => s.count,
        _ => 0,
    };
    let to_end = ms_between(now_us, start.saturating_add(w));
    let reset_after_ms = |count: u64| if count == 0 { 0 } else { to_end };

    if n > params.limit {
        return Verdict::denied(params.limit.saturating_sub(count), -1, reset_after_ms(count));
    }
    let counted = count.saturating_add(n);
    if counted > params.limit {
        // The next window starts empty, and n <= limit fits there.
        let retry_after_ms = i64::try_from(to_end).unwrap_or(i64::MAX);
        return Verdict::denied(params.limit.saturating_sub(count), retry_after_ms, to_end);
    }
    Verdict {
        allowed: true,
        remaining: params.limit - counted,
        retry_after_ms: 0,
        reset_after_ms: reset_after_ms(counted),
        store: (n > 0).then_some(State { last_us: now_us, count: counted }),
    }
}

#[cfg(test)]
mod tests {
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
    fn backwards_clock_counts_as_no_time() {
        let p = Params { limit: 4, window_us: SECOND };
        let s = decide(None, T0 + 1_250_000, &p, 3).store;
        assert_eq!(reply(&decide(s, T0 + 500_000, &p, 1)), (true, 0, 0, 750));
    }
}
