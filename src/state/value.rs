//! The value model: what a key holds, as the commands read it (`Value`)
//! and as it is made outside a key (`Owned`: by RL.SETSTATE, RDB or a
//! copy), and RL.SETSTATE's form of it: `KIND field...`, parsed here, and
//! the commands an AOF rewrite writes to recreate it.

use std::borrow::Cow;
use std::ffi::CStr;

use crate::algorithms::concurrency::{Lease, Leases};
use crate::algorithms::sliding_log::Log;
use crate::algorithms::{fixed_window, gcra, leaky_bucket, sliding_window, token_bucket};

/// A state made of a few integers: every algorithm but the sliding log and
/// the concurrency limit. Each kind is declared once: its variant here, its
/// row in `Fixed::KINDS` and its arm in `Fixed::fields`; RL.SETSTATE, RDB,
/// the AOF and the memory layout follow from them.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixed {
    TokenBucket(token_bucket::State),
    LeakyBucket(leaky_bucket::State),
    FixedWindow(fixed_window::State),
    SlidingWindow(sliding_window::State),
    /// RL.THROTTLE's GCRA.
    Throttle(gcra::State),
}

/// A kind of fixed state, as RL.SETSTATE and RDB write it.
#[derive(Clone, Copy)]
pub struct FixedKind {
    /// Its name in RL.SETSTATE (the algorithm's).
    pub name: &'static CStr,
    /// How many fields it has, each at most 64 bits but the first.
    pub fields: usize,
    /// Its kind number in RDB, and the RDB encoding version that added it.
    /// Stored in files: never renumbered or reused (`rdb` tests that the
    /// numbers differ).
    pub rdb: u8,
    pub since: i32,
    /// For a bucket, whose first field passes 64 bits beyond 18,446,744
    /// units: the RDB kind number that holds that field in two halves.
    pub wide: Option<u8>,
    /// The state of its fields (0 past `fields`), when a call could have
    /// stored it.
    of: fn([u128; 3]) -> Option<Fixed>,
}

impl Fixed {
    /// Every kind, in the variants' order.
    pub const KINDS: [FixedKind; 5] = [
        FixedKind {
            name: c"TOKENBUCKET",
            fields: 2,
            rdb: 1,
            since: 1,
            wide: Some(6),
            of: |[tokens, last, _]| {
                let state = token_bucket::State { tokens, last_us: word(last)? };
                state.is_valid().then_some(Fixed::TokenBucket(state))
            },
        },
        FixedKind {
            name: c"LEAKYBUCKET",
            fields: 2,
            rdb: 2,
            since: 2,
            wide: Some(7),
            of: |[level, last, _]| {
                let state = leaky_bucket::State { level, last_us: word(last)? };
                state.is_valid().then_some(Fixed::LeakyBucket(state))
            },
        },
        FixedKind {
            name: c"FIXEDWINDOW",
            fields: 2,
            rdb: 3,
            since: 2,
            wide: None,
            of: |[last, count, _]| {
                let state = fixed_window::State { last_us: word(last)?, count: word(count)? };
                state.is_valid().then_some(Fixed::FixedWindow(state))
            },
        },
        FixedKind {
            name: c"SLIDINGWINDOW",
            fields: 3,
            rdb: 4,
            since: 2,
            wide: None,
            of: |[last, previous, current]| {
                let (last_us, previous, current) = (word(last)?, word(previous)?, word(current)?);
                let state = sliding_window::State { last_us, previous, current };
                state.is_valid().then_some(Fixed::SlidingWindow(state))
            },
        },
        FixedKind {
            name: c"THROTTLE",
            fields: 1,
            rdb: 0,
            since: 3,
            wide: None,
            of: |[tat, _, _]| {
                let state = gcra::State { tat_ns: word(tat)? };
                state.is_valid().then_some(Fixed::Throttle(state))
            },
        },
    ];

