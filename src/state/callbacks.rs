//! What Redis calls on a value of the data type: RDB save and load, AOF
//! rewrite, MEMORY USAGE, DEBUG DIGEST, COPY, active defrag and free.
//!
//! Every callback gets the word `Stored::into_raw` gave Redis (or, for
//! defrag, its address), and Redis runs one at a time on a value: the
//! main thread's, or a lazy-free thread's `free` of a value no key holds
//! any more.

use std::borrow::Cow;
use std::ffi::{CStr, c_int, c_void};

use redis_module::native_types::RedisType;
use redis_module::raw;

use super::layout::{Stored, StoredMut, StoredRef};
use super::rdb::{ENCODING_VERSION, Record, decode, encode, layout};
use super::value::setstate_commands;

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
        defrag: Some(defrag),
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

/// Writes the value's RDB record.
///
/// # Safety
/// Redis passes a live RDB handle and a value of this type, which nothing
/// changes during the call.
unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: a value of this type, Redis's for the call.
    let value = unsafe { StoredRef::new(value) }.view();
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
///
/// # Safety
/// Redis passes a live RDB handle positioned at one of our records, and the
/// encoding version it was written with.
unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let load = || raw::load_unsigned(rdb).ok();
    let loaded = (|| {
        let kind = load()?;
        let (count, has_runs) = layout(encver, kind)?;
        let fields = (0..count).map(|_| load()).collect::<Option<Vec<u64>>>()?;
        let buffer = if has_runs { Some(raw::load_string_buffer(rdb).ok()?) } else { None };
        let runs = buffer.as_ref().map(|b| Cow::Borrowed(b.as_ref()));
        let record = Record { kind, fields, runs };
        decode(encver, &record).map(|owned| Stored::new(owned).into_raw())
    })();
    loaded.unwrap_or(std::ptr::null_mut())
}

/// Emits the RL.SETSTATE commands that recreate the value (one, unless
/// it has many items); Redis adds the expiry itself, once.
///
/// # Safety
/// Redis passes a live AOF handle, the key's name and a value of this
/// type, which nothing changes during the call.
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: a value of this type, Redis's for the call.
    let value = unsafe { StoredRef::new(value) }.view();
    for args in setstate_commands(&value) {
        // SAFETY: `aof` and `key` are the ones Redis passed.
        unsafe { emit(aof, c"RL.SETSTATE", key, &args) };
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
        // SAFETY: a null context makes a string this function frees below;
        // the pointer and length are a live `String`'s.
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
    // SAFETY: the format string matches the arguments; the strings are
    // ours until freed here, after Redis has copied them.
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

/// MEMORY USAGE's bytes of the value (beyond Redis's own object).
///
/// # Safety
/// Redis passes a value of this type, which nothing changes during the call.
unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: a value of this type, Redis's for the call.
    unsafe { StoredRef::new(value) }.memory()
}

/// Digests the value's RDB record, the state's one canonical encoding: its
/// kind and integers, and a log's runs or the leases as one buffer, so a
/// long log costs one pass over its bytes and no copy.
///
/// # Safety
/// Redis passes a live digest and a value of this type, which nothing
/// changes during the call.
unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: a value of this type, Redis's for the call.
    let value = unsafe { StoredRef::new(value) }.view();
    let record = encode(&value);
    for field in std::iter::once(record.kind).chain(record.fields) {
        // Every field fits 64 bits; the digest mixes its bits as they are.
        // SAFETY: `md` is the digest Redis passed.
        unsafe { raw::RedisModule_DigestAddLongLong.unwrap()(md, field as i64) };
    }
    if let Some(runs) = record.runs {
        // SAFETY: `md` is the digest Redis passed; Redis only reads the
        // buffer, which lives through the call.
        unsafe {
            raw::RedisModule_DigestAddStringBuffer.unwrap()(
                md,
                runs.as_ptr().cast_mut().cast(),
                runs.len(),
            )
        };
    }
    // SAFETY: `md` is the digest Redis passed.
    unsafe { raw::RedisModule_DigestEndSequence.unwrap()(md) };
}

/// Active defrag: moves the value's allocations where the allocator asks,
/// as Redis moves its own types'. A value is a few allocations, so it is
/// done in one call (0).
///
/// # Safety
/// Redis passes a live defrag context and the address of the word it holds
/// for a value of this type, which nothing else uses during the call.
unsafe extern "C" fn defrag(
    ctx: *mut raw::RedisModuleDefragCtx,
    _key: *mut raw::RedisModuleString,
    value: *mut *mut c_void,
) -> c_int {
    // SAFETY: reading a function pointer Redis set at load.
    let Some(defrag_alloc) = (unsafe { raw::RedisModule_DefragAlloc }) else { return 0 };
    // The new place of an allocation, when the allocator moved it (and
    // freed the old one).
    // SAFETY: `ctx` is the context Redis passed; `at` is one of the
    // value's allocations, made by Redis's allocator.
    let moved = |at: *mut c_void| Some(unsafe { defrag_alloc(ctx, at) }).filter(|p| !p.is_null());
    // SAFETY: the word Redis holds for a value of this type, ours for the
    // call; a moved allocation's new word is written back into it.
    unsafe { StoredMut::new(&mut *value) }.defrag(moved);
    0
}

/// COPY's new value, the same state.
///
/// # Safety
/// Redis passes a value of this type, which nothing changes during the call.
unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: a value of this type, Redis's for the call.
    let owned = unsafe { StoredRef::new(value) }.view().into_owned();
    Stored::new(owned).into_raw()
}

/// Frees a value no key holds any more.
///
/// # Safety
/// Redis passes a value of this type that it gives up: nothing uses it
/// after the call.
unsafe extern "C" fn free(value: *mut c_void) {
    // SAFETY: the value is ours again, for good.
    drop(unsafe { Stored::from_raw(value) });
}
