//! The `ratelimit` data type: one value per key, holding one limiter's state.
//! Encoding, RDB save/load, AOF rewrite, memory usage, digest, copy, free.
//!
//! The value Redis keeps is a pointer to the algorithm's own state type,
//! with the algorithm's kind (1 to 5) in the pointer's three low bits, which
//! are free since every state is 8-aligned. So a token bucket costs its
//! 16 bytes, with no tag word beside them.

use std::ffi::{CStr, CString, c_int, c_void};
use std::mem::{align_of, size_of};

use redis_module::native_types::RedisType;
use redis_module::raw;

use crate::algorithms::{fixed_window, leaky_bucket, sliding_log, sliding_window, token_bucket};
use crate::stats;

/// RDB encoding version. Version 1 held only token buckets; version 2 adds
/// the other kinds. Both are a kind tag, then the kind's fields.
const ENCODING_VERSION: i32 = 2;

const KIND_BITS: usize = 0b111;

/// A state type that a key can hold.
pub trait Stored: Sized + 'static {
    /// Its tag, in the value pointer and in RDB.
    const KIND: usize;
    /// Its name in RL.SETSTATE.
    const NAME: &'static CStr;
}

/// The states made of a few integers: every kind but the sliding log.
pub trait Fields: Stored + Copy {
    const COUNT: usize;
    fn to_fields(&self) -> [u64; 3];
    fn from_fields(fields: [u64; 3]) -> Self;
}

macro_rules! fields {
    ($type:ty, $kind:expr, $name:expr, [$($field:ident),+]) => {
        impl Stored for $type {
            const KIND: usize = $kind;
            const NAME: &'static CStr = $name;
        }
        impl Fields for $type {
            const COUNT: usize = [$(stringify!($field)),+].len();
            fn to_fields(&self) -> [u64; 3] {
                let mut fields = [0; 3];
                for (slot, value) in fields.iter_mut().zip([$(self.$field),+]) {
                    *slot = value;
                }
                fields
            }
            fn from_fields(fields: [u64; 3]) -> Self {
                let mut values = fields.into_iter();
                Self { $($field: values.next().unwrap_or(0)),+ }
            }
        }
    };
}

fields!(token_bucket::State, 1, c"TOKENBUCKET", [tokens, last_us]);
fields!(leaky_bucket::State, 2, c"LEAKYBUCKET", [level, last_us]);
fields!(fixed_window::State, 3, c"FIXEDWINDOW", [last_us, count]);
fields!(sliding_window::State, 4, c"SLIDINGWINDOW", [last_us, previous, current]);

impl Stored for sliding_log::Log {
    const KIND: usize = 5;
    const NAME: &'static CStr = c"SLIDINGLOG";
}

/// Calls `$body` with `$T` the state type of kind `$kind` for the four kinds
/// made of fields; else gives `$other`, which handles the sliding log, the
/// only other kind a value made by `into_value` can have.
macro_rules! with_kind {
    ($kind:expr, $T:ident => $body:expr, $other:expr) => {
        match $kind {
            <token_bucket::State as Stored>::KIND => {
                type $T = token_bucket::State;
                $body
            }
            <leaky_bucket::State as Stored>::KIND => {
                type $T = leaky_bucket::State;
                $body
            }
            <fixed_window::State as Stored>::KIND => {
                type $T = fixed_window::State;
                $body
            }
            <sliding_window::State as Stored>::KIND => {
                type $T = sliding_window::State;
                $body
            }
            _ => $other,
        }
    };
}

pub fn into_value<T: Stored>(state: T) -> *mut c_void {
    const { assert!(align_of::<T>() >= 8) };
    stats::value_created();
    Box::into_raw(Box::new(state)).map_addr(|address| address | T::KIND).cast()
}

fn kind_of(value: *const c_void) -> usize {
    value.addr() & KIND_BITS
}

/// # Safety
/// `value` came from `into_value` and is still alive.
pub unsafe fn state_mut<'a, T: Stored>(value: *mut c_void) -> Option<&'a mut T> {
    let state = value.map_addr(|address| address & !KIND_BITS).cast::<T>();
    (kind_of(value) == T::KIND).then(|| unsafe { &mut *state })
}

