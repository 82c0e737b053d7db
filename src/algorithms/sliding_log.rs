//! Sliding log: exact. A unit admitted at time s counts while s > t - window;
//! admit when count + n <= limit.
//!
//! The log keeps admitted units as runs (time, count), oldest first, in one
//! byte vector of LEB128 varints: each run's time as the microseconds since
//! the run before (0 for the first, whose time is `first_us`), then its
//! count. A run of units a few milliseconds apart takes 3 to 4 bytes.

use super::Verdict;
use super::fixed_window::{Params, ms_between};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Log {
    /// Time of the oldest run, Unix microseconds (0 when empty).
    pub first_us: u64,
    /// Time of the newest run, Unix microseconds (0 when empty).
    pub last_us: u64,
    /// Units in all runs.
    pub total: u64,
    /// The runs, encoded as above.
    pub runs: Vec<u8>,
}

/// What an admitted call does to the log: drop the runs at or before
/// `cutoff_us` (they left the window), then add `count` units at `at_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Append {
    pub cutoff_us: u64,
    pub at_us: u64,
    pub count: u64,
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The varint at the start of `bytes` and its length; `None` if cut short.
fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f).checked_shl(7 * i as u32)?;
        if byte < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

/// A run as decoded: its time, its count, and where the next run starts.
struct Run {
    at_us: u64,
    count: u64,
    end: usize,
    count_start: usize,
}

impl Log {
    /// Builds a log from runs given oldest first; `None` when times go
    /// backwards or a count is 0.
    pub fn from_runs(runs: impl IntoIterator<Item = (u64, u64)>) -> Option<Log> {
        let mut log = Log::default();
        for (at_us, count) in runs {
            if count == 0 || (log.total > 0 && at_us < log.last_us) {
                return None;
            }
            log.push(at_us, count);
        }
        Some(log)
    }

    /// The runs, oldest first. Stops at the first malformed byte, so a
    /// corrupt log reads as a shorter one instead of failing.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut position = 0;
        let mut at_us = self.first_us;
        std::iter::from_fn(move || {
            let run = self.run_at(position, at_us)?;
            position = run.end;
            at_us = run.at_us;
            Some((run.at_us, run.count))
        })
    }

    fn run_at(&self, start: usize, previous_us: u64) -> Option<Run> {
        let (delta, delta_len) = get_varint(self.runs.get(start..)?)?;
        let count_start = start + delta_len;
        let (count, count_len) = get_varint(self.runs.get(count_start..)?)?;
        let at_us = previous_us.checked_add(delta)?;
        Some(Run { at_us, count, end: count_start + count_len, count_start })
    }

    /// Bytes of memory the log holds, for MEMORY USAGE.
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity()
    }

    fn push(&mut self, at_us: u64, count: u64) {
        let delta = if self.total == 0 { 0 } else { at_us.saturating_sub(self.last_us) };
        if self.total == 0 {
            self.first_us = at_us;
        }
        // Grow by a quarter at a time, not double: the log is most of a key.
        let needed = self.runs.len() + 20;
        if needed > self.runs.capacity() {
            let more = (self.runs.capacity() / 4).max(needed - self.runs.capacity());
            self.runs.reserve_exact(more);
        }
        put_varint(&mut self.runs, delta);
        put_varint(&mut self.runs, count);
        self.last_us = at_us;
        self.total = self.total.saturating_add(count);
    }

    /// Drops the runs at or before `cutoff_us`, then adds the new units.
    pub fn apply(&mut self, append: Append) {
        let (mut position, mut at_us) = (0, self.first_us);
        let mut first_live = None;
        while let Some(run) = self.run_at(position, at_us) {
            if run.at_us > append.cutoff_us {
                first_live = Some(run);
                break;
            }
            self.total = self.total.saturating_sub(run.count);
            (position, at_us) = (run.end, run.at_us);
        }
        match first_live {
            Some(run) => {
                // This run becomes the first: its delta is rewritten as 0.
                self.runs.splice(..run.count_start, [0u8]);
                self.first_us = run.at_us;
            }
            None => {
                self.runs.clear();
                (self.first_us, self.last_us, self.total) = (0, 0, 0);
            }
        }
        self.push(append.at_us, append.count);
    }
}

