//! Sliding log: exact. A unit admitted at time s counts while s > t - window;
//! admit when count + n <= limit.
//!
//! The log keeps admitted units as runs (time, count), oldest first, in one
//! byte vector of LEB128 varints: each run's time as the microseconds since
//! the run before (0 for the first, whose time is `first_us`), then its
//! count. A run of units a few milliseconds apart takes 3 to 4 bytes.

use std::borrow::Cow;
use std::ffi::CStr;

pub use super::WindowParams as Params;
use super::varint::{get_varint, put_varint};
use super::{MAX_TIME_US, MAX_UNITS, Verdict, ms_between};
use crate::error::Error;
use crate::limit::{Call, Change, Kind, Op, Outcome, stored};
use crate::state::Value;

#[derive(Debug, Clone, Default)]
pub struct Log {
    /// Time of the oldest run, Unix microseconds (0 when empty).
    pub first_us: u64,
    /// Time of the newest run, Unix microseconds (0 when empty).
    pub last_us: u64,
    /// Units in all runs, at most MAX_UNITS.
    pub total: u64,
    /// The runs, encoded as above, from byte `head`: the runs before it
    /// left the window, and are dropped in bulk (see `trim`). The run at
    /// `head` is the first; its time is `first_us`, whatever its delta.
    pub runs: Vec<u8>,
    head: usize,
}

/// Logs are equal when they hold the same runs.
impl PartialEq for Log {
    fn eq(&self, other: &Log) -> bool {
        let header = |log: &Log| (log.first_us, log.last_us, log.total);
        header(self) == header(other) && self.canonical_runs() == other.canonical_runs()
    }
}

impl Eq for Log {}

/// What an admitted call does to the log: drop the runs before
/// `cutoff_us` (they left the window), then add `count` units at `at_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Append {
    pub cutoff_us: u64,
    pub at_us: u64,
    pub count: u64,
}

/// What a refund does to the log: drop the runs before `cutoff_us`, then
/// the `count` newest units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal {
    pub cutoff_us: u64,
    pub count: u64,
}

/// The most bytes one run takes: two varints of a `u64`.
const RUN_BYTES: usize = 20;

/// A run as decoded: its time, its count, and where the next run starts.
struct Run {
    at_us: u64,
    count: u64,
    end: usize,
    count_start: usize,
}

impl Log {
    /// Builds a log from runs given oldest first; `None` unless the runs
    /// are what calls could have logged: counts of at least 1 adding up to
    /// at most MAX_UNITS, times that never go backwards, up to MAX_TIME_US.
    pub fn from_runs(runs: impl IntoIterator<Item = (u64, u64)>) -> Option<Log> {
        let mut log = Log::default();
        for (at_us, count) in runs {
            if !log.may_follow(at_us, count) {
                return None;
            }
            log.push(at_us, count);
        }
        Some(log)
    }

    /// Whether a run of `count` units at `at_us` may follow the log's runs
    /// in a log that calls could have made (see `from_runs`).
    fn may_follow(&self, at_us: u64, count: u64) -> bool {
        let fits = self.total.checked_add(count).is_some_and(|total| total <= MAX_UNITS);
        count > 0 && fits && at_us <= MAX_TIME_US && (self.total == 0 || at_us >= self.last_us)
    }

    /// Logs `runs` (oldest first) after the log's own when `from_runs`
    /// would take them all together; else changes nothing and says so.
    /// O(runs given), however long the log: how a long log is loaded back
    /// from an AOF, a bounded command at a time.
    pub fn extend(&mut self, runs: &[(u64, u64)]) -> bool {
        let mut after = Log { runs: Vec::new(), ..*self };
        for &(at_us, count) in runs {
            if !after.may_follow(at_us, count) {
                return false;
            }
            (after.last_us, after.total) = (at_us, after.total + count);
        }
        for &(at_us, count) in runs {
            self.push(at_us, count);
        }
        true
    }

