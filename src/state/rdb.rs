//! The RDB record of a value: its kind number, its integers, and a log's
//! runs or the leases as one string. The kinds are numbered here on their
//! own, never renumbered, so that the layouts in memory can change without
//! touching stored data. Files and DUMPs of every encoding version load.

use std::borrow::Cow;

use crate::algorithms::concurrency::Leases;
use crate::algorithms::sliding_log::Log;

use super::value::{Fixed, FixedKind, Owned, Value};

/// RDB encoding version. 1 held only token buckets; 2 added the other
/// algorithms; 3 the wide buckets and RL.THROTTLE's state; 4 adds the
/// concurrency limits' leases (a loader of 3 refuses the version).
pub const ENCODING_VERSION: i32 = 4;

/// The kind numbers of the states of many items, beside those of the fixed
/// kinds (`Fixed::KINDS`). Stored in files: never renumbered or reused.
pub const SLIDING_LOG: u64 = 5;
pub const CONCURRENCY: u64 = 8;

/// The encoding version that added the wide buckets' kind numbers.
const WIDE_SINCE: i32 = 3;

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
    // Redis hands over a newer encoding too (a RESTORE from a newer module).
    if !(1..=ENCODING_VERSION).contains(&encver) {
        return None;
    }
    match kind {
        SLIDING_LOG => (encver >= 2).then_some((3, true)),
        CONCURRENCY => (encver >= 4).then_some((3, true)),
        _ => {
            let (fixed, wide) = fixed_kind(u8::try_from(kind).ok()?)?;
            let since = if wide { WIDE_SINCE } else { fixed.since };
            (encver >= since).then_some((fixed.fields + usize::from(wide), false))
        }
    }
}

/// The fixed kind numbered `number` in RDB, and whether that is its wide
/// number.
fn fixed_kind(number: u8) -> Option<(&'static FixedKind, bool)> {
    let kinds: &'static [FixedKind] = &Fixed::KINDS;
    kinds.iter().find_map(|kind| {
        if number == kind.rdb {
            Some((kind, false))
        } else {
            (Some(number) == kind.wide).then_some((kind, true))
        }
    })
}

/// A fixed state's record, on the stack: its kind number and its integers
/// (0 past its kind's count). A `layout::Other` keeps the states without a
/// layout of their own so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedRecord {
    pub kind: u8,
    pub fields: [u64; 3],
}

impl FixedRecord {
    /// `fixed`'s record: its fields, each in 64 bits; a bucket's first
    /// (pico-units) in two halves, under its wide number, when it must be.
    pub fn of(fixed: &Fixed) -> FixedRecord {
        let (kind, [first, second, third]) = (fixed.kind(), fixed.fields().1);
        // Every field but a bucket's first fits 64 bits.
        match kind.wide.filter(|_| first > u128::from(u64::MAX)) {
            Some(wide) => FixedRecord {
                kind: wide,
                fields: [(first >> 64) as u64, first as u64, second as u64],
            },
            None => {
                FixedRecord { kind: kind.rdb, fields: [first as u64, second as u64, third as u64] }
            }
        }
    }

    /// The record of kind `kind` with `fields`, when it is a fixed kind's
    /// and they are as many as it has.
    pub fn new(kind: u64, fields: &[u64]) -> Option<FixedRecord> {
        let mut record = FixedRecord { kind: u8::try_from(kind).ok()?, fields: [0; 3] };
        if fields.len() != record.len()? {
            return None;
        }
        record.fields[..fields.len()].copy_from_slice(fields);
        Some(record)
    }

    /// How many integers a record of its kind holds, when it is a fixed
    /// kind's.
    fn len(&self) -> Option<usize> {
        fixed_kind(self.kind).map(|(fixed, wide)| fixed.fields + usize::from(wide))
    }

    /// Its integers.
    pub fn fields(&self) -> &[u64] {
        &self.fields[..self.len().unwrap_or(0)]
    }

    /// The state it holds, when a call could have stored it.
    pub fn state(&self) -> Option<Fixed> {
        let (fixed, wide) = fixed_kind(self.kind)?;
        let [first, second, third] = self.fields.map(u128::from);
        let fields = if wide { [first << 64 | second, third, 0] } else { [first, second, third] };
        fixed.state(&fields[..fixed.fields])
    }
}

