//! The `ratelimit` data type: one value per key, holding one limiter's state.
//! Encoding, RDB save/load, AOF rewrite, memory usage, digest, copy, free.

use std::ffi::{CStr, CString, c_int, c_void};
use std::mem::size_of;

use redis_module::native_types::RedisType;
use redis_module::raw;

use crate::algorithms::token_bucket;

/// RDB encoding version. Version 1: a kind tag, then that kind's fields as
/// unsigned integers. A new algorithm adds a tag; a changed layout bumps this.
const ENCODING_VERSION: i32 = 1;

/// The state a key holds. Its tag in RDB is `Limiter::tag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limiter {
    TokenBucket(token_bucket::State),
}

impl Limiter {
    /// The name used in RL.SETSTATE and the tag used in RDB.
    pub const TOKEN_BUCKET: (&'static CStr, u64) = (c"TOKENBUCKET", 1);

    /// The values RL.SETSTATE and RDB carry after the kind, in order.
    pub fn fields(&self) -> [u64; 2] {
        match self {
            Limiter::TokenBucket(s) => [s.tokens, s.last_us],
        }
    }

    pub fn kind(&self) -> (&'static CStr, u64) {
        match self {
            Limiter::TokenBucket(_) => Self::TOKEN_BUCKET,
        }
    }

    /// Rebuilds a state from its kind tag and fields; `None` for an unknown tag.
    pub fn from_fields(tag: u64, fields: [u64; 2]) -> Option<Limiter> {
        let [tokens, last_us] = fields;
        (tag == Self::TOKEN_BUCKET.1).then_some(Limiter::TokenBucket(token_bucket::State {
            tokens,
            last_us,
        }))
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

/// # Safety
/// `value` is a pointer this module made with `Box::into_raw(Box<Limiter>)`.
unsafe fn limiter<'a>(value: *const c_void) -> &'a Limiter {
    unsafe { &*value.cast::<Limiter>() }
}

pub fn into_value(limiter: Limiter) -> *mut c_void {
    Box::into_raw(Box::new(limiter)).cast()
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    let limiter = unsafe { limiter(value) };
    raw::save_unsigned(rdb, limiter.kind().1);
    for field in limiter.fields() {
        raw::save_unsigned(rdb, field);
    }
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver != ENCODING_VERSION {
        return std::ptr::null_mut();
    }
    let loaded = (|| {
        let tag = raw::load_unsigned(rdb).ok()?;
        let fields = [raw::load_unsigned(rdb).ok()?, raw::load_unsigned(rdb).ok()?];
        Limiter::from_fields(tag, fields)
    })();
    loaded.map_or(std::ptr::null_mut(), into_value)
}

/// Emits `RL.SETSTATE key KIND field...`; Redis adds the expiry itself.
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let limiter = unsafe { limiter(value) };
    let kind = limiter.kind().0;
    // u64 fields may exceed a C long long, so they travel as decimal text.
    let [a, b] = limiter
        .fields()
        .map(|f| CString::new(f.to_string()).unwrap_or_default());
    unsafe {
        raw::RedisModule_EmitAOF.unwrap()(
            aof,
            c"RL.SETSTATE".as_ptr(),
            c"sccc".as_ptr(),
            key,
            kind.as_ptr(),
            a.as_ptr(),
            b.as_ptr(),
        );
    }
}

unsafe extern "C" fn mem_usage(_value: *const c_void) -> usize {
    size_of::<Limiter>()
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    let limiter = unsafe { limiter(value) };
    unsafe {
        raw::RedisModule_DigestAddLongLong.unwrap()(md, limiter.kind().1 as i64);
        for field in limiter.fields() {
            raw::RedisModule_DigestAddLongLong.unwrap()(md, field as i64);
        }
        raw::RedisModule_DigestEndSequence.unwrap()(md);
    }
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    into_value(*unsafe { limiter(value) })
}

unsafe extern "C" fn free(value: *mut c_void) {
    drop(unsafe { Box::from_raw(value.cast::<Limiter>()) });
}
