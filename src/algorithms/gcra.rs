//! GCRA, the generic cell rate algorithm, as redis-cell's `CL.THROTTLE`
//! (v0.5.0) runs it: `count_per_period` units per `period` seconds, with
//! bursts of up to `max_burst + 1` units.
//!
//! T = period / count_per_period     the emission interval, in whole ns
//!                                    (rounded down, as redis-cell does)
//! τ = (max_burst + 1) * T           the delay variation tolerance
//! tat                                the theoretical arrival time: when
//!                                    the limiter is fresh again
//!
//! At time `now`, with tat' = max(tat, now) (a missing key: now), `q`
//! units are admitted when tat' + q * T - now <= τ, and then
//! tat = tat' + q * T. Everything is integer nanoseconds, in `u128`: no
//! rounding ever accumulates, whatever the calls.
//!
//! The reply is redis-cell's, with its rounding: a duration d is reported
//! in whole seconds, plus one when its fraction holds at least one whole
//! millisecond (1.0009 s is 1, 1.001 s is 2); `remaining` is the whole
//! microseconds of tolerance left over the emission interval in whole
//! microseconds.

/// Nanoseconds per second.
pub const SECOND_NS: u64 = 1_000_000_000;

/// The shortest emission interval: one microsecond, 10^6 units per second.
/// redis-cell answers `remaining` in whole microseconds of it, so below
/// that it has no answer (it replies 9223372036854775807).
pub const MIN_EMISSION_NS: u64 = 1_000;

/// The largest tolerance, `(max_burst + 1) * T`: 10^9 s (31.7 years).
/// Every time stays far below 2^63 ns from now, where redis-cell's own
/// arithmetic would wrap.
pub const MAX_TOLERANCE_NS: u64 = 1_000_000_000 * SECOND_NS;

/// The latest server clock the math takes, so that a theoretical arrival
/// time always fits 64 bits (the year 2522); a later clock counts as it.
pub const MAX_NOW_NS: u64 = u64::MAX - MAX_TOLERANCE_NS;

/// The parameters of one call, already validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// T, in nanoseconds: from MIN_EMISSION_NS up.
    pub emission_ns: u64,
    /// `max_burst + 1`: the most units admitted at once; the reply's limit.
    pub limit: u64,
}

/// Which derived quantity is out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfRange {
    /// T below MIN_EMISSION_NS.
    EmissionInterval,
    /// τ above MAX_TOLERANCE_NS.
    Tolerance,
}

impl Params {
    /// `max_burst`, `count_per_period` (at least 1) and `period` (seconds).
    pub fn new(max_burst: u64, count_per_period: u64, period_s: u64) -> Result<Params, OutOfRange> {
        let period_ns = u128::from(period_s) * u128::from(SECOND_NS);
        let emission_ns = period_ns / u128::from(count_per_period.max(1));
        if emission_ns < u128::from(MIN_EMISSION_NS) {
            return Err(OutOfRange::EmissionInterval);
        }
        let limit = u128::from(max_burst) + 1;
        if emission_ns * limit > u128::from(MAX_TOLERANCE_NS) {
            return Err(OutOfRange::Tolerance);
        }
        // Both fit: T <= τ <= MAX_TOLERANCE_NS.
        Ok(Params { emission_ns: emission_ns as u64, limit: limit as u64 })
    }

    fn tolerance(&self) -> u128 {
        u128::from(self.emission_ns) * u128::from(self.limit)
    }
}

/// What is stored per key: 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// The theoretical arrival time, Unix nanoseconds.
    pub tat_ns: u64,
}

impl State {
    /// A state some call could have stored: a call stores a time at least
    /// one emission interval after the epoch.
    pub fn is_valid(&self) -> bool {
        self.tat_ns >= MIN_EMISSION_NS
    }