    /// Decodes a stored log, refusing anything `from_runs` would not build
    /// (and every byte of `runs` must belong to a run). One pass over the
    /// bytes, then one copy of them: a load holds the log about twice.
    pub fn decode(first_us: u64, last_us: u64, total: u64, runs: &[u8]) -> Option<Log> {
        // The header of the log the runs make, built as `from_runs` would.
        let mut built = Log::default();
        let mut position = 0;
        while position < runs.len() {
            let delta = shortest_varint(runs, &mut position)?;
            let count = shortest_varint(runs, &mut position)?;
            let at_us =
                if built.total == 0 { first_us } else { built.last_us.checked_add(delta)? };
            // The first run's delta is 0; its time is the header's.
            if (built.total == 0 && delta != 0) || !built.may_follow(at_us, count) {
                return None;
            }
            if built.total == 0 {
                built.first_us = at_us;
            }
            (built.last_us, built.total) = (at_us, built.total + count);
        }
        let header = (built.first_us, built.last_us, built.total);
        (header == (first_us, last_us, total)).then(|| Log { runs: runs.to_vec(), ..built })
    }

    /// The runs as stored: from the first, its delta 0.
    pub fn canonical_runs(&self) -> Cow<'_, [u8]> {
        if self.head == 0 {
            return Cow::Borrowed(&self.runs);
        }
        Cow::Owned([&[0u8][..], self.after_first_delta()].concat())
    }

    /// The runs' bytes after the first run's delta (whose canonical form
    /// is one byte, 0): nothing for an empty log.
    pub fn after_first_delta(&self) -> &[u8] {
        let delta_len = self.runs.get(self.head..).and_then(get_varint).map_or(0, |(_, len)| len);
        &self.runs[(self.head + delta_len).min(self.runs.len())..]
    }

    /// The log of a header and canonical runs that `decode` took before:
    /// not checked again (a value's own compact bytes), with room for the
    /// next run.
    pub fn from_checked(first_us: u64, last_us: u64, total: u64, runs: &[u8]) -> Log {
        let mut bytes = Vec::with_capacity(runs.len() + RUN_BYTES);
        bytes.extend_from_slice(runs);
        Log { first_us, last_us, total, runs: bytes, head: 0 }
    }

    /// The runs, oldest first.
    pub fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut position = self.head;
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
        let at_us =
            if start == self.head { self.first_us } else { previous_us.checked_add(delta)? };
        Some(Run { at_us, count, end: count_start + count_len, count_start })
    }

    /// Bytes of memory the log holds, for MEMORY USAGE.
    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity()
    }

    fn push(&mut self, at_us: u64, count: u64) {
        let delta = if self.total == 0 { 0 } else { at_us - self.last_us };
        if self.total == 0 {
            self.first_us = at_us;
        }
        // Grow by a quarter at a time, not double: the log is most of a key.
        let needed = self.runs.len() + RUN_BYTES;
        if needed > self.runs.capacity() {
            let more = (self.runs.capacity() / 4).max(needed - self.runs.capacity());
            self.runs.reserve_exact(more);
        }
        put_varint(&mut self.runs, delta);
        put_varint(&mut self.runs, count);
        self.last_us = at_us;
        self.total += count;
    }

    /// Drops the runs before `cutoff_us`, and gives memory back when
    /// that leaves most of it unused. The runs that left stay in front of
    /// `head` until they take as many bytes as the runs still in the
    /// window, and are then dropped at once: a call moves the log's bytes
    /// only after calls have trimmed as many, so a trim costs O(runs
    /// trimmed) however long the log.
    fn trim(&mut self, cutoff_us: u64) {
        let (mut position, mut at_us) = (self.head, self.first_us);
        let mut first_live = None;
        while let Some(run) = self.run_at(position, at_us) {
            if run.at_us >= cutoff_us {
                first_live = Some((position, run));
                break;
            }
            self.total -= run.count;
            (position, at_us) = (run.end, run.at_us);
        }
        match first_live {
            Some((start, run)) => {
                (self.head, self.first_us) = (start, run.at_us);
                if self.head > 0 && self.head >= self.runs.len() - self.head {
                    // This run becomes the first: its delta is rewritten as 0.
                    self.runs.splice(..run.count_start, [0u8]);
                    self.head = 0;
                }
            }
            None => {
                self.runs.clear();
                (self.first_us, self.last_us, self.total, self.head) = (0, 0, 0, 0);
            }
        }
        // Room for one more run stays, so the next append does not grow it.
        let keep = self.runs.len() + RUN_BYTES;
        if self.runs.capacity() > 2 * keep {
            self.runs.shrink_to(keep);
        }
    }

    /// Units logged before `cutoff_us`: what a trim at `cutoff_us` drops.
    fn units_before(&self, cutoff_us: u64) -> u64 {
        self.runs().take_while(|&(at, _)| at < cutoff_us).map(|(_, count)| count).sum()
    }

    /// Whether an append that comes from outside (a replica's stream, an
    /// AOF) leaves a log that calls could have made: at least 1 unit, at
    /// most MAX_UNITS in all, no later than MAX_TIME_US, and not before the
    /// newest run that the trim keeps.
    pub fn takes(&self, append: &Append) -> bool {
        let kept = self.total - self.units_before(append.cutoff_us);
        let fits = kept.checked_add(append.count).is_some_and(|total| total <= MAX_UNITS);
        let in_order = kept == 0 || append.at_us >= self.last_us;
        append.count > 0 && fits && append.at_us <= MAX_TIME_US && in_order
    }

    /// An admitted call: drops what left the window, logs the new units.
    pub fn apply(&mut self, append: Append) {
        self.trim(append.cutoff_us);
        self.push(append.at_us, append.count);
    }

    /// A refund: drops what left the window, then the newest units.
    pub fn remove(&mut self, removal: Removal) {
        self.trim(removal.cutoff_us);
        let mut keep = self.total.saturating_sub(removal.count);
        let runs: Vec<(u64, u64)> = self
            .runs()
            .map_while(|(at_us, count)| {
                let kept = count.min(keep);
                keep -= kept;
                (kept > 0).then_some((at_us, kept))
            })
            .collect();
        // A prefix of valid runs is valid: rebuilt, with memory to match.
        *self = Log::from_runs(runs).unwrap_or_default();
    }
}