    /// Its kind's place in `KINDS`, and its fields (0 past the kind's).
    pub fn fields(&self) -> (usize, [u128; 3]) {
        match *self {
            Fixed::TokenBucket(s) => (0, [s.tokens, s.last_us.into(), 0]),
            Fixed::LeakyBucket(s) => (1, [s.level, s.last_us.into(), 0]),
            Fixed::FixedWindow(s) => (2, [s.last_us.into(), s.count.into(), 0]),
            Fixed::SlidingWindow(s) => (3, [s.last_us.into(), s.previous.into(), s.current.into()]),
            Fixed::Throttle(s) => (4, [s.tat_ns.into(), 0, 0]),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> &'static FixedKind {
        &Fixed::KINDS[self.fields().0]
    }

    /// The state of RL.SETSTATE's `name field...`, when a call could have
    /// stored it.
    pub fn from_fields(name: &[u8], fields: &[u128]) -> Option<Fixed> {
        let kinds: &'static [FixedKind] = &Fixed::KINDS;
        kinds.iter().find(|kind| name.eq_ignore_ascii_case(kind.name.to_bytes()))?.state(fields)
    }
}

impl FixedKind {
    /// The state of `fields`, when they are as many as this kind has and a
    /// call could have stored it.
    pub fn state(&self, fields: &[u128]) -> Option<Fixed> {
        if fields.len() != self.fields {
            return None;
        }
        let mut all = [0; 3];
        all[..fields.len()].copy_from_slice(fields);
        (self.of)(all)
    }
}

/// A field that holds a time or a count: 64 bits.
fn word(field: u128) -> Option<u64> {
    u64::try_from(field).ok()
}

/// A key's state as the commands read it: borrowed from the value, or
/// made from it (a short log or a few leases are kept compact: `layout`).
#[derive(Debug, Clone)]
pub enum Value<'a> {
    Fixed(Fixed),
    Log(Cow<'a, Log>),
    Leases(Cow<'a, Leases>),
}

/// A state made outside a key: by RL.SETSTATE, RDB or a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owned {
    Fixed(Fixed),
    Log(Log),
    Leases(Leases),
}

impl Value<'_> {
    /// The same state, owned.
    pub fn into_owned(self) -> Owned {
        match self {
            Value::Fixed(fixed) => Owned::Fixed(fixed),
            Value::Log(log) => Owned::Log(log.into_owned()),
            Value::Leases(leases) => Owned::Leases(leases.into_owned()),
        }
    }
}

impl Owned {
    /// RL.SETSTATE's `name field...`: the state, or `None` when no call
    /// could have stored it. An empty sliding log has no fields.
    pub fn from_setstate(name: &[u8], fields: &[u128]) -> Option<Owned> {
        if name.eq_ignore_ascii_case(b"SLIDINGLOG") {
            return Log::from_runs(runs_of(fields)?).map(Owned::Log);
        }
        if name.eq_ignore_ascii_case(b"CONCURRENCY") {
            let [last_us, next_id, held @ ..] = fields else { return None };
            let (last_us, next_id) = (u64::try_from(*last_us).ok()?, u64::try_from(*next_id).ok()?);
            let leases = Leases { last_us, next_id, held: leases_of(held)? };
            return leases.is_valid().then_some(Owned::Leases(leases));
        }
        Fixed::from_fields(name, fields).map(Owned::Fixed)
    }

    /// The state, borrowed as a key's is (the tests' way to encode one).
    #[cfg(test)]
    pub fn view(&self) -> Value<'_> {
        match self {
            Owned::Fixed(fixed) => Value::Fixed(*fixed),
            Owned::Log(log) => Value::Log(Cow::Borrowed(log)),
            Owned::Leases(leases) => Value::Leases(Cow::Borrowed(leases)),
        }
    }
}

/// What RL.SETSTATE's `KIND APPEND field...` adds: a log's runs or leases.
pub enum Items {
    Runs(Vec<(u64, u64)>),
    Leases(Vec<Lease>),
}

impl Items {
    /// The items of `KIND APPEND field...`, when the fields are whole items
    /// of that kind.
    pub fn from_setstate(name: &[u8], fields: &[u128]) -> Option<Items> {
        if name.eq_ignore_ascii_case(b"SLIDINGLOG") {
            return runs_of(fields).map(Items::Runs);
        }
        if name.eq_ignore_ascii_case(b"CONCURRENCY") {
            return leases_of(fields).map(Items::Leases);
        }
        None
    }
}

/// A log's runs in RL.SETSTATE's fields: (time, count) pairs.
fn runs_of(fields: &[u128]) -> Option<Vec<(u64, u64)>> {
    if !fields.len().is_multiple_of(2) {
        return None;
    }
    let run = |pair: &[u128]| Some((u64::try_from(pair[0]).ok()?, u64::try_from(pair[1]).ok()?));
    fields.chunks_exact(2).map(run).collect()
}

