//! The limiters' math: pure functions of (stored state, time, parameters, n).
//! Nothing in here knows about Redis.
//!
//! Every number has a stated range (docs/commands.md), checked when a command
//! is parsed, inside which all of the arithmetic below is exact: no result
//! is ever saturated or wrapped into a different answer.

pub mod concurrency;
pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;
pub mod varint;

use crate::args::{duration_us, integer, micros};
use crate::error::Error;
use crate::limit::Parameters;

/// Fixed-point scale of the buckets: one unit (token) is 10^12 pico-units,
/// so a rate kept to 10^-6 units/s refills a whole number of pico-units
/// every microsecond.
pub const PICO_PER_UNIT: u128 = 1_000_000_000_000;

/// The most units a limit holds or a call takes: 2^53 - 1, exact in every
/// client language (a JavaScript number, a double).
pub const MAX_UNITS: u64 = (1 << 53) - 1;

/// The latest time a call may give: 9999-12-31T23:59:59.999999Z.
pub const MAX_TIME_US: u64 = 253_402_300_799_999_999;

/// The longest window, and the longest time a bucket takes to refill or
/// drain completely: 10^12 s (about 31,700 years). So every reply's
/// milliseconds, at most two windows, stay below 2^53.
pub const MAX_SPAN_US: u64 = 1_000_000_000_000_000_000;

/// The outcome of one call, in the reply's terms, plus what to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<S> {
    pub allowed: bool,
    /// Units that could still be admitted right now.
    pub remaining: u64,
    /// 0 when allowed, -1 when never, else milliseconds (rounded up).
    pub retry_after_ms: i64,
    /// Milliseconds (rounded up) until the limiter is fresh again; 0 when it
    /// is fresh, so a written state with 0 here is no state at all.
    pub reset_after_ms: u64,
    /// The change to write, or `None` to leave the key as it is.
    pub store: Option<S>,
}

impl<S> Verdict<S> {
    fn denied(remaining: u64, retry_after_ms: u64, reset_after_ms: u64) -> Self {
        let retry_after_ms = i64::try_from(retry_after_ms).unwrap_or(i64::MAX);
        Verdict { allowed: false, remaining, retry_after_ms, reset_after_ms, store: None }
    }

    fn never(remaining: u64, reset_after_ms: u64) -> Self {
        Verdict { retry_after_ms: -1, ..Self::denied(remaining, 0, reset_after_ms) }
    }

    /// An admitted call, or a refund: what is left after it.
    fn admitted(remaining: u64, reset_after_ms: u64, store: Option<S>) -> Self {
        Verdict { allowed: true, remaining, retry_after_ms: 0, reset_after_ms, store }
    }
}

/// `a / b` rounded up; the ranges keep every quotient taken here in `u64`.
fn ceil_div(a: u128, b: u128) -> u64 {
    u64::try_from(a.div_ceil(b)).unwrap_or(u64::MAX)
}

/// Milliseconds, rounded up, from `from_us` to `to_us`.
fn ms_between(from_us: u64, to_us: u64) -> u64 {
    ceil_div(u128::from(to_us.saturating_sub(from_us)), 1000)
}

/// The start of the window holding `time_us`: windows are aligned to the
/// Unix epoch, [k*window, (k+1)*window), so every node agrees on them.
fn window_start(time_us: u64, window_us: u64) -> u64 {
    time_us - time_us % window_us
}

/// The parameters of the buckets (token bucket, leaky bucket), already
/// validated: capacity in 1..=MAX_UNITS, rate in 1..=10^18 micro-units per
/// second, capacity / rate <= MAX_SPAN_US.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketParams {
    /// Most units the bucket holds.
    pub capacity: u64,
    /// Refill (or drain) in pico-units per microsecond (= micro-units per
    /// second).
    pub refill_per_us: u64,
}

/// The fastest rate, 10^12 units per second, in micro-units per second.
pub const MAX_RATE_MICROS: u64 = 1_000_000_000_000 * 1_000_000;

impl Parameters for BucketParams {
    /// `capacity rate`, each in its range.
    fn parse(capacity: &[u8], rate: &[u8]) -> Result<BucketParams, Error> {
        let capacity = size(capacity).ok_or(Error::Capacity)?;
        let refill_per_us =
            micros(rate).filter(|r| (1..=MAX_RATE_MICROS).contains(r)).ok_or(Error::Rate)?;
        // capacity / rate within MAX_SPAN_US: pico-units to fill, at most
        // what flows in that time (a product, not a division: every call).
        let flows = u128::from(MAX_SPAN_US) * u128::from(refill_per_us);
        if u128::from(capacity) * PICO_PER_UNIT > flows {
            return Err(Error::FillTime);
        }
        Ok(BucketParams { capacity, refill_per_us })
    }
}