/// The varint at `position`, moving past it, when it is in the one form
/// `put_varint` writes (no high groups of zeros).
fn shortest_varint(bytes: &[u8], position: &mut usize) -> Option<u64> {
    let (value, len) = get_varint(bytes.get(*position..)?)?;
    let shortest = len == 1 || bytes[*position + len - 1] != 0;
    *position += len;
    shortest.then_some(value)
}

/// A missing key: a log with nothing in it.
pub const EMPTY: &Log = &Log { first_us: 0, last_us: 0, total: 0, runs: Vec::new(), head: 0 };

/// The log at `now_us` (never before its newest run): the window's
/// cutoff, the earliest time still in it, and the units still in it.
/// A unit at s counts while s > now - window, that is s >= now + 1 - window;
/// before the first window has passed (now < window) nothing has left,
/// a unit at time 0 included.
fn live(log: &Log, now_us: u64, params: &Params) -> (u64, u64, u64) {
    let now_us = now_us.max(log.last_us);
    let cutoff_us = (now_us + 1).saturating_sub(params.window_us);
    (now_us, cutoff_us, log.total - log.units_before(cutoff_us))
}

/// Milliseconds until the unit logged at `at_us` leaves the window.
fn leaves_at(now_us: u64, at_us: u64, params: &Params) -> u64 {
    ms_between(now_us, at_us + params.window_us)
}

/// The time of the unit that leaves the window `k`-th (from 1), counting
/// only units at or after `cutoff_us`.
fn kth_live(log: &Log, cutoff_us: u64, k: u64) -> Option<u64> {
    let mut seen = 0;
    log.runs().filter(|&(at, _)| at >= cutoff_us).find_map(|(at, count)| {
        seen += count;
        (seen >= k).then_some(at)
    })
}

