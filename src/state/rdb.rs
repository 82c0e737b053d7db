//! The RDB record of a value: its kind number, its integers, and a log's
//! runs or the leases as one string. The kinds are numbered here on their
//! own, never renumbered, so that the layouts in memory can change without
//! touching stored data. Files and DUMPs of every encoding version load.

use std::borrow::Cow;

use crate::algorithms::concurrency::Leases;
use crate::algorithms::sliding_log::Log;

use super::value::{Fixed, Owned, Value};

/// RDB encoding version. 1 held only token buckets; 2 added the other
/// algorithms; 3 the wide buckets and RL.THROTTLE's state; 4 adds the
/// concurrency limits' leases (a loader of 3 refuses the version).
pub const ENCODING_VERSION: i32 = 4;

/// The kind numbers of the RDB encoding: stored in files, never renumbered.
pub mod kind {
    pub const THROTTLE: u64 = 0;
    pub const TOKEN_BUCKET: u64 = 1;
    pub const LEAKY_BUCKET: u64 = 2;
    pub const FIXED_WINDOW: u64 = 3;
    pub const SLIDING_WINDOW: u64 = 4;
    pub const SLIDING_LOG: u64 = 5;
    /// Buckets of more than 18,446,744 units (pico-units past 64 bits).
    pub const WIDE_TOKEN_BUCKET: u64 = 6;
    pub const WIDE_LEAKY_BUCKET: u64 = 7;
    pub const CONCURRENCY: u64 = 8;
}

/// A value as RDB holds it: its kind, its integers, and the bytes of a
/// log's runs or of leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub kind: u64,
    pub fields: Vec<u64>,
    pub runs: Option<Cow<'a, [u8]>>,
}

/// How many integers follow a kind in RDB, and whether runs follow them.
pub fn layout(encver: i32, kind: u64) -> Option<(usize, bool)> {
    use kind::*;
    // Redis hands over a newer encoding too (a RESTORE from a newer module).
    if !(1..=ENCODING_VERSION).contains(&encver) {
        return None;
    }
    match kind {
        TOKEN_BUCKET => Some((2, false)),
        LEAKY_BUCKET | FIXED_WINDOW if encver >= 2 => Some((2, false)),
        SLIDING_WINDOW if encver >= 2 => Some((3, false)),
        SLIDING_LOG if encver >= 2 => Some((3, true)),
        WIDE_TOKEN_BUCKET | WIDE_LEAKY_BUCKET if encver >= 3 => Some((3, false)),
        THROTTLE if encver >= 3 => Some((1, false)),
        CONCURRENCY if encver >= 4 => Some((3, true)),
        _ => None,
    }
}

/// A bucket's record: narrow (`amount last_us`) when its pico-units fit
/// 64 bits, else wide (`high low last_us`).
fn bucket(narrow: u64, wide: u64, amount: u128, last_us: u64) -> (u64, Vec<u64>) {
    match u64::try_from(amount) {
        Ok(amount) => (narrow, vec![amount, last_us]),
        Err(_) => (wide, vec![(amount >> 64) as u64, amount as u64, last_us]),
    }
}

pub fn encode<'a>(value: &'a Value) -> Record<'a> {
    let (kind, fields) = match value {
        Value::Fixed(Fixed::TokenBucket(s)) => {
            bucket(kind::TOKEN_BUCKET, kind::WIDE_TOKEN_BUCKET, s.tokens, s.last_us)
        }
        Value::Fixed(Fixed::LeakyBucket(s)) => {
            bucket(kind::LEAKY_BUCKET, kind::WIDE_LEAKY_BUCKET, s.level, s.last_us)
        }
        Value::Fixed(Fixed::FixedWindow(s)) => (kind::FIXED_WINDOW, vec![s.last_us, s.count]),
        Value::Fixed(Fixed::SlidingWindow(s)) => {
            (kind::SLIDING_WINDOW, vec![s.last_us, s.previous, s.current])
        }
        Value::Fixed(Fixed::Throttle(s)) => (kind::THROTTLE, vec![s.tat_ns]),
        Value::Log(log) => {
            let fields = vec![log.first_us, log.last_us, log.total];
            let runs = Some(log.canonical_runs());
            return Record { kind: kind::SLIDING_LOG, fields, runs };
        }
        Value::Leases(leases) => {
            let fields = vec![leases.last_us, leases.next_id, leases.held.len() as u64];
            let runs = Some(Cow::Owned(leases.encode()));
            return Record { kind: kind::CONCURRENCY, fields, runs };
        }
    };
    Record { kind, fields, runs: None }
}

