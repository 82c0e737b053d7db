//! A key that holds (or will hold) a `ratelimit` value.

use std::ffi::c_void;

use redis_module::raw;
use redis_module::{Context, RedisString};

use crate::algorithms::concurrency::Leases;
use crate::algorithms::sliding_log::Log;
use crate::error::Error;
use crate::state::{self, Fixed, Owned, RATELIMIT_TYPE, Value};

enum Slot {
    Empty,
    Ours(*mut c_void),
    Other,
}

pub struct LimiterKey {
    key: *mut raw::RedisModuleKey,
}

impl LimiterKey {
    /// Opens `name` for reading, and for writing when `write`.
    pub fn open(ctx: &Context, name: &RedisString, write: bool) -> LimiterKey {
        let mode =
            if write { raw::KeyMode::READ | raw::KeyMode::WRITE } else { raw::KeyMode::READ };
        LimiterKey { key: raw::open_key(ctx.get_raw(), name.inner, mode) }
    }

    fn slot(&self) -> Slot {
        // SAFETY: `self.key` is an open key (or null for a missing key
        // opened read-only, which KeyType reports as empty).
        unsafe {
            match raw::RedisModule_KeyType.unwrap()(self.key) as isize {
                raw::REDISMODULE_KEYTYPE_EMPTY => Slot::Empty,
                raw::REDISMODULE_KEYTYPE_MODULE
                    if raw::RedisModule_ModuleTypeGetType.unwrap()(self.key)
                        == *RATELIMIT_TYPE.raw_type.borrow() =>
                {
                    Slot::Ours(raw::RedisModule_ModuleTypeGetValue.unwrap()(self.key))
                }
                _ => Slot::Other,
            }
        }
    }

    /// The stored state: `None` for a missing key, `WRONGTYPE` for a key of
    /// another Redis type or another module's type.
    pub fn value(&self) -> Result<Option<Value<'_>>, Error> {
        match self.slot() {
            Slot::Empty => Ok(None),
            // SAFETY: a value of our type came from `into_value`, and lives
            // while the key is open and unchanged (`&self`).
            Slot::Ours(value) => Ok(Some(unsafe { state::view(value) })),
            Slot::Other => Err(Error::WrongType),
        }
    }

    /// Stores a fixed state: in place when the value has its kind already.
    pub fn put(&mut self, fixed: Fixed) -> Result<(), Error> {
        match self.slot() {
            // SAFETY: a value of our type came from `into_value`.
            Slot::Ours(value) if unsafe { state::overwrite(value, fixed) } => Ok(()),
            _ => self.replace(Owned::Fixed(fixed)),
        }
    }

    /// Stores `owned` as a new value, freeing the one it replaces.
    pub fn replace(&mut self, owned: Owned) -> Result<(), Error> {
        if let Slot::Other = self.slot() {
            return Err(Error::WrongType);
        }
        let raw_type = *RATELIMIT_TYPE.raw_type.borrow();
        // SAFETY: the key is open for writing; Redis owns the value now.
        unsafe {
            raw::RedisModule_ModuleTypeSetValue.unwrap()(
                self.key,
                raw_type,
                state::into_value(owned),
            )
        };
        Ok(())
    }

    /// The stored sliding log, to change in place; an empty one when the
    /// key is missing (or holds another kind, which callers have refused).
    pub fn log_mut(&mut self) -> Result<&mut Log, Error> {
        // SAFETY: a value of our type came from `into_value`.
        let log = |slot| match slot {
            Slot::Ours(value) => unsafe { state::log_mut(value) },
            _ => None,
        };
        if log(self.slot()).is_none() {
            self.replace(Owned::Log(Log::default()))?;
        }
        log(self.slot()).ok_or(Error::WrongType)
    }

    /// The stored leases, to change in place; fresh ones when the key is
    /// missing (or holds another kind, which callers have refused).
    pub fn leases_mut(&mut self) -> Result<&mut Leases, Error> {
        // SAFETY: a value of our type came from `into_value`.
        let leases = |slot| match slot {
            Slot::Ours(value) => unsafe { state::leases_mut(value) },
            _ => None,
        };
        if leases(self.slot()).is_none() {
            self.replace(Owned::Leases(Leases::default()))?;
        }
        leases(self.slot()).ok_or(Error::WrongType)
    }

    /// Sets the key to expire at `unix_ms`, or never when `None`.
    pub fn expire_at(&self, unix_ms: Option<i64>) {
        let at = unix_ms.unwrap_or(raw::REDISMODULE_NO_EXPIRE.into());
        // SAFETY: the key is open for writing and holds a value.
        unsafe { raw::RedisModule_SetAbsExpire.unwrap()(self.key, at) };
    }

    pub fn delete(&self) {
        // SAFETY: the key is open for writing.
        unsafe { raw::RedisModule_DeleteKey.unwrap()(self.key) };
    }
}

impl Drop for LimiterKey {
    fn drop(&mut self) {
        raw::close_key(self.key);
    }
}