/// Admits `n` units at `now_us` when the units still in the window leave
/// room. A `now_us` before the newest run counts as no time passed; `n == 0`
/// only looks.
pub fn decide(log: Option<&Log>, now_us: u64, params: &Params, n: u64) -> Verdict<Append> {
    let log = log.unwrap_or(EMPTY);
    let (now_us, cutoff_us, count) = live(log, now_us, params);
    let limit = params.limit;
    let reset_after_ms = if count == 0 { 0 } else { leaves_at(now_us, log.last_us, params) };
    let remaining = limit.saturating_sub(count);

    if n > limit {
        return Verdict::never(remaining, reset_after_ms);
    }
    if count + n > limit {
        // Wait for the oldest units to leave until n fit.
        let must_leave = count + n - limit;
        let retry = kth_live(log, cutoff_us, must_leave)
            .map_or(reset_after_ms, |at| leaves_at(now_us, at, params));
        return Verdict::denied(remaining, retry, reset_after_ms);
    }
    let reset_after_ms = if n > 0 { leaves_at(now_us, now_us, params) } else { reset_after_ms };
    let store = (n > 0).then_some(Append { cutoff_us, at_us: now_us, count: n });
    Verdict::admitted(remaining - n, reset_after_ms, store)
}

/// Takes back the `n` newest units still in the window.
pub fn refund(log: Option<&Log>, now_us: u64, params: &Params, n: u64) -> Verdict<Removal> {
    let Some(log) = log else {
        return Verdict::admitted(params.limit, 0, None);
    };
    let (now_us, cutoff_us, count) = live(log, now_us, params);
    let left = count.saturating_sub(n);
    // The newest unit left is the `left`-th oldest one.
    let reset_after_ms = kth_live(log, cutoff_us, left)
        .filter(|_| left > 0)
        .map_or(0, |at| leaves_at(now_us, at, params));
    let store = (n > 0).then_some(Removal { cutoff_us, count: n });
    Verdict::admitted(params.limit.saturating_sub(left), reset_after_ms, store)
}

/// `RL.SLIDINGLOG key limit window now [n]`, and `SLIDINGLOG` in a limit
/// spec.
pub struct SlidingLog;

impl Kind for SlidingLog {
    const NAME: &'static CStr = c"SLIDINGLOG";
    type Params = Params;

