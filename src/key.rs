//! A key that holds (or will hold) a `ratelimit` value.

use std::ffi::c_void;

use redis_module::raw;
use redis_module::{Context, RedisString};

use crate::algorithms::concurrency::Leases;
use crate::algorithms::sliding_log::Log;
use crate::error::Error;
use crate::state::{Fixed, Items, Owned, RATELIMIT_TYPE, Stored, StoredMut, StoredRef, Value};

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
            // SAFETY: a value of our type came from `Stored::into_raw`, and
            // lives unchanged while the key is open and borrowed (`&self`).
            Slot::Ours(word) => Ok(Some(unsafe { StoredRef::new(word) }.view())),
            Slot::Other => Err(Error::WrongType),
        }
    }

    /// Runs `change` on the value the key holds, when it is of our type,
    /// and gives Redis the value's new word when the change made one.
    fn change<R>(&mut self, change: impl FnOnce(&mut StoredMut) -> R) -> Option<R> {
        let Slot::Ours(word) = self.slot() else { return None };
        let mut new = word;
        // SAFETY: a value of our type came from `Stored::into_raw`; the key
        // is open for writing and borrowed exclusively (`&mut self`), so
        // nothing else reads or changes it during the change.
        let result = change(&mut unsafe { StoredMut::new(&mut new) });
        if new != word {
            let (raw_type, mut old) = (*RATELIMIT_TYPE.raw_type.borrow(), std::ptr::null_mut());
            // SAFETY: the key is open for writing and holds a value of our
            // type, so the call cannot fail; the old word was freed by the
            // change already, so Redis hands it back to be dropped, not freed.
            unsafe {
                raw::RedisModule_ModuleTypeReplaceValue.unwrap()(self.key, raw_type, new, &mut old)
            };
        }
        Some(result)
    }

    /// Stores a fixed state: in place when the value has its layout.
    pub fn put(&mut self, fixed: Fixed) -> Result<(), Error> {
        match self.change(|value| value.put(fixed)) {
            Some(()) => Ok(()),
            None => self.replace(Owned::Fixed(fixed)),
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
                Stored::new(owned).into_raw(),
            )
        };
        Ok(())
    }

    /// Adds a log's runs or leases to the stored state (RL.SETSTATE's
    /// `APPEND`): `ERR` unless the key holds that kind and takes them.
    pub fn append(&mut self, kind: &[u8], fields: &[u128]) -> Result<(), Error> {
        if let Slot::Other = self.slot() {
            return Err(Error::WrongType);
        }
        let items = Items::from_setstate(kind, fields).ok_or(Error::State)?;
        match self.change(|value| value.append(items)) {
            Some(true) => Ok(()),
            _ => Err(Error::State),
        }
    }

    /// Whether the key holds a value of our type that `test` takes:
    /// `WRONGTYPE` for a key of another type.
    fn holds(&self, test: impl FnOnce(StoredRef) -> bool) -> Result<bool, Error> {
        match self.slot() {
            Slot::Empty => Ok(false),
            // SAFETY: a value of our type came from `Stored::into_raw`, and
            // lives unchanged while the key is open and borrowed (`&self`).
            Slot::Ours(word) => Ok(test(unsafe { StoredRef::new(word) })),
            Slot::Other => Err(Error::WrongType),
        }
    }

    /// Runs `change` on the stored sliding log; on an empty one when the
    /// key is missing (or holds another kind, which callers have refused).
    pub fn change_log<R>(&mut self, change: impl FnOnce(&mut Log) -> R) -> Result<R, Error> {
        if !self.holds(|value| value.holds_log())? {
            self.replace(Owned::Log(Log::default()))?;
        }
        self.change(|value| value.change_log(change)).flatten().ok_or(Error::WrongType)
    }

    /// Runs `change` on the stored leases; on fresh ones when the key is
    /// missing (or holds another kind, which callers have refused).
    pub fn change_leases<R>(&mut self, change: impl FnOnce(&mut Leases) -> R) -> Result<R, Error> {
        if !self.holds(|value| value.holds_leases())? {
            self.replace(Owned::Leases(Leases::default()))?;
        }
        self.change(|value| value.change_leases(change)).flatten().ok_or(Error::WrongType)
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