/// # Safety
/// As `state_mut`, and `T::KIND` is the value's kind.
unsafe fn state_ref<'a, T: Stored>(value: *const c_void) -> &'a T {
    unsafe { &*value.map_addr(|address| address & !KIND_BITS).cast::<T>() }
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
    let kind = kind_of(value);
    raw::save_unsigned(rdb, kind as u64);
    with_kind!(kind, T => {
        let state = unsafe { state_ref::<T>(value) };
        for field in &state.to_fields()[..T::COUNT] {
            raw::save_unsigned(rdb, *field);
        }
    }, {
        let log = unsafe { state_ref::<sliding_log::Log>(value) };
        for field in [log.first_us, log.last_us, log.total] {
            raw::save_unsigned(rdb, field);
        }
        raw::save_slice(rdb, &log.runs);
    })
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if !(1..=ENCODING_VERSION).contains(&encver) {
        return std::ptr::null_mut();
    }
    let load = |rdb| raw::load_unsigned(rdb).ok();
    let loaded = (|| {
        let kind = usize::try_from(load(rdb)?).ok()?;
        with_kind!(kind, T => {
            let mut fields = [0; 3];
            for field in &mut fields[..T::COUNT] {
                *field = load(rdb)?;
            }
            Some(into_value(T::from_fields(fields)))
        }, {
            if kind != sliding_log::Log::KIND {
                return None;
            }
            let (first_us, last_us, total) = (load(rdb)?, load(rdb)?, load(rdb)?);
            let runs = raw::load_string_buffer(rdb).ok()?.as_ref().to_vec();
            let stored = sliding_log::Log { first_us, last_us, total, runs };
            // Rebuilt from its runs, so a log that does not add up is refused.
            let log = sliding_log::Log::from_runs(stored.runs())?;
            (log.total == total && log.last_us == last_us).then(|| into_value(log))
        })
    })();
    loaded.unwrap_or(std::ptr::null_mut())
}

/// The arguments after the key of the RL.SETSTATE that recreates `value`.
pub fn setstate_args(value: *const c_void) -> Vec<CString> {
    let number = |n: u64| CString::new(n.to_string()).unwrap_or_default();
    let kind = kind_of(value);
    let mut args = Vec::new();
    with_kind!(kind, T => {
        let state = unsafe { state_ref::<T>(value) };
        args.push(T::NAME.to_owned());
        args.extend(state.to_fields()[..T::COUNT].iter().map(|&f| number(f)));
    }, {
        let log = unsafe { state_ref::<sliding_log::Log>(value) };
        args.push(sliding_log::Log::NAME.to_owned());
        for (at_us, count) in log.runs() {
            args.extend([number(at_us), number(count)]);
        }
    });
    args
}

/// Emits `RL.SETSTATE key KIND field...`, one argument at a time; Redis adds
/// the expiry itself.
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let args = setstate_args(value);
    let args: Vec<*mut raw::RedisModuleString> = args
        .iter()
        .map(|arg| unsafe {
            raw::RedisModule_CreateString.unwrap()(
                std::ptr::null_mut(),
                arg.as_ptr(),
                arg.as_bytes().len(),
            )
        })
        .collect();
    // The key Redis passes lives on its stack: it must go as 's', which
    // copies such a string, and not inside the 'v' vector, which retains.
    unsafe {
        raw::RedisModule_EmitAOF.unwrap()(
            aof,
            c"RL.SETSTATE".as_ptr(),
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
    let kind = kind_of(value);
    with_kind!(kind, T => size_of::<T>(), {
        let log = unsafe { state_ref::<sliding_log::Log>(value) };
        size_of::<sliding_log::Log>() + log.heap_bytes()
    })
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    for arg in setstate_args(value) {
        let bytes = arg.as_bytes();
        unsafe {
            raw::RedisModule_DigestAddStringBuffer.unwrap()(md, bytes.as_ptr().cast(), bytes.len())
        };
    }
    unsafe { raw::RedisModule_DigestEndSequence.unwrap()(md) };
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    let kind = kind_of(value);
    with_kind!(kind, T => into_value(*unsafe { state_ref::<T>(value) }), {
        into_value(unsafe { state_ref::<sliding_log::Log>(value) }.clone())
    })
}

unsafe extern "C" fn free(value: *mut c_void) {
    stats::value_freed();
    let kind = kind_of(value);
    let address = value.map_addr(|address| address & !KIND_BITS);
    with_kind!(kind, T => drop(unsafe { Box::from_raw(address.cast::<T>()) }), {
        drop(unsafe { Box::from_raw(address.cast::<sliding_log::Log>()) })
    })
}