/// The state a record holds, when it is exactly what `encode` writes for
/// a state some call could have stored; else `None`.
pub fn decode(encver: i32, record: &Record) -> Option<Owned> {
    use kind::*;
    let (count, has_runs) = layout(encver, record.kind)?;
    if record.fields.len() != count || record.runs.is_some() != has_runs {
        return None;
    }
    let f = &record.fields;
    let joined = |high: u64, low: u64| (u128::from(high) << 64) | u128::from(low);
    let fields: Vec<u128> = match record.kind {
        SLIDING_LOG => {
            let log = Log::decode(f[0], f[1], f[2], record.runs.as_deref()?)?;
            return Some(Owned::Log(log));
        }
        CONCURRENCY => {
            let leases = Leases::decode(f[0], f[1], f[2], record.runs.as_deref()?)?;
            return Some(Owned::Leases(leases));
        }
        WIDE_TOKEN_BUCKET | WIDE_LEAKY_BUCKET => vec![joined(f[0], f[1]), f[2].into()],
        _ => f.iter().map(|&field| field.into()).collect(),
    };
    let name = match record.kind {
        TOKEN_BUCKET | WIDE_TOKEN_BUCKET => c"TOKENBUCKET",
        LEAKY_BUCKET | WIDE_LEAKY_BUCKET => c"LEAKYBUCKET",
        FIXED_WINDOW => c"FIXEDWINDOW",
        SLIDING_WINDOW => c"SLIDINGWINDOW",
        _ => c"THROTTLE",
    };
    let owned = Owned::Fixed(Fixed::from_fields(name.to_bytes(), &fields)?);
    // One encoding per state: a bucket is wide only when it must be.
    (encode(&owned.view()).kind == record.kind).then_some(owned)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::kind::*;
    use super::*;
    use crate::algorithms::{MAX_TIME_US, MAX_UNITS, PICO_PER_UNIT};
    use crate::algorithms::{fixed_window, gcra, leaky_bucket, sliding_window, token_bucket};

    const MAX_PICO: u128 = MAX_UNITS as u128 * PICO_PER_UNIT;

    /// `encode`'s record, owning its bytes.
    fn encoded(value: Value) -> Record<'static> {
        let record = encode(&value);
        Record { runs: record.runs.map(|runs| Cow::Owned(runs.into_owned())), ..record }
    }

    fn round_trip(owned: &Owned) -> Option<Owned> {
        decode(ENCODING_VERSION, &encoded(owned.view()))
    }

    /// The invariants a stored state keeps, said independently of the
    /// `is_valid` methods: what the commands can produce.
    fn producible(kind: u64, fields: &[u64]) -> bool {
        let time = |t: u64| t <= MAX_TIME_US;
        let units = |n: u64| n <= MAX_UNITS;
        let wide = |f: &[u64]| (u128::from(f[0]) << 64) | u128::from(f[1]);
        match (kind, fields) {
            (TOKEN_BUCKET, &[_, last]) => time(last) && u128::from(fields[0]) <= MAX_PICO,
            (LEAKY_BUCKET, &[level, last]) => level > 0 && time(last),
            (WIDE_TOKEN_BUCKET, &[_, _, last]) => {
                time(last) && wide(fields) > u128::from(u64::MAX) && wide(fields) <= MAX_PICO
            }
            (WIDE_LEAKY_BUCKET, &[_, _, last]) => {
                time(last) && wide(fields) > u128::from(u64::MAX) && wide(fields) <= MAX_PICO
            }
            (FIXED_WINDOW, &[last, count]) => time(last) && count >= 1 && units(count),
            (SLIDING_WINDOW, &[last, previous, current]) => {
                time(last) && units(previous) && units(current) && previous + current > 0
            }
            (THROTTLE, &[tat]) => tat >= gcra::MIN_EMISSION_NS,
            _ => false,
        }
    }

    fn any_fixed() -> impl Strategy<Value = Fixed> {
        let time = 0..=MAX_TIME_US;
        let units = 0..=MAX_UNITS;
        prop_oneof![
            (0..=MAX_PICO, time.clone()).prop_map(|(tokens, last_us)| Fixed::TokenBucket(
                token_bucket::State { tokens, last_us }
            )),
            (1..=MAX_PICO, time.clone()).prop_map(|(level, last_us)| Fixed::LeakyBucket(
                leaky_bucket::State { level, last_us }
            )),
            (time.clone(), 1..=MAX_UNITS).prop_map(|(last_us, count)| Fixed::FixedWindow(
                fixed_window::State { last_us, count }
            )),
            (time, units.clone(), units).prop_filter("not fresh", |(_, p, c)| p + c > 0).prop_map(
                |(last_us, previous, current)| {
                    Fixed::SlidingWindow(sliding_window::State { last_us, previous, current })
                }
            ),
            (gcra::MIN_EMISSION_NS..).prop_map(|tat_ns| Fixed::Throttle(gcra::State { tat_ns })),
        ]
    }

    #[test]
    fn buckets_are_narrow_up_to_18446744_units() {
        let narrow = Fixed::TokenBucket(token_bucket::State {
            tokens: 18_446_744 * PICO_PER_UNIT,
            last_us: 1,
        });
        assert_eq!(encoded(Value::Fixed(narrow)).kind, TOKEN_BUCKET);
        let wide = Fixed::LeakyBucket(leaky_bucket::State {
            level: 18_446_745 * PICO_PER_UNIT,
            last_us: 1,
        });
        let record = encoded(Value::Fixed(wide));
        assert_eq!((record.kind, record.fields.len()), (WIDE_LEAKY_BUCKET, 3));
        // A wide record under an older encoding could not have been written.
        assert_eq!(decode(2, &record), None);
        assert_eq!(decode(3, &record), Some(Owned::Fixed(wide)));
        // Nor any record under an encoding yet to come.
        let narrow = encoded(Value::Fixed(narrow));
        assert_eq!(decode(0, &narrow), None);
        assert_eq!(decode(ENCODING_VERSION + 1, &narrow), None);
        assert!(decode(4, &narrow).is_some());
        assert!(decode(1, &narrow).is_some());
    }

    #[test]
    fn throttle_state_is_one_word_of_kind_0() {
        let tat_ns = 1_700_000_000_123_456_789;
        let fixed = Fixed::Throttle(gcra::State { tat_ns });
        let record = encoded(Value::Fixed(fixed));
        assert_eq!((record.kind, &record.fields[..]), (THROTTLE, &[tat_ns][..]));
        assert_eq!(decode(3, &record), Some(Owned::Fixed(fixed)));
        assert_eq!(decode(2, &record), None);
    }

    #[test]
    fn logs_round_trip_and_bad_ones_are_refused() {
        let log = Log::from_runs([(5, 2), (7, 1)]).unwrap();
        assert_eq!(round_trip(&Owned::Log(log.clone())), Some(Owned::Log(log.clone())));
        assert_eq!(round_trip(&Owned::Log(Log::default())), Some(Owned::Log(Log::default())));
        let mut record = encoded(Value::Log(Cow::Borrowed(&log)));
        record.fields[2] += 1;
        assert_eq!(decode(3, &record), None);
        record.runs = None;
        assert_eq!(decode(3, &record), None);
    }

    #[test]
    fn leases_round_trip() {
        let owned = super::super::value::two_leases();
        let Owned::Leases(leases) = &owned else { unreachable!() };
        assert_eq!(round_trip(&owned), Some(owned.clone()));
        let record = encoded(owned.view());
        assert_eq!((record.kind, &record.fields[..]), (CONCURRENCY, &[leases.last_us, 8, 2][..]));
        assert_eq!(decode(3, &record), None, "no leases before encoding 4");
    }

    proptest! {
        /// Every state the commands can store round-trips, in one encoding.
        #[test]
        fn producible_states_round_trip(fixed in any_fixed()) {
            let owned = Owned::Fixed(fixed);
            prop_assert_eq!(round_trip(&owned), Some(owned.clone()));
            let (fields, count) = fixed.fields();
            prop_assert_eq!(Owned::from_setstate(fixed.name().to_bytes(), &fields[..count]), Some(owned));
        }

        /// Any other record is refused: decoding accepts exactly the
        /// producible ones.
        #[test]
        fn everything_else_is_refused(
            kind in 0u64..9,
            fields in proptest::collection::vec(
                prop_oneof![Just(0u64), Just(1), Just(MAX_UNITS), Just(MAX_UNITS + 1), Just(MAX_TIME_US),
                            Just(MAX_TIME_US + 1), Just(u64::MAX), any::<u64>(), Just(999), Just(1000)],
                0..4,
            ),
        ) {
            let record = Record { kind, fields: fields.clone(), runs: None };
            let decoded = decode(ENCODING_VERSION, &record);
            prop_assert_eq!(decoded.is_some(), producible(kind, &fields), "{:?}", record);
            if let Some(owned) = decoded {
                prop_assert_eq!(encoded(owned.view()), record);
            }
        }

        /// Sliding logs: whatever runs the math logs round-trip; random
        /// bytes decode only to a log that encodes back to them.
        #[test]
        fn logs_decode_only_canonical_bytes(
            header in (0u64..1000, 0u64..1000, 0u64..20),
            runs in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let record = Record { kind: SLIDING_LOG, fields: vec![header.0, header.1, header.2], runs: Some(Cow::Borrowed(&runs[..])) };
            if let Some(owned) = decode(ENCODING_VERSION, &record) {
                prop_assert_eq!(encoded(owned.view()), record);
            }
        }
    }
}
