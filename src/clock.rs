//! The server's wall clock, for `now = *`.

/// Microseconds since the Unix epoch (CLOCK_REALTIME, the clock Redis's own
/// expiry uses); a clock before 1970 reads as 0.
pub fn now_us() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let seconds = u64::try_from(ts.tv_sec).unwrap_or(0);
    let micros = u64::try_from(ts.tv_nsec / 1000).unwrap_or(0);
    seconds.saturating_mul(1_000_000).saturating_add(micros)
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME), for RL.THROTTLE,
/// whose emission interval is kept to the nanosecond; before 1970 reads as 0.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let seconds = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
}