    /// When the key expires, Unix milliseconds: `tat` rounded up, from
    /// which on the limiter is fresh.
    pub fn expire_at_ms(&self) -> i64 {
        // At most u64::MAX / 10^6 + 1: fits.
        self.tat_ns.div_ceil(1_000_000) as i64
    }
}

/// The reply's fields, and what to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the call was refused (nothing taken).
    pub limited: bool,
    /// `max_burst + 1`.
    pub limit: u64,
    /// Units that could still be admitted right now.
    pub remaining: u64,
    /// Seconds until the same call would be admitted; -1 when admitted,
    /// and when it never can be (quantity above the limit).
    pub retry_after_s: i64,
    /// Seconds until the limiter is fresh.
    pub reset_after_s: u64,
    /// The state to write, or `None` to leave the key as it is.
    pub store: Option<State>,
}

/// A duration as redis-cell reports it: whole seconds, plus one when the
/// fraction holds at least a whole millisecond.
fn seconds(ns: u128) -> u64 {
    let second = u128::from(SECOND_NS);
    let whole = ns / second + u128::from(ns % second >= 1_000_000);
    // The tolerance keeps every duration reported below 2^64 s.
    u64::try_from(whole).unwrap_or(u64::MAX)
}

/// Admits `quantity` units at `now_ns` when the tolerance allows, and
/// takes them. `quantity == 0` only looks.
pub fn decide(stored: Option<State>, now_ns: u64, params: &Params, quantity: u64) -> Verdict {
    let now = now_ns.min(MAX_NOW_NS);
    let tat = stored.map_or(now, |s| s.tat_ns).max(now);
    let tolerance = params.tolerance();
    let increment = u128::from(params.emission_ns) * u128::from(quantity);
    // How far ahead of now the arrival time would be after this call.
    let ahead = u128::from(tat - now) + increment;
    let limited = ahead > tolerance;
    // Time until fresh, after this call.
    let ttl = if limited { u128::from(tat - now) } else { ahead };
    // Whole microseconds of tolerance left, over the emission interval in
    // whole microseconds (at least 1: MIN_EMISSION_NS).
    let left_us = tolerance.saturating_sub(ttl) / 1000;
    let remaining = left_us / u128::from(params.emission_ns / 1000);
    let retry_after_s = if !limited || increment > tolerance {
        -1
    } else {
        i64::try_from(seconds(ahead - tolerance)).unwrap_or(i64::MAX)
    };
    // Admitted: ahead <= tolerance, so tat + increment fits (MAX_NOW_NS).
    let store =
        (!limited && quantity > 0).then(|| State { tat_ns: (u128::from(tat) + increment) as u64 });
    Verdict {
        limited,
        limit: params.limit,
        remaining: u64::try_from(remaining).unwrap_or(u64::MAX),
        retry_after_s,
        reset_after_s: seconds(ttl),
        store,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_700_000_000 * SECOND_NS;
    const MS: u64 = 1_000_000;

    fn params(max_burst: u64, count: u64, period: u64) -> Params {
        Params::new(max_burst, count, period).unwrap()
    }

    /// `[limited, limit, remaining, retry_after_s, reset_after_s]`.
    fn reply(v: &Verdict) -> [i64; 5] {
        [
            v.limited as i64,
            v.limit as i64,
            v.remaining as i64,
            v.retry_after_s,
            v.reset_after_s as i64,
        ]
    }

    /// Runs calls `(offset from T0 in ms, quantity)` in order on one key.
    fn run(p: &Params, calls: &[(u64, u64)]) -> Vec<[i64; 5]> {
        let mut state = None;
        calls
            .iter()
            .map(|&(at_ms, q)| {
                let v = decide(state, T0 + at_ms * MS, p, q);
                state = v.store.or(state);
                reply(&v)
            })
            .collect()
    }

    /// redis-cell's own table (`it_rate_limits` in src/cell/mod.rs): burst
    /// 4, one per second, with its durations rounded as its command does.
    #[test]
    fn redis_cells_table() {
        let p = params(4, 1, 1);
        let replies = run(
            &p,
            &[
                (0, 6),
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (3000, 1),
                (3100, 1),
                (4000, 1),
                (8000, 1),
                (9500, 1),
                (9500, 0),
                (9500, 2),
                (9500, 5),
            ],
        );
        let expected = [
            [1, 5, 5, -1, 0],
            [0, 5, 4, -1, 1],
            [0, 5, 3, -1, 2],
            [0, 5, 2, -1, 3],
            [0, 5, 1, -1, 4],
            [0, 5, 0, -1, 5],
            [1, 5, 0, 1, 5],
            [0, 5, 2, -1, 3],
            [0, 5, 1, -1, 4], // reset 3.9 s
            [0, 5, 1, -1, 4],
            [0, 5, 4, -1, 1],
            [0, 5, 4, -1, 1],
            [0, 5, 4, -1, 1],
            [0, 5, 2, -1, 3],
            [1, 5, 2, 3, 3],
        ];
        assert_eq!(replies, expected);
    }

    #[test]
    fn fresh_key_takes_one_and_stores_its_arrival_time() {
        let p = params(15, 30, 60); // T = 2 s, τ = 32 s
        let v = decide(None, T0, &p, 1);
        assert_eq!(reply(&v), [0, 16, 15, -1, 2]);
        assert_eq!(v.store, Some(State { tat_ns: T0 + 2 * SECOND_NS }));
        assert_eq!(v.store.unwrap().expire_at_ms(), ((T0 + 2 * SECOND_NS) / MS) as i64);
    }

    #[test]
    fn quantity_zero_only_looks() {
        let p = params(5, 30, 60);
        let v = decide(None, T0, &p, 0);
        assert_eq!((reply(&v), v.store), ([0, 6, 6, -1, 0], None));
        let s = decide(None, T0, &p, 2).store;
        let v = decide(s, T0 + 500 * MS, &p, 0);
        assert_eq!((reply(&v), v.store), ([0, 6, 4, -1, 4], None));
    }

    #[test]
    fn above_the_burst_is_limited_for_ever() {
        let p = params(15, 30, 60);
        let s = decide(None, T0, &p, 2).store;
        // 4 s used of 32: 16 more would need 36 s.
        assert_eq!(reply(&decide(s, T0, &p, 16)), [1, 16, 14, 4, 4]);
        assert_eq!(reply(&decide(s, T0, &p, 17)), [1, 16, 14, -1, 4]);
        assert_eq!(reply(&decide(None, T0, &p, 17)), [1, 16, 16, -1, 0]);
        assert_eq!(decide(s, T0, &p, 17).store, None);
    }

    #[test]
    fn rounding_counts_whole_milliseconds_only() {
        let p = params(0, 1, 1); // one unit a second, no burst
        let s = decide(None, T0, &p, 1).store;
        let at = |ns: u64| reply(&decide(s, T0 + ns, &p, 1));
        // 1 s - 999_999 ns left: 0 s and 0.000001 s rounded.
        assert_eq!(at(999_999), [1, 1, 0, 1, 1]);
        assert_eq!(at(999_000_000), [1, 1, 0, 1, 1]);
        // 0.000999 s left: less than a whole millisecond, reported as 0.
        assert_eq!(at(999_000_001), [1, 1, 0, 0, 0]);
        assert_eq!(at(SECOND_NS), [0, 1, 0, -1, 1]);
    }

    #[test]
    fn emission_interval_is_rounded_down_to_a_nanosecond() {
        let p = params(2, 3, 1); // T = 333_333_333 ns
        assert_eq!(p.emission_ns, 333_333_333);
        let v = decide(None, T0, &p, 3);
        assert_eq!(v.store, Some(State { tat_ns: T0 + 999_999_999 }));
        assert_eq!(reply(&v), [0, 3, 0, -1, 1]);
        // Remaining: whole microseconds left over whole microseconds of T.
        let at = |ns: u64| decide(v.store, T0 + ns, &p, 0).remaining;
        assert_eq!(at(333_332_999), 0); // 333_332 us left of 333_333
        assert_eq!(at(333_333_000), 1);
    }

    #[test]
    fn tighter_parameters_on_a_stored_state() {
        let s = decide(None, T0, &params(9, 1, 1), 10).store; // 10 s ahead
        // Now a burst of 2 (τ = 3 s): even a look is limited, 7 s to wait.
        assert_eq!(reply(&decide(s, T0, &params(2, 1, 1), 0)), [1, 3, 0, 7, 10]);
        assert_eq!(reply(&decide(s, T0, &params(2, 1, 1), 1)), [1, 3, 0, 8, 10]);
    }

    #[test]
    fn ranges() {
        assert_eq!(Params::new(0, 1_000_000, 1), Ok(Params { emission_ns: 1000, limit: 1 }));
        assert_eq!(Params::new(0, 1_000_001, 1), Err(OutOfRange::EmissionInterval));
        assert_eq!(
            Params::new(999_999_999, 1, 1),
            Ok(Params { emission_ns: SECOND_NS, limit: 1_000_000_000 })
        );
        assert_eq!(Params::new(1_000_000_000, 1, 1), Err(OutOfRange::Tolerance));
        assert_eq!(Params::new(0, 1, 1_000_000_000).map(|p| p.limit), Ok(1));
        assert_eq!(Params::new(0, 1, 1_000_000_001), Err(OutOfRange::Tolerance));
        let largest =
            Params::new(crate::algorithms::MAX_UNITS - 1, crate::algorithms::MAX_UNITS, 1);
        assert_eq!(largest, Err(OutOfRange::EmissionInterval));
    }

    #[test]
    fn the_largest_tolerance_and_quantity_stay_exact() {
        let p = params(0, 1, 1_000_000_000);
        let v = decide(None, T0, &p, 1);
        assert_eq!(reply(&v), [0, 1, 0, -1, 1_000_000_000]);
        let q = crate::algorithms::MAX_UNITS;
        assert_eq!(reply(&decide(v.store, T0, &p, q)), [1, 1, 0, -1, 1_000_000_000]);
        // A clock past the representable range counts as its end.
        let late = decide(None, u64::MAX, &p, 1).store.unwrap();
        assert_eq!(late.tat_ns, u64::MAX);
    }

    proptest! {
        /// Waiting the reported seconds admits the same call; and no
        /// sequence admits more than the limit plus what the rate brings.
        #[test]
        fn retry_after_admits_and_rate_holds(
            burst in 0u64..20, count in 1u64..100, period in 1u64..100,
            calls in proptest::collection::vec((0u64..3_000_000_000, 0u64..25), 1..40),
        ) {
            let p = params(burst, count, period);
            let (mut state, mut now, mut admitted) = (None, T0, 0u128);
            for (gap, q) in calls {
                now += gap;
                let v = decide(state, now, &p, q);
                if v.limited {
                    prop_assert!(v.store.is_none());
                    if v.retry_after_s >= 0 {
                        let later = now + v.retry_after_s as u64 * SECOND_NS + MS;
                        prop_assert!(!decide(state, later, &p, q).limited);
                    } else {
                        prop_assert!(q > p.limit);
                    }
                } else {
                    admitted += u128::from(q);
                    state = v.store.or(state);
                    prop_assert!(v.retry_after_s == -1);
                }
                prop_assert!(v.remaining <= p.limit);
                if let Some(s) = state {
                    prop_assert!(s.is_valid());
                }
            }
            // Over [T0, now]: at most limit + elapsed / T units.
            let elapsed = u128::from(now - T0);
            prop_assert!(admitted <= u128::from(p.limit) + elapsed / u128::from(p.emission_ns));
        }
    }
}
