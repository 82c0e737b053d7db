//! The `ratelimit` data type: one value per key, holding one limiter's state.
//! Its kinds, the RDB encoding, AOF rewrite, memory usage, digest, copy, free.
//!
//! The value Redis keeps is a pointer. The kinds most keys hold have a
//! layout of their own, named by the pointer's three low bits (free, since
//! every state is 8-aligned), so that a token bucket costs its 16 bytes with
//! no tag word and RL.THROTTLE's state its 8. Every other kind is a variant
//! of `Other`, behind one more tag: a new kind is a variant there, whose tag
//! word costs little beside a state of more than a word.
//!
//! The RDB encoding numbers the kinds on its own (`rdb_kind`), so that the
//! layouts in memory can change without touching stored data.

use std::borrow::Cow;
use std::ffi::{CStr, c_int, c_void};
use std::mem::{align_of, size_of};

use redis_module::native_types::RedisType;
use redis_module::raw;

use crate::algorithms::concurrency::{Lease, Leases};
use crate::algorithms::sliding_log::Log;
use crate::algorithms::{fixed_window, gcra, leaky_bucket, sliding_window, token_bucket};
use crate::stats;

/// RDB encoding version. 1 held only token buckets; 2 added the other
/// algorithms; 3 the wide buckets and RL.THROTTLE's state; 4 adds the
/// concurrency limits' leases (a loader of 3 refuses the version).
const ENCODING_VERSION: i32 = 4;

/// The kind numbers of the RDB encoding: stored in files, never renumbered.
mod rdb_kind {
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

/// The layouts a value's pointer names in its low bits.
mod tag {
    pub const BITS: usize = 0b111;
    pub const THROTTLE: usize = 0;
    pub const TOKEN_BUCKET: usize = 1;
    pub const LEAKY_BUCKET: usize = 2;
    pub const FIXED_WINDOW: usize = 3;
    pub const SLIDING_WINDOW: usize = 4;
    pub const SLIDING_LOG: usize = 5;
    /// An `Other`. (7 is free.)
    pub const OTHER: usize = 6;
}

/// A bucket whose pico-units fit 64 bits (up to 18,446,744 units): 16 bytes.
#[derive(Clone, Copy)]
struct Narrow {
    amount: u64,
    last_us: u64,
}

/// A larger bucket: its pico-units in two 64-bit halves.
#[derive(Clone, Copy)]
struct Wide {
    high: u64,
    low: u64,
    last_us: u64,
}

/// A bucket's amount and time, narrow when the amount fits 64 bits.
fn bucket(amount: u128, last_us: u64) -> Result<Narrow, Wide> {
    match u64::try_from(amount) {
        Ok(amount) => Ok(Narrow { amount, last_us }),
        Err(_) => Err(Wide { high: (amount >> 64) as u64, low: amount as u64, last_us }),
    }
}

impl Narrow {
    fn amount(&self) -> (u128, u64) {
        (self.amount.into(), self.last_us)
    }
}

impl Wide {
    fn amount(&self) -> (u128, u64) {
        ((u128::from(self.high) << 64) | u128::from(self.low), self.last_us)
    }
}

/// Every kind without a layout of its own.
enum Other {
    WideTokenBucket(Wide),
    WideLeakyBucket(Wide),
    /// Boxed, so that the wide buckets keep their 32-byte allocation.
    Concurrency(Box<Leases>),
}

impl Other {
    fn view(&self) -> Value<'_> {
        match self {
            Other::WideTokenBucket(wide) => {
                let (tokens, last_us) = wide.amount();
                Value::Fixed(Fixed::TokenBucket(token_bucket::State { tokens, last_us }))
            }
            Other::WideLeakyBucket(wide) => {
                let (level, last_us) = wide.amount();
                Value::Fixed(Fixed::LeakyBucket(leaky_bucket::State { level, last_us }))
            }
            Other::Concurrency(leases) => Value::Leases(leases),
        }
    }

    /// Bytes it holds beyond its own size.
    fn heap_bytes(&self) -> usize {
        match self {
            Other::WideTokenBucket(_) | Other::WideLeakyBucket(_) => 0,
            Other::Concurrency(leases) => size_of::<Leases>() + leases.heap_bytes(),
        }
    }
}