/// Admits `n` units at `now_us` when the units still in the window leave
/// room. A `now_us` before the newest run counts as no time passed; `n == 0`
/// only looks.
pub fn decide(log: Option<&Log>, now_us: u64, params: &Params, n: u64) -> Verdict<Append> {
    let empty = Log::default();
    let log = log.unwrap_or(&empty);
    let now_us = now_us.max(log.last_us);
    let cutoff_us = now_us.saturating_sub(params.window_us);
    let gone: u64 = log.runs().take_while(|&(at, _)| at <= cutoff_us).map(|(_, c)| c).sum();
    let count = log.total.saturating_sub(gone);
    let limit = params.limit;
    let leaves_at = |at_us: u64| ms_between(now_us, at_us.saturating_add(params.window_us));
    let reset_after_ms = if count == 0 { 0 } else { leaves_at(log.last_us) };

    if n > limit {
        return Verdict::denied(limit.saturating_sub(count), -1, reset_after_ms);
    }
    if count.saturating_add(n) > limit {
        // Wait for the oldest units to leave until n fit.
        let must_leave = count + n - limit;
        let mut left = 0;
        let retry = log
            .runs()
            .filter(|&(at, _)| at > cutoff_us)
            .find(|&(_, c)| {
                left += c;
                left >= must_leave
            })
            .map_or(reset_after_ms, |(at, _)| leaves_at(at));
        let retry_after_ms = i64::try_from(retry).unwrap_or(i64::MAX);
        return Verdict::denied(limit - count.min(limit), retry_after_ms, reset_after_ms);
    }
    Verdict {
        allowed: true,
        remaining: limit - count - n,
        retry_after_ms: 0,
        reset_after_ms: if n > 0 { leaves_at(now_us) } else { reset_after_ms },
        store: (n > 0).then_some(Append { cutoff_us, at_us: now_us, count: n }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use proptest::prelude::*;

    fn run(log: &mut Option<Log>, now_us: u64, p: &Params, n: u64) -> (bool, u64, i64, u64) {
        let v = decide(log.as_ref(), now_us, p, n);
        if let Some(append) = v.store {
            log.get_or_insert_with(Log::default).apply(append);
        }
        reply(&v)
    }

    #[test]
    fn counts_exactly_the_last_window() {
        let p = Params { limit: 3, window_us: 10 * SECOND };
        let mut log = None;
        assert_eq!(run(&mut log, T0, &p, 1), (true, 2, 0, 10_000));
        assert_eq!(run(&mut log, T0 + 4 * SECOND, &p, 2), (true, 0, 0, 10_000));
        // Full until the unit of T0 leaves at T0 + 10 s.
        assert_eq!(run(&mut log, T0 + 9 * SECOND, &p, 1), (false, 0, 1000, 5000));
        assert_eq!(run(&mut log, T0 + 10 * SECOND, &p, 1), (true, 0, 0, 10_000));
        // The run of T0 was trimmed.
        let log = log.unwrap();
        assert_eq!(log.runs().collect::<Vec<_>>(), [(T0 + 4 * SECOND, 2), (T0 + 10 * SECOND, 1)]);
        assert_eq!((log.first_us, log.total), (T0 + 4 * SECOND, 3));
    }

    #[test]
    fn retry_waits_for_enough_units_to_leave() {
        let p = Params { limit: 4, window_us: SECOND };
        let mut log = None;
        run(&mut log, T0, &p, 1);
        run(&mut log, T0 + 100_000, &p, 2);
        run(&mut log, T0 + 200_000, &p, 1);
        // 3 more need 3 to leave: the run at T0 + 100 ms leaves at T0 + 1.1 s.
        assert_eq!(run(&mut log, T0 + 300_000, &p, 3), (false, 0, 800, 900));
    }

    #[test]
    fn no_burst_across_a_window_edge() {
        let p = Params { limit: 5, window_us: SECOND };
        let mut log = None;
        assert!(run(&mut log, T0 + 999_000, &p, 5).0);
        assert!(!run(&mut log, T0 + 1_001_000, &p, 1).0);
    }

    #[test]
    fn peek_and_too_many() {
        let p = Params { limit: 2, window_us: SECOND };
        assert_eq!(reply(&decide(None, T0, &p, 0)), (true, 2, 0, 0));
        assert_eq!(reply(&decide(None, T0, &p, 3)), (false, 2, -1, 0));
    }

    #[test]
    fn varints_round_trip() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = Vec::new();
            put_varint(&mut bytes, value);
            assert_eq!(get_varint(&bytes), Some((value, bytes.len())));
        }
        assert_eq!(get_varint(&[0x80]), None);
    }

    #[test]
    fn a_thousand_units_take_under_eight_bytes_each() {
        let p = Params { limit: 1000, window_us: 60 * SECOND };
        let mut log = None;
        for i in 0..1000 {
            assert!(run(&mut log, T0 + i * 59_000, &p, 1).0);
        }
        let log = log.unwrap();
        let bytes = std::mem::size_of::<Log>() + log.heap_bytes();
        assert!(bytes <= 8000, "{bytes} bytes for 1000 units");
    }

    proptest! {
        /// The log agrees with a plain list of unit times, and its retry
        /// and reset are exact.
        #[test]
        fn matches_a_list_of_times(
            limit in 1u64..20, window_ms in 1u64..5000,
            calls in proptest::collection::vec((0u64..3_000_000, 0u64..6), 1..60),
        ) {
            let p = Params { limit, window_us: window_ms * 1000 };
            let (mut log, mut times, mut now) = (None, Vec::<u64>::new(), T0);
            for (gap, n) in calls {
                now += gap;
                let live = times.iter().filter(|&&s| s + p.window_us > now).count() as u64;
                let before = log.clone();
                let got = run(&mut log, now, &p, n);
                prop_assert_eq!(got.0, n <= limit && live + n <= limit);
                if got.0 {
                    times.extend(std::iter::repeat_n(now, n as usize));
                } else if got.2 > 0 {
                    let later = now + got.2 as u64 * 1000;
                    prop_assert!(decide(before.as_ref(), later, &p, n).allowed);
                    prop_assert!(!decide(before.as_ref(), later - 1000, &p, n).allowed);
                }
                let fresh = decide(log.as_ref(), now + got.3 * 1000, &p, 0);
                prop_assert_eq!(fresh.remaining, limit);
            }
        }
    }
}