    fn run(params: &Params, call: Call, value: Option<Value>) -> Result<Outcome, Error> {
        let log = stored(value, |v| if let Value::Log(log) = v { Some(log) } else { None })?;
        let (log, now_us, n) = (log.as_deref(), call.now_us, call.n);
        Ok(match call.op {
            Op::Take => Outcome::of(decide(log, now_us, params, n), params.limit, Change::Append),
            Op::Refund => Outcome::of(refund(log, now_us, params, n), params.limit, Change::Remove),
        })
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

    #[test]
    fn the_largest_limit_is_exact() {
        let p = Params { limit: MAX_UNITS, window_us: SECOND };
        let mut log = None;
        assert_eq!(run(&mut log, T0, &p, MAX_UNITS), (true, 0, 0, 1000));
        assert_eq!(run(&mut log, T0 + 1000, &p, 1), (false, 0, 999, 999));
        assert_eq!(run(&mut log, T0 + 500_000, &p, 1), (false, 0, 500, 500));
        assert_eq!(run(&mut log, T0 + SECOND, &p, MAX_UNITS), (true, 0, 0, 1000));
        assert_eq!(log.unwrap().runs().collect::<Vec<_>>(), [(T0 + SECOND, MAX_UNITS)]);
    }

    #[test]
    fn refund_removes_the_newest_units() {
        let p = Params { limit: 5, window_us: SECOND };
        let mut log = None;
        run(&mut log, T0, &p, 2);
        run(&mut log, T0 + 100_000, &p, 2);
        let mut log = log.unwrap();
        let v = refund(Some(&log), T0 + 200_000, &p, 3);
        // One unit of T0 is left: it leaves at T0 + 1 s.
        assert_eq!(reply(&v), (true, 4, 0, 800));
        log.remove(v.store.unwrap());
        assert_eq!(log.runs().collect::<Vec<_>>(), [(T0, 1)]);
        assert_eq!((log.first_us, log.last_us, log.total), (T0, T0, 1));
        // More than is left: empty, fresh.
        let v = refund(Some(&log), T0 + 200_000, &p, 9);
        assert_eq!(reply(&v), (true, 5, 0, 0));
        log.remove(v.store.unwrap());
        assert_eq!(log, Log::default());
        assert_eq!(reply(&refund(None, T0, &p, 1)), (true, 5, 0, 0));
    }

    #[test]
    fn a_trimmed_log_gives_its_memory_back() {
        let p = Params { limit: 100_000, window_us: SECOND };
        let mut log = None;
        for i in 0..100_000 {
            run(&mut log, T0 + i * 5, &p, 1);
        }
        assert!(log.as_ref().unwrap().heap_bytes() > 100_000);
        run(&mut log, T0 + 5 * SECOND, &p, 1);
        let mut fresh = None;
        run(&mut fresh, T0 + 5 * SECOND, &p, 1);
        assert_eq!(log.unwrap().heap_bytes(), fresh.unwrap().heap_bytes());
    }

    #[test]
    fn decode_takes_only_what_calls_could_log() {
        let log = Log::from_runs([(T0, 2), (T0 + 5, 1)]).unwrap();
        let header = (log.first_us, log.last_us, log.total);
        let decode = |(first, last, total): (u64, u64, u64), runs: &[u8]| {
            Log::decode(first, last, total, runs)
        };
        assert_eq!(decode(header, &log.runs), Some(log.clone()));
        assert_eq!(decode((0, 0, 0), &[]), Some(Log::default()));
        for (header, runs) in [
            ((T0, T0 + 5, 4), &log.runs[..]),           // total does not add up
            ((T0, T0 + 6, 3), &log.runs[..]),           // last does not match
            ((T0 - 1, T0 + 5, 3), &log.runs[..]),       // first does not match
            ((T0, T0 + 5, 3), &[0, 2, 5, 1, 0][..]),    // a trailing byte
            ((T0, T0 + 5, 3), &[0, 2, 5][..]),          // cut short
            ((T0, T0 + 5, 3), &[0, 2, 5, 0x80][..]),    // a malformed varint
            ((T0, T0, 2), &[0, 2, 0, 0][..]),           // a count of 0
            ((T0, T0 + 5, 3), &[1, 2, 4, 1][..]),       // the first delta is not 0
            ((T0, T0 + 5, 3), &[0x80, 0, 2, 5, 1][..]), // a varint not in its shortest form
            ((0, 0, MAX_UNITS + 1), &[0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10][..]),
        ] {
            assert_eq!(decode(header, runs), None, "{header:?} {runs:?}");
        }
        let too_late = Log::from_runs([(MAX_TIME_US + 1, 1)]);
        assert_eq!(too_late, None);
        assert_eq!(Log::from_runs([(T0, MAX_UNITS), (T0, 1)]), None);
        assert_eq!(Log::from_runs([(T0, 1), (T0 - 1, 1)]), None);
    }

    /// Loading a log holds it about twice (the bytes Redis read, and the
    /// log's own copy), not once per run in a list as well.
    #[test]
    fn decoding_holds_only_the_copy_it_returns() {
        use super::super::test_alloc::peak_bytes;
        let log = Log::from_runs((0..1_000_000).map(|i| (T0 + i * 3, 1 + i % 2))).unwrap();
        let runs = &log.runs[..];
        let (decoded, peak) =
            peak_bytes(|| Log::decode(log.first_us, log.last_us, log.total, runs));
        assert_eq!(decoded.as_ref(), Some(&log));
        assert!(peak <= runs.len(), "{peak} bytes to decode {} bytes", runs.len());
    }

    /// A call that trims a run or two off a long log does not move the
    /// rest: the runs that left are dropped together once they take as many
    /// bytes as the runs still in the window, so the log's bytes move about
    /// once for every byte trimmed, and it never holds more than twice them.
    #[test]
    fn trimming_moves_the_log_only_once_as_many_bytes_left() {
        // Calls 1 s and a few ms apart, so that no two stretches of bytes
        // match; a unit leaves a thousand calls later.
        let p = Params { limit: MAX_UNITS, window_us: 999_500_000 };
        let at = |i: u64| T0 + i * SECOND + i % 7 * 1000;
        let mut log = Some(Log::from_runs((0..1000).map(|i| (at(i), 1))).unwrap());
        let front = |log: &Option<Log>| log.as_ref().unwrap().runs[..8].to_vec();
        let (mut moves, mut before) = (0, front(&log));
        for i in 1000..4000 {
            // Each call lets the oldest run leave and logs one.
            assert!(run(&mut log, at(i), &p, 1).0);
            let stored = log.as_ref().unwrap();
            assert_eq!(stored.total, 1000);
            let live = stored.canonical_runs().len();
            assert!(stored.runs.len() <= 2 * live + 8, "{} bytes for {live}", stored.runs.len());
            // The bytes in front move only when the log does.
            moves += usize::from(front(&log) != before);
            before = front(&log);
        }
        // Every call trimmed a run; about one in a thousand moved the log.
        assert!((2..=4).contains(&moves), "{moves} moves in 3000 calls");
    }

    #[test]
    fn takes_nothing_past_the_ranges() {
        let full = Log::from_runs([(T0, MAX_UNITS - 1)]).unwrap();
        let append = |cutoff_us, at_us, count| Append { cutoff_us, at_us, count };
        assert!(full.takes(&append(0, T0, 1)));
        assert!(!full.takes(&append(0, T0, 2)));
        // Once the full run leaves, the whole range is free again.
        assert!(full.takes(&append(T0 + 1, T0 + 1, MAX_UNITS)));
        assert!(!full.takes(&append(T0 + 1, T0 + 1, MAX_UNITS + 1)));
        assert!(!full.takes(&append(0, T0 - 1, 1)));
        assert!(!full.takes(&append(0, T0, 0)));
        assert!(EMPTY.takes(&append(0, MAX_TIME_US, 1)));
        assert!(!EMPTY.takes(&append(0, MAX_TIME_US + 1, 1)));
    }

    proptest! {
        /// An append from outside is taken exactly when the log it leaves
        /// (the runs the trim keeps, then the new one) is one `from_runs`
        /// builds; the log then is that one, byte for byte.
        #[test]
        fn takes_exactly_the_appends_that_leave_a_loggable_log(
            gaps in proptest::collection::vec((0u64..1000, 1u64..5), 0..20),
            cutoff in 0u64..25_000, at in 0u64..25_000, count in 0u64..5,
        ) {
            let mut time = T0;
            let runs: Vec<(u64, u64)> =
                gaps.iter().map(|&(gap, count)| { time += gap; (time, count) }).collect();
            let mut log = Log::from_runs(runs.clone()).unwrap();
            let append = Append { cutoff_us: T0 + cutoff, at_us: T0 + at, count };
            let kept = runs.iter().copied().filter(|&(at, _)| at >= append.cutoff_us);
            let expected = Log::from_runs(kept.chain([(append.at_us, count)]));
            prop_assert_eq!(log.takes(&append), expected.is_some());
            if let Some(expected) = expected {
                log.apply(append);
                let decoded = Log::decode(log.first_us, log.last_us, log.total, &log.canonical_runs());
                prop_assert_eq!(decoded.as_ref(), Some(&expected));
            }
        }

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