/// Leases in RL.SETSTATE's fields: (id, expires_us, n) triples.
fn leases_of(fields: &[u128]) -> Option<Vec<Lease>> {
    if !fields.len().is_multiple_of(3) {
        return None;
    }
    let field = |field: u128| u64::try_from(field).ok();
    let lease =
        |f: &[u128]| Some(Lease { id: field(f[0])?, expires_us: field(f[1])?, n: field(f[2])? });
    fields.chunks_exact(3).map(lease).collect()
}

/// The most arguments (command name and key included) of a command that
/// recreates a state, as Redis's own types cap their AOF rewrite's: neither
/// the rewrite nor a load then holds more than one bounded command.
pub const MAX_SETSTATE_ARGS: usize = 1024;

/// The arguments after the key of the RL.SETSTATE commands that recreate
/// `value`: `KIND field...`, then, for a state of many items (a log's runs,
/// leases), as many `KIND APPEND item...` as the items need, each command
/// of at most MAX_SETSTATE_ARGS arguments. Made one command at a time.
pub fn setstate_commands<'a>(value: &'a Value) -> impl Iterator<Item = Vec<String>> + 'a {
    type Items<'a> = Box<dyn Iterator<Item = u64> + 'a>;
    let (name, header, items, width): (&CStr, Vec<u128>, Items<'a>, usize) = match value {
        Value::Fixed(fixed) => {
            let (kind, fields) = (fixed.kind(), fixed.fields().1);
            (kind.name, fields[..kind.fields].to_vec(), Box::new(std::iter::empty()), 1)
        }
        Value::Log(log) => {
            (c"SLIDINGLOG", vec![], Box::new(log.runs().flat_map(<[u64; 2]>::from)), 2)
        }
        Value::Leases(leases) => {
            let fields = leases.held.iter().flat_map(|l| [l.id, l.expires_us, l.n]);
            let header = vec![leases.last_us.into(), leases.next_id.into()];
            (c"CONCURRENCY", header, Box::new(fields), 3)
        }
    };
    let name = name.to_string_lossy().into_owned();
    let mut items = items.peekable();
    let mut first = true;
    std::iter::from_fn(move || {
        let mut args = vec![name.clone()];
        let room = if std::mem::take(&mut first) {
            args.extend(header.iter().map(u128::to_string));
            MAX_SETSTATE_ARGS - 3 - header.len()
        } else {
            items.peek()?;
            args.push("APPEND".to_owned());
            MAX_SETSTATE_ARGS - 4
        };
        args.extend(items.by_ref().take(room / width * width).map(|field| field.to_string()));
        Some(args)
    })
}