impl BucketParams {
    /// A full bucket, in pico-units.
    fn full(&self) -> u128 {
        u128::from(self.capacity) * PICO_PER_UNIT
    }

    /// Milliseconds, rounded up, for `pico` pico-units to flow at the rate.
    fn ms_for(&self, pico: u128) -> u64 {
        ceil_div(pico, u128::from(self.refill_per_us) * 1000)
    }

    /// Pico-units that flow from `from_us` to `to_us`.
    fn flow(&self, from_us: u64, to_us: u64) -> u128 {
        u128::from(to_us - from_us) * u128::from(self.refill_per_us)
    }
}

/// The parameters of the windows (fixed window, sliding window, sliding
/// log), already validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowParams {
    /// Most units per window, 1..=MAX_UNITS.
    pub limit: u64,
    /// Window length in microseconds, 1000..=MAX_SPAN_US.
    pub window_us: u64,
}

impl Parameters for WindowParams {
    /// `limit window`, each in its range.
    fn parse(limit: &[u8], window: &[u8]) -> Result<WindowParams, Error> {
        let limit = size(limit).ok_or(Error::Limit)?;
        Ok(WindowParams { limit, window_us: duration_us(window).ok_or(Error::Window)? })
    }
}

/// A capacity or a limit: 1 to MAX_UNITS.
fn size(arg: &[u8]) -> Option<u64> {
    integer(arg).filter(|size| (1..=MAX_UNITS).contains(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_arguments() {
        let bucket = |capacity, refill_per_us| Ok(BucketParams { capacity, refill_per_us });
        let parse = |a: &[u8], b: &[u8]| BucketParams::parse(a, b);
        assert_eq!(parse(b"10", b"0.5"), bucket(10, 500_000));
        assert_eq!(parse(b"9007199254740991", b"10000"), bucket(MAX_UNITS, 10_000_000_000));
        assert_eq!(parse(b"1000000", b"0.000001"), bucket(1_000_000, 1));
        assert_eq!(parse(b"1", b"1000000000000"), bucket(1, MAX_RATE_MICROS));
        assert_eq!(parse(b"0", b"1"), Err(Error::Capacity));
        assert_eq!(parse(b"9007199254740992", b"1"), Err(Error::Capacity));
        assert_eq!(parse(b"1", b"0.0000004"), Err(Error::Rate));
        assert_eq!(parse(b"1", b"1000000000000.000001"), Err(Error::Rate));
        // Longer than 10^12 s to refill.
        assert_eq!(parse(b"1000001", b"0.000001"), Err(Error::FillTime));
        assert_eq!(parse(b"9007199254740991", b"9007.199254"), Err(Error::FillTime));
    }

    #[test]
    fn window_arguments() {
        let window = |limit, window_us| Ok(WindowParams { limit, window_us });
        let parse = |a: &[u8], b: &[u8]| WindowParams::parse(a, b);
        assert_eq!(parse(b"100", b"60"), window(100, 60_000_000));
        assert_eq!(parse(b"1", b"0.001"), window(1, 1000));
        assert_eq!(parse(b"1", b"1000000000000"), window(1, MAX_SPAN_US));
        assert_eq!(parse(b"0", b"1"), Err(Error::Limit));
        assert_eq!(parse(b"9007199254740992", b"1"), Err(Error::Limit));
        assert_eq!(parse(b"1", b"0.0009"), Err(Error::Window));
        assert_eq!(parse(b"1", b"1000000000000.000001"), Err(Error::Window));
    }
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

/// The unit tests' allocator: the system's, counting the bytes each thread
/// holds and their peak, so that a test can say how much memory a call
/// needs (threads run tests side by side; each counts its own).
#[cfg(test)]
pub(crate) mod test_alloc {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn add(bytes: isize) {
        let _ = LIVE.try_with(|live| {
            live.set(live.get() + bytes);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
        });
    }

    struct Counting;

    // SAFETY: every call goes to the system's allocator as it came.
    unsafe impl GlobalAlloc for Counting {
        /// # Safety
        /// As `GlobalAlloc::alloc`: a layout of non-zero size.
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            // SAFETY: the caller's layout, as it came.
            unsafe { System.alloc(layout) }
        }

        /// # Safety
        /// As `GlobalAlloc::dealloc`: `ptr` came from `alloc` with `layout`.
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            add(-(layout.size() as isize));
            // SAFETY: `ptr` came from `System.alloc` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    /// What `call` returns, and the most bytes it held at once beyond
    /// those held before it (what it returns included).
    pub fn peak_bytes<T>(call: impl FnOnce() -> T) -> (T, usize) {
        let before = LIVE.with(Cell::get);
        PEAK.with(|peak| peak.set(before));
        let result = call();
        (result, (PEAK.with(Cell::get) - before).max(0) as usize)
    }
}