/// A state made of a few integers: every algorithm but the sliding log.
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

/// A key's state as the commands read it.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    Fixed(Fixed),
    Log(&'a Log),
    Leases(&'a Leases),
}

/// A state made outside a key: by RL.SETSTATE, RDB or a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owned {
    Fixed(Fixed),
    Log(Log),
    Leases(Leases),
}

impl Fixed {
    /// Its name in RL.SETSTATE (the algorithm's).
    pub fn name(&self) -> &'static CStr {
        Fixed::NAMES[self.kind()]
    }

    /// The names of the kinds, by `kind()`.
    pub const NAMES: [&'static CStr; 5] =
        [c"TOKENBUCKET", c"LEAKYBUCKET", c"FIXEDWINDOW", c"SLIDINGWINDOW", c"THROTTLE"];

    /// Its kind's place in `NAMES`.
    pub fn kind(&self) -> usize {
        match self {
            Fixed::TokenBucket(_) => 0,
            Fixed::LeakyBucket(_) => 1,
            Fixed::FixedWindow(_) => 2,
            Fixed::SlidingWindow(_) => 3,
            Fixed::Throttle(_) => 4,
        }
    }

    /// Its fields in RL.SETSTATE, and how many there are.
    pub fn fields(&self) -> ([u128; 3], usize) {
        match *self {
            Fixed::TokenBucket(s) => ([s.tokens, s.last_us.into(), 0], 2),
            Fixed::LeakyBucket(s) => ([s.level, s.last_us.into(), 0], 2),
            Fixed::FixedWindow(s) => ([s.last_us.into(), s.count.into(), 0], 2),
            Fixed::SlidingWindow(s) => ([s.last_us.into(), s.previous.into(), s.current.into()], 3),
            Fixed::Throttle(s) => ([s.tat_ns.into(), 0, 0], 1),
        }
    }

    /// The state of RL.SETSTATE's `name field...`, when a call could have
    /// stored it.
    fn from_fields(name: &[u8], fields: &[u128]) -> Option<Fixed> {
        let time = |field: u128| u64::try_from(field).ok();
        let count = |field: u128| u64::try_from(field).ok();
        let is = |fixed: &CStr| name.eq_ignore_ascii_case(fixed.to_bytes());
        let fixed = match *fields {
            [tokens, last] if is(c"TOKENBUCKET") => {
                Fixed::TokenBucket(token_bucket::State { tokens, last_us: time(last)? })
            }
            [level, last] if is(c"LEAKYBUCKET") => {
                Fixed::LeakyBucket(leaky_bucket::State { level, last_us: time(last)? })
            }
            [last, n] if is(c"FIXEDWINDOW") => {
                Fixed::FixedWindow(fixed_window::State { last_us: time(last)?, count: count(n)? })
            }
            [last, previous, current] if is(c"SLIDINGWINDOW") => {
                Fixed::SlidingWindow(sliding_window::State {
                    last_us: time(last)?,
                    previous: count(previous)?,
                    current: count(current)?,
                })
            }
            [tat] if is(c"THROTTLE") => Fixed::Throttle(gcra::State { tat_ns: time(tat)? }),
            _ => return None,
        };
        fixed.is_valid().then_some(fixed)
    }

    fn is_valid(&self) -> bool {
        match self {
            Fixed::TokenBucket(s) => s.is_valid(),
            Fixed::LeakyBucket(s) => s.is_valid(),
            Fixed::FixedWindow(s) => s.is_valid(),
            Fixed::SlidingWindow(s) => s.is_valid(),
            Fixed::Throttle(s) => s.is_valid(),
        }
    }
}