pub fn encode<'a>(value: &'a Value) -> Record<'a> {
    match value {
        Value::Fixed(fixed) => {
            let record = FixedRecord::of(fixed);
            Record { kind: record.kind.into(), fields: record.fields().to_vec(), runs: None }
        }
        Value::Log(log) => {
            let fields = vec![log.first_us, log.last_us, log.total];
            Record { kind: SLIDING_LOG, fields, runs: Some(log.canonical_runs()) }
        }
        Value::Leases(leases) => {
            let fields = vec![leases.last_us, leases.next_id, leases.held.len() as u64];
            Record { kind: CONCURRENCY, fields, runs: Some(Cow::Owned(leases.encode())) }
        }
    }
}

/// The state a record holds, when it is exactly what `encode` writes for
/// a state some call could have stored; else `None`.
pub fn decode(encver: i32, record: &Record) -> Option<Owned> {
    let (count, has_runs) = layout(encver, record.kind)?;
    if record.fields.len() != count || record.runs.is_some() != has_runs {
        return None;
    }
    let f = &record.fields;
    match record.kind {
        SLIDING_LOG => Log::decode(f[0], f[1], f[2], record.runs.as_deref()?).map(Owned::Log),
        CONCURRENCY => Leases::decode(f[0], f[1], f[2], record.runs.as_deref()?).map(Owned::Leases),
        kind => {
            let fixed = FixedRecord::new(kind, f)?.state()?;
            // One encoding per state: a bucket is wide only when it must be.
            (u64::from(FixedRecord::of(&fixed).kind) == kind).then_some(Owned::Fixed(fixed))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use proptest::prelude::*;

    use super::*;
    use crate::algorithms::{MAX_TIME_US, MAX_UNITS, PICO_PER_UNIT};
    use crate::algorithms::{fixed_window, gcra, leaky_bucket, sliding_window, token_bucket};

    const MAX_PICO: u128 = MAX_UNITS as u128 * PICO_PER_UNIT;

    // The numbers files hold, never to change.
    const THROTTLE: u64 = 0;
    const TOKEN_BUCKET: u64 = 1;
    const LEAKY_BUCKET: u64 = 2;
    const FIXED_WINDOW: u64 = 3;
    const SLIDING_WINDOW: u64 = 4;
    const WIDE_TOKEN_BUCKET: u64 = 6;
    const WIDE_LEAKY_BUCKET: u64 = 7;

    #[test]
    fn kind_numbers_are_as_files_hold_them_and_differ() {
        let numbers = |name: &CStr| {
            let kind = Fixed::KINDS.iter().find(|kind| kind.name == name).unwrap();
            (u64::from(kind.rdb), kind.wide.map(u64::from))
        };
        assert_eq!(numbers(c"THROTTLE"), (THROTTLE, None));
        assert_eq!(numbers(c"TOKENBUCKET"), (TOKEN_BUCKET, Some(WIDE_TOKEN_BUCKET)));
        assert_eq!(numbers(c"LEAKYBUCKET"), (LEAKY_BUCKET, Some(WIDE_LEAKY_BUCKET)));
        assert_eq!(numbers(c"FIXEDWINDOW"), (FIXED_WINDOW, None));
        assert_eq!(numbers(c"SLIDINGWINDOW"), (SLIDING_WINDOW, None));
        let mut all: Vec<u64> = vec![SLIDING_LOG, CONCURRENCY];
        for kind in Fixed::KINDS {
            all.extend([kind.rdb].into_iter().chain(kind.wide).map(u64::from));
            // A record holds at most three integers.
            assert!(kind.fields + usize::from(kind.wide.is_some()) <= 3, "{:?}", kind.name);
        }
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "a kind number taken twice");
    }

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
            let (kind, fields) = (fixed.kind(), fixed.fields().1);
            prop_assert_eq!(Owned::from_setstate(kind.name.to_bytes(), &fields[..kind.fields]), Some(owned));
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
