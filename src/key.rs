//! A key opened for writing that holds (or will hold) a `ratelimit` value.

use redis_module::raw;
use redis_module::{Context, RedisString};

use crate::error::Error;
use crate::state::{RATELIMIT_TYPE, Stored, into_value, state_mut};

enum Slot {
    Empty,
    Ours(*mut std::ffi::c_void),
    Other,
}

pub struct LimiterKey {
    key: *mut raw::RedisModuleKey,
}

impl LimiterKey {
    pub fn open(ctx: &Context, name: &RedisString) -> LimiterKey {
        let mode = raw::KeyMode::READ | raw::KeyMode::WRITE;
        LimiterKey { key: raw::open_key(ctx.get_raw(), name.inner, mode) }
    }

    fn slot(&self) -> Slot {
        // SAFETY: `self.key` is an open key.
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
    /// another Redis type, another module's type or another algorithm.
    pub fn get<T: Stored>(&mut self) -> Result<Option<&mut T>, Error> {
        match self.slot() {
            Slot::Empty => Ok(None),
            // SAFETY: a value of our type came from `into_value`.
            Slot::Ours(value) => unsafe { state_mut::<T>(value) }.map(Some).ok_or(Error::WrongType),
            Slot::Other => Err(Error::WrongType),
        }
    }

    /// Stores `state`: in place when the key holds the same kind already,
    /// replacing the value when it holds another kind (RL.SETSTATE).
    pub fn put<T: Stored>(&mut self, state: T) -> Result<(), Error> {
        match self.slot() {
            Slot::Other => return Err(Error::WrongType),
            // SAFETY: a value of our type came from `into_value`.
            Slot::Ours(value) if let Some(stored) = unsafe { state_mut::<T>(value) } => {
                *stored = state;
            }
            Slot::Ours(_) | Slot::Empty => {
                let raw_type = *RATELIMIT_TYPE.raw_type.borrow();
                // SAFETY: the key is open for writing; Redis owns the value
                // now and frees the one it replaces.
                unsafe {
                    raw::RedisModule_ModuleTypeSetValue.unwrap()(
                        self.key,
                        raw_type,
                        into_value(state),
                    )
                };
            }
        }
        Ok(())
    }

    /// Sets the key to expire at `unix_ms`, or never when `None`.
    pub fn expire_at(&self, unix_ms: Option<u64>) {
        let at = unix_ms
            .map_or(raw::REDISMODULE_NO_EXPIRE.into(), |ms| i64::try_from(ms).unwrap_or(i64::MAX));
        // SAFETY: the key is open for writing and holds a value.
        unsafe { raw::RedisModule_SetAbsExpire.unwrap()(self.key, at) };
    }
}

impl Drop for LimiterKey {
    fn drop(&mut self) {
        raw::close_key(self.key);
    }
}