impl Owned {
    /// RL.SETSTATE's `name field...`: the state, or `None` when no call
    /// could have stored it. An empty sliding log has no fields.
    pub fn from_setstate(name: &[u8], fields: &[u128]) -> Option<Owned> {
        if name.eq_ignore_ascii_case(b"SLIDINGLOG") {
            if !fields.len().is_multiple_of(2) {
                return None;
            }
            let run =
                |pair: &[u128]| Some((u64::try_from(pair[0]).ok()?, u64::try_from(pair[1]).ok()?));
            let runs = fields.chunks_exact(2).map(run).collect::<Option<Vec<_>>>()?;
            return Log::from_runs(runs).map(Owned::Log);
        }
        if name.eq_ignore_ascii_case(b"CONCURRENCY") {
            let [last_us, next_id, leases @ ..] = fields else { return None };
            if !leases.len().is_multiple_of(3) {
                return None;
            }
            let field = |field: u128| u64::try_from(field).ok();
            let lease = |f: &[u128]| {
                Some(Lease { id: field(f[0])?, expires_us: field(f[1])?, n: field(f[2])? })
            };
            let held = leases.chunks_exact(3).map(lease).collect::<Option<Vec<_>>>()?;
            let leases = Leases { last_us: field(*last_us)?, next_id: field(*next_id)?, held };
            return leases.is_valid().then_some(Owned::Leases(leases));
        }
        Fixed::from_fields(name, fields).map(Owned::Fixed)
    }

    fn view(&self) -> Value<'_> {
        match self {
            Owned::Fixed(fixed) => Value::Fixed(*fixed),
            Owned::Log(log) => Value::Log(log),
            Owned::Leases(leases) => Value::Leases(leases),
        }
    }
}

/// The arguments after the key of the RL.SETSTATE that recreates `value`.
pub fn setstate_args(value: Value) -> Vec<String> {
    match value {
        Value::Fixed(fixed) => {
            let (fields, count) = fixed.fields();
            let name = fixed.name().to_string_lossy().into_owned();
            std::iter::once(name).chain(fields[..count].iter().map(u128::to_string)).collect()
        }
        Value::Log(log) => std::iter::once("SLIDINGLOG".to_owned())
            .chain(log.runs().flat_map(|(at_us, count)| [at_us.to_string(), count.to_string()]))
            .collect(),
        Value::Leases(leases) => leases_args(leases, &leases.held),
    }
}

/// `CONCURRENCY last_us next_id` and the fields of `held`.
fn leases_args(leases: &Leases, held: &[Lease]) -> Vec<String> {
    let header = ["CONCURRENCY".to_owned(), leases.last_us.to_string(), leases.next_id.to_string()];
    let fields = held.iter().flat_map(|l| [l.id, l.expires_us, l.n].map(|f| f.to_string()));
    header.into_iter().chain(fields).collect()
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
fn layout(encver: i32, kind: u64) -> Option<(usize, bool)> {
    use rdb_kind::*;
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

pub fn encode<'a>(value: &Value<'a>) -> Record<'a> {
    let bucket = |narrow: u64, wide: u64, amount: u128, last_us: u64| match bucket(amount, last_us)
    {
        Ok(b) => (narrow, vec![b.amount, b.last_us]),
        Err(b) => (wide, vec![b.high, b.low, b.last_us]),
    };
    let (kind, fields) = match *value {
        Value::Fixed(Fixed::TokenBucket(s)) => {
            bucket(rdb_kind::TOKEN_BUCKET, rdb_kind::WIDE_TOKEN_BUCKET, s.tokens, s.last_us)
        }
        Value::Fixed(Fixed::LeakyBucket(s)) => {
            bucket(rdb_kind::LEAKY_BUCKET, rdb_kind::WIDE_LEAKY_BUCKET, s.level, s.last_us)
        }
        Value::Fixed(Fixed::FixedWindow(s)) => (rdb_kind::FIXED_WINDOW, vec![s.last_us, s.count]),
        Value::Fixed(Fixed::SlidingWindow(s)) => {
            (rdb_kind::SLIDING_WINDOW, vec![s.last_us, s.previous, s.current])
        }
        Value::Fixed(Fixed::Throttle(s)) => (rdb_kind::THROTTLE, vec![s.tat_ns]),
        Value::Log(log) => {
            let fields = vec![log.first_us, log.last_us, log.total];
            let runs = Some(Cow::Borrowed(&log.runs[..]));
            return Record { kind: rdb_kind::SLIDING_LOG, fields, runs };
        }
        Value::Leases(leases) => {
            let fields = vec![leases.last_us, leases.next_id, leases.held.len() as u64];
            let runs = Some(Cow::Owned(leases.encode()));
            return Record { kind: rdb_kind::CONCURRENCY, fields, runs };
        }
    };
    Record { kind, fields, runs: None }
}

