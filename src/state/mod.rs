//! The `ratelimit` data type: one value per key, holding one limiter's
//! state. By job:
//!
//! - `value`: the value model (`Fixed`, `Value`, `Owned`) and RL.SETSTATE's
//!   form of it;
//! - `rdb`: the RDB record and its encoding versions;
//! - `layout`: how a value sits in memory (`Stored`, a tagged word, and
//!   its shared and exclusive borrows);
//! - `compact`: the bytes of a short log or a few leases in that layout;
//! - `callbacks`: what Redis calls on a value (save, load, AOF rewrite,
//!   memory usage, digest, copy, defrag, free).

mod callbacks;
mod compact;
mod layout;
mod rdb;
mod value;

pub use callbacks::RATELIMIT_TYPE;
pub use layout::{Stored, StoredMut, StoredRef};
pub use value::{Fixed, Items, Owned, Value};
