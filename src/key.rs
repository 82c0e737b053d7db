//! A key opened for writing that holds (or will hold) a `ratelimit` value.

use std::ffi::c_void;

use redis_module::raw;
use redis_module::{Context, RedisString};

use crate::error::Error;
use crate::state::{Limiter, RATELIMIT_TYPE, into_value};

pub struct LimiterKey {
    key: *mut raw::RedisModuleKey,
}

impl LimiterKey {
    pub fn open(ctx: &Context, name: &RedisString) -> LimiterKey {
        let mode = raw::KeyMode::READ | raw::KeyMode::WRITE;
        LimiterKey {
            key: raw::open_key(ctx.get_raw(), name.inner, mode),
        }
    }

    /// The stored state: `None` for a missing key, `WRONGTYPE` for a key of
    /// another Redis type or another module's type.
    pub fn get(&self) -> Result<Option<&mut Limiter>, Error> {
        // SAFETY: `self.key` is an open key; a value of our type is a Box<Limiter>.
        unsafe {
            match raw::RedisModule_KeyType.unwrap()(self.key) as isize {
                raw::REDISMODULE_KEYTYPE_EMPTY => Ok(None),
                raw::REDISMODULE_KEYTYPE_MODULE
                    if raw::RedisModule_ModuleTypeGetType.unwrap()(self.key)
                        == *RATELIMIT_TYPE.raw_type.borrow() =>
                {
                    let value = raw::RedisModule_ModuleTypeGetValue.unwrap()(self.key);
                    Ok(value.cast::<Limiter>().as_mut())
                }
                _ => Err(Error::WrongType),
            }
        }
    }

    /// Stores `limiter`, updating the existing value in place when there is one.
    pub fn put(&self, limiter: Limiter) -> Result<(), Error> {
        if let Some(stored) = self.get()? {
            *stored = limiter;
            return Ok(());
        }
        let raw_type = *RATELIMIT_TYPE.raw_type.borrow();
        let value: *mut c_void = into_value(limiter);
        // SAFETY: the key is open for writing and empty; Redis owns `value` now.
        unsafe { raw::RedisModule_ModuleTypeSetValue.unwrap()(self.key, raw_type, value) };
        Ok(())
    }

    /// Sets the key to expire at `unix_ms`, or never when `None`.
    pub fn expire_at(&self, unix_ms: Option<u64>) {
        let at = unix_ms.map_or(raw::REDISMODULE_NO_EXPIRE.into(), |ms| {
            i64::try_from(ms).unwrap_or(i64::MAX)
        });
        // SAFETY: the key is open for writing and holds a value.
        unsafe { raw::RedisModule_SetAbsExpire.unwrap()(self.key, at) };
    }
}

impl Drop for LimiterKey {
    fn drop(&mut self) {
        raw::close_key(self.key);
    }
}