/// The state a record holds, when it is exactly what `encode` writes for
/// a state some call could have stored; else `None`.
pub fn decode(encver: i32, record: &Record) -> Option<Owned> {
    use rdb_kind::*;
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

fn tagged<T>(tag: usize, state: T) -> *mut c_void {
    const { assert!(align_of::<T>() >= 8) };
    stats::value_created();
    Box::into_raw(Box::new(state)).map_addr(|address| address | tag).cast()
}

fn tag_of(value: *const c_void) -> usize {
    value.addr() & tag::BITS
}

/// # Safety
/// `value` came from `into_value`, is still alive, and holds a `T`.
unsafe fn untagged<'a, T>(value: *const c_void) -> &'a mut T {
    unsafe { &mut *value.map_addr(|address| address & !tag::BITS).cast::<T>().cast_mut() }
}

/// A new value for Redis to own.
pub fn into_value(owned: Owned) -> *mut c_void {
    match owned {
        Owned::Log(log) => tagged(tag::SLIDING_LOG, log),
        Owned::Leases(leases) => tagged(tag::OTHER, Other::Concurrency(Box::new(leases))),
        Owned::Fixed(Fixed::TokenBucket(s)) => match bucket(s.tokens, s.last_us) {
            Ok(narrow) => tagged(tag::TOKEN_BUCKET, narrow),
            Err(wide) => tagged(tag::OTHER, Other::WideTokenBucket(wide)),
        },
        Owned::Fixed(Fixed::LeakyBucket(s)) => match bucket(s.level, s.last_us) {
            Ok(narrow) => tagged(tag::LEAKY_BUCKET, narrow),
            Err(wide) => tagged(tag::OTHER, Other::WideLeakyBucket(wide)),
        },
        Owned::Fixed(Fixed::FixedWindow(s)) => tagged(tag::FIXED_WINDOW, s),
        Owned::Fixed(Fixed::SlidingWindow(s)) => tagged(tag::SLIDING_WINDOW, s),
        Owned::Fixed(Fixed::Throttle(s)) => tagged(tag::THROTTLE, s),
    }
}

/// The state a value holds.
///
/// # Safety
/// `value` came from `into_value` and lives as long as `'a`.
pub unsafe fn view<'a>(value: *const c_void) -> Value<'a> {
    let narrow = || unsafe { untagged::<Narrow>(value) }.amount();
    match tag_of(value) {
        tag::TOKEN_BUCKET => {
            let (tokens, last_us) = narrow();
            Value::Fixed(Fixed::TokenBucket(token_bucket::State { tokens, last_us }))
        }
        tag::LEAKY_BUCKET => {
            let (level, last_us) = narrow();
            Value::Fixed(Fixed::LeakyBucket(leaky_bucket::State { level, last_us }))
        }
        tag::FIXED_WINDOW => Value::Fixed(Fixed::FixedWindow(*unsafe { untagged(value) })),
        tag::SLIDING_WINDOW => Value::Fixed(Fixed::SlidingWindow(*unsafe { untagged(value) })),
        tag::THROTTLE => Value::Fixed(Fixed::Throttle(*unsafe { untagged(value) })),
        tag::SLIDING_LOG => Value::Log(unsafe { untagged(value) }),
        _ => unsafe { untagged::<Other>(value) }.view(),
    }
}

/// Writes `fixed` over the value when that has its layout, and says
/// whether it did; else the caller replaces the value.
///
/// # Safety
/// As `view`.
pub unsafe fn overwrite(value: *mut c_void, fixed: Fixed) -> bool {
    match (tag_of(value), fixed) {
        (tag::TOKEN_BUCKET, Fixed::TokenBucket(s)) => write(value, bucket(s.tokens, s.last_us)),
        (tag::LEAKY_BUCKET, Fixed::LeakyBucket(s)) => write(value, bucket(s.level, s.last_us)),
        (tag::FIXED_WINDOW, Fixed::FixedWindow(s)) => write::<_, ()>(value, Ok(s)),
        (tag::SLIDING_WINDOW, Fixed::SlidingWindow(s)) => write::<_, ()>(value, Ok(s)),
        (tag::THROTTLE, Fixed::Throttle(s)) => write::<_, ()>(value, Ok(s)),
        (tag::OTHER, fixed) => match (unsafe { untagged::<Other>(value) }, fixed) {
            (Other::WideTokenBucket(wide), Fixed::TokenBucket(s)) => {
                write_wide(wide, bucket(s.tokens, s.last_us))
            }
            (Other::WideLeakyBucket(wide), Fixed::LeakyBucket(s)) => {
                write_wide(wide, bucket(s.level, s.last_us))
            }
            _ => false,
        },
        _ => false,
    }
}

/// Writes `state` over the value's `T` when it is `Ok`.
fn write<T, E>(value: *mut c_void, state: Result<T, E>) -> bool {
    // SAFETY: the caller matched the value's tag with `T`.
    state.map(|state| *unsafe { untagged::<T>(value) } = state).is_ok()
}

fn write_wide(wide: &mut Wide, state: Result<Narrow, Wide>) -> bool {
    state.map_err(|state| *wide = state).is_err()
}

/// The log a value holds, to change in place.
///
/// # Safety
/// As `view`.
pub unsafe fn log_mut<'a>(value: *mut c_void) -> Option<&'a mut Log> {
    (tag_of(value) == tag::SLIDING_LOG).then(|| unsafe { untagged::<Log>(value) })
}

/// The leases a value holds, to change in place.
///
/// # Safety
/// As `view`.
pub unsafe fn leases_mut<'a>(value: *mut c_void) -> Option<&'a mut Leases> {
    if tag_of(value) != tag::OTHER {
        return None;
    }
    match unsafe { untagged::<Other>(value) } {
        Other::Concurrency(leases) => Some(leases),
        _ => None,
    }
}

pub static RATELIMIT_TYPE: RedisType = RedisType::new(
    "ratelimit",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    let value = unsafe { view(value) };
    let record = encode(&value);
    raw::save_unsigned(rdb, record.kind);
    for field in record.fields {
        raw::save_unsigned(rdb, field);
    }
    if let Some(runs) = record.runs {
        raw::save_slice(rdb, &runs);
    }
}

/// Reads a value; anything short, or not what `rdb_save` writes for a
/// state some call could have stored, loads as nothing: an error for
/// RESTORE ("Bad data format") and for loading a file.
unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let load = || raw::load_unsigned(rdb).ok();
    let loaded = (|| {
        let kind = load()?;
        let (count, has_runs) = layout(encver, kind)?;
        let fields = (0..count).map(|_| load()).collect::<Option<Vec<u64>>>()?;
        let buffer = if has_runs { Some(raw::load_string_buffer(rdb).ok()?) } else { None };
        let runs = buffer.as_ref().map(|b| Cow::Borrowed(b.as_ref()));
        let record = Record { kind, fields, runs };
        decode(encver, &record).map(into_value)
    })();
    loaded.unwrap_or(std::ptr::null_mut())
}