/// Two leases, for the tests of the state's forms.
#[cfg(test)]
pub fn two_leases() -> Owned {
    let held = vec![
        Lease { id: 2, expires_us: 1_700_000_030_000_000, n: 3 },
        Lease { id: 7, expires_us: 1_700_000_001_000_000, n: 1 },
    ];
    Owned::Leases(Leases { last_us: 1_700_000_000_000_000, next_id: 8, held })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithms::{MAX_TIME_US, MAX_UNITS, PICO_PER_UNIT};
    use crate::state::Stored;

    const MAX_PICO: u128 = MAX_UNITS as u128 * PICO_PER_UNIT;

    #[test]
    fn throttle_state_is_one_field() {
        let tat_ns = 1_700_000_000_123_456_789;
        let fixed = Fixed::Throttle(gcra::State { tat_ns });
        let throttle = |fields: &[u128]| Owned::from_setstate(b"throttle", fields);
        assert_eq!(throttle(&[tat_ns.into()]), Some(Owned::Fixed(fixed)));
        assert_eq!(throttle(&[999]), None);
        assert_eq!(throttle(&[1 << 64]), None);
        assert_eq!(throttle(&[1000, 1]), None);
        let commands: Vec<_> = setstate_commands(&Value::Fixed(fixed)).collect();
        assert_eq!(commands, [["THROTTLE", "1700000000123456789"]]);
    }

    #[test]
    fn leases_round_trip_in_setstate() {
        let owned = two_leases();
        let args = setstate_commands(&owned.view()).next().unwrap();
        assert_eq!(args[..3], ["CONCURRENCY", "1700000000000000", "8"]);
        let fields: Vec<u128> = args[1..].iter().map(|f| f.parse().unwrap()).collect();
        assert_eq!(Owned::from_setstate(b"concurrency", &fields), Some(owned));
        assert_eq!(Owned::from_setstate(b"CONCURRENCY", &fields[..fields.len() - 1]), None);
        assert_eq!(Owned::from_setstate(b"CONCURRENCY", &fields[..2]), None, "no lease, no key");
        let mut late = fields.clone();
        late[0] = 1_700_000_001_000_000;
        assert_eq!(Owned::from_setstate(b"CONCURRENCY", &late), None, "a lease that ran out");
    }

    /// Replays RL.SETSTATE commands as a load does; `None` when one fails.
    fn replay(commands: &[Vec<String>]) -> Option<Owned> {
        let fields =
            |args: &[String]| args.iter().map(|f| f.parse().ok()).collect::<Option<Vec<u128>>>();
        let (first, rest) = commands.split_first()?;
        let mut stored =
            Stored::new(Owned::from_setstate(first[0].as_bytes(), &fields(&first[1..])?)?);
        let appended = rest.iter().all(|args| {
            args[1] == "APPEND"
                && fields(&args[2..])
                    .and_then(|f| Items::from_setstate(args[0].as_bytes(), &f))
                    .is_some_and(|items| stored.as_mut().append(items))
        });
        appended.then(|| stored.view().into_owned())
    }

    #[test]
    fn long_states_are_rewritten_in_bounded_commands_that_load_back() {
        let log =
            Log::from_runs((0..5000).map(|i| (1_700_000_000_000_000 + i * 3, 1 + i % 3))).unwrap();
        let held = (1..=1000).map(|id| Lease { id, expires_us: 1_700_000_100_000_000 + id, n: 2 });
        let leases = Leases { last_us: 1_700_000_000_000_000, next_id: 1001, held: held.collect() };
        for (owned, count) in
            [(Owned::Log(log), 10), (Owned::Leases(leases), 3), (Owned::Log(Log::default()), 1)]
        {
            let commands: Vec<Vec<String>> = setstate_commands(&owned.view()).collect();
            assert_eq!(commands.len(), count);
            // With the command's name and the key: at most 1024 arguments.
            assert!(commands.iter().all(|args| args.len() + 2 <= MAX_SETSTATE_ARGS));
            assert_eq!(replay(&commands), Some(owned));
        }
        // A continuation that does not follow the state changes nothing.
        let log = Log::from_runs([(10, 1), (20, 1)]).unwrap();
        let commands = [
            vec!["SLIDINGLOG".into(), "10".into(), "1".into()],
            vec!["SLIDINGLOG".into(), "APPEND".into(), "20".into(), "1".into()],
        ];
        assert_eq!(replay(&commands), Some(Owned::Log(log)));
        for bad in [["9", "1"], ["20", "0"], ["20", "9007199254740991"]] {
            let mut commands = commands.clone();
            commands[1].splice(2.., bad.map(String::from));
            assert_eq!(replay(&commands), None, "{bad:?}");
        }
        let wrong_kind = [
            commands[0].clone(),
            vec!["CONCURRENCY".into(), "APPEND".into(), "1".into(), "2".into(), "3".into()],
        ];
        assert_eq!(replay(&wrong_kind), None);
    }

    #[test]
    fn setstate_takes_only_producible_states() {
        let log = |fields: &[u128]| Owned::from_setstate(b"SLIDINGLOG", fields);
        assert_eq!(log(&[]), Some(Owned::Log(Log::default())));
        assert_eq!(log(&[1, 2, 3]), None);
        assert_eq!(log(&[u128::from(u64::MAX), 1]), None);
        let tb = |fields: &[u128]| Owned::from_setstate(b"tokenbucket", fields);
        assert!(tb(&[MAX_PICO, u128::from(MAX_TIME_US)]).is_some());
        assert_eq!(tb(&[MAX_PICO + 1, 0]), None);
        assert_eq!(tb(&[0, u128::from(MAX_TIME_US) + 1]), None);
        assert_eq!(tb(&[0]), None);
        assert_eq!(Owned::from_setstate(b"FIXEDWINDOW", &[1, 0]), None);
        assert_eq!(Owned::from_setstate(b"LEAKYBUCKET", &[0, 1]), None);
        assert_eq!(Owned::from_setstate(b"SLIDINGWINDOW", &[1, 0, 0]), None);
        assert_eq!(Owned::from_setstate(b"GCRA", &[1, 1]), None);
    }
}