/// Leases per command in an AOF rewrite: one key's commands stay small
/// however many leases it holds.
const LEASES_PER_COMMAND: usize = 64;

/// Emits `RL.SETSTATE key KIND field...`; Redis adds the expiry itself.
/// Leases go as an RL.SETSTATE of the first ones and an RL.LEASEAPPLY
/// `ACQUIRE` for each further group, so no command grows with the key.
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let value = unsafe { view(value) };
    let Value::Leases(leases) = value else {
        return unsafe { emit(aof, c"RL.SETSTATE", key, &setstate_args(value)) };
    };
    let mut groups = leases.held.chunks(LEASES_PER_COMMAND);
    let first = groups.next().unwrap_or_default();
    unsafe { emit(aof, c"RL.SETSTATE", key, &leases_args(leases, first)) };
    for group in groups {
        for lease in group {
            let fields = [leases.last_us, lease.id, lease.expires_us, lease.n];
            let args: Vec<String> = std::iter::once("ACQUIRE".to_owned())
                .chain(fields.iter().map(u64::to_string))
                .collect();
            unsafe { emit(aof, c"RL.LEASEAPPLY", key, &args) };
        }
    }
}

/// Emits `command key args...` into a rewritten AOF.
///
/// # Safety
/// `aof` and `key` are what Redis passed to `aof_rewrite`.
unsafe fn emit(
    aof: *mut raw::RedisModuleIO,
    command: &CStr,
    key: *mut raw::RedisModuleString,
    args: &[String],
) {
    let args: Vec<*mut raw::RedisModuleString> = args
        .iter()
        .map(|arg| unsafe {
            raw::RedisModule_CreateString.unwrap()(
                std::ptr::null_mut(),
                arg.as_ptr().cast(),
                arg.len(),
            )
        })
        .collect();
    // The key Redis passes lives on its stack: it must go as 's', which
    // copies such a string, and not inside the 'v' vector, which retains.
    unsafe {
        raw::RedisModule_EmitAOF.unwrap()(
            aof,
            command.as_ptr(),
            c"sv".as_ptr(),
            key,
            args.as_ptr(),
            args.len(),
        );
        for arg in args {
            raw::RedisModule_FreeString.unwrap()(std::ptr::null_mut(), arg);
        }
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    match tag_of(value) {
        tag::TOKEN_BUCKET | tag::LEAKY_BUCKET => size_of::<Narrow>(),
        tag::FIXED_WINDOW => size_of::<fixed_window::State>(),
        tag::SLIDING_WINDOW => size_of::<sliding_window::State>(),
        tag::THROTTLE => size_of::<gcra::State>(),
        tag::SLIDING_LOG => size_of::<Log>() + unsafe { untagged::<Log>(value) }.heap_bytes(),
        _ => size_of::<Other>() + unsafe { untagged::<Other>(value) }.heap_bytes(),
    }
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    for arg in setstate_args(unsafe { view(value) }) {
        unsafe {
            raw::RedisModule_DigestAddStringBuffer.unwrap()(md, arg.as_ptr().cast(), arg.len())
        };
    }
    unsafe { raw::RedisModule_DigestEndSequence.unwrap()(md) };
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    into_value(match unsafe { view(value) } {
        Value::Fixed(fixed) => Owned::Fixed(fixed),
        Value::Log(log) => Owned::Log(log.clone()),
        Value::Leases(leases) => Owned::Leases(leases.clone()),
    })
}

unsafe extern "C" fn free(value: *mut c_void) {
    stats::value_freed();
    let address = value.map_addr(|address| address & !tag::BITS);
    match tag_of(value) {
        tag::TOKEN_BUCKET | tag::LEAKY_BUCKET => {
            drop(unsafe { Box::from_raw(address.cast::<Narrow>()) })
        }
        tag::FIXED_WINDOW => drop(unsafe { Box::from_raw(address.cast::<fixed_window::State>()) }),
        tag::SLIDING_WINDOW => {
            drop(unsafe { Box::from_raw(address.cast::<sliding_window::State>()) })
        }
        tag::THROTTLE => drop(unsafe { Box::from_raw(address.cast::<gcra::State>()) }),
        tag::SLIDING_LOG => drop(unsafe { Box::from_raw(address.cast::<Log>()) }),
        _ => drop(unsafe { Box::from_raw(address.cast::<Other>()) }),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::rdb_kind::*;
    use super::*;
    use crate::algorithms::{MAX_TIME_US, MAX_UNITS, PICO_PER_UNIT};

    const MAX_PICO: u128 = MAX_UNITS as u128 * PICO_PER_UNIT;

    fn round_trip(owned: &Owned) -> Option<Owned> {
        decode(ENCODING_VERSION, &encode(&owned.view()))
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
        assert_eq!(encode(&Value::Fixed(narrow)).kind, TOKEN_BUCKET);
        let wide = Fixed::LeakyBucket(leaky_bucket::State {
            level: 18_446_745 * PICO_PER_UNIT,
            last_us: 1,
        });
        let record = encode(&Value::Fixed(wide));
        assert_eq!((record.kind, record.fields.len()), (WIDE_LEAKY_BUCKET, 3));
        assert_eq!(size_of::<Narrow>(), 16);
        // A wide record under an older encoding could not have been written.
        assert_eq!(decode(2, &record), None);
        assert_eq!(decode(3, &record), Some(Owned::Fixed(wide)));
        // Nor any record under an encoding yet to come.
        let narrow = encode(&Value::Fixed(narrow));
        assert_eq!(decode(0, &narrow), None);
        assert_eq!(decode(ENCODING_VERSION + 1, &narrow), None);
        assert!(decode(4, &narrow).is_some());
        assert!(decode(1, &narrow).is_some());
    }

    #[test]
    fn throttle_state_is_one_word_of_kind_0() {
        let tat_ns = 1_700_000_000_123_456_789;
        let fixed = Fixed::Throttle(gcra::State { tat_ns });
        let record = encode(&Value::Fixed(fixed));
        assert_eq!((record.kind, &record.fields[..]), (THROTTLE, &[tat_ns][..]));
        assert_eq!(decode(3, &record), Some(Owned::Fixed(fixed)));
        assert_eq!(decode(2, &record), None);
        assert_eq!(size_of::<gcra::State>(), 8);
        let throttle = |fields: &[u128]| Owned::from_setstate(b"throttle", fields);
        assert_eq!(throttle(&[tat_ns.into()]), Some(Owned::Fixed(fixed)));
        assert_eq!(throttle(&[999]), None);
        assert_eq!(throttle(&[1 << 64]), None);
        assert_eq!(throttle(&[1000, 1]), None);
        assert_eq!(setstate_args(Value::Fixed(fixed)), ["THROTTLE", "1700000000123456789"]);
    }

    #[test]
    fn logs_round_trip_and_bad_ones_are_refused() {
        let log = Log::from_runs([(5, 2), (7, 1)]).unwrap();
        assert_eq!(round_trip(&Owned::Log(log.clone())), Some(Owned::Log(log.clone())));
        assert_eq!(round_trip(&Owned::Log(Log::default())), Some(Owned::Log(Log::default())));
        let mut record = encode(&Value::Log(&log));
        record.fields[2] += 1;
        assert_eq!(decode(3, &record), None);
        record.runs = None;
        assert_eq!(decode(3, &record), None);
    }

    #[test]
    fn leases_round_trip_in_rdb_and_setstate() {
        let held = vec![
            Lease { id: 2, expires_us: 1_700_000_030_000_000, n: 3 },
            Lease { id: 7, expires_us: 1_700_000_001_000_000, n: 1 },
        ];
        let leases = Leases { last_us: 1_700_000_000_000_000, next_id: 8, held };
        let owned = Owned::Leases(leases.clone());
        assert_eq!(round_trip(&owned), Some(owned.clone()));
        let record = encode(&owned.view());
        assert_eq!((record.kind, &record.fields[..]), (CONCURRENCY, &[leases.last_us, 8, 2][..]));
        assert_eq!(decode(3, &record), None, "no leases before encoding 4");
        let args = setstate_args(owned.view());
        assert_eq!(args[..3], ["CONCURRENCY", "1700000000000000", "8"]);
        let fields: Vec<u128> = args[1..].iter().map(|f| f.parse().unwrap()).collect();
        assert_eq!(Owned::from_setstate(b"concurrency", &fields), Some(owned));
        assert_eq!(Owned::from_setstate(b"CONCURRENCY", &fields[..fields.len() - 1]), None);
        assert_eq!(Owned::from_setstate(b"CONCURRENCY", &fields[..2]), None, "no lease, no key");
        let mut late = fields.clone();
        late[0] = 1_700_000_001_000_000;
        assert_eq!(Owned::from_setstate(b"CONCURRENCY", &late), None, "a lease that ran out");
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
                prop_assert_eq!(encode(&owned.view()), record);
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
                prop_assert_eq!(encode(&owned.view()), record);
            }
        }
    }
}
