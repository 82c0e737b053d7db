//! Every way a command can fail, turned into a Redis error reply in one place.

use redis_module::RedisError;

use crate::algorithms::token_bucket::MAX_CAPACITY;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("wrong number of arguments")]
    WrongArity,
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR capacity must be an integer from 1 to {MAX_CAPACITY}")]
    Capacity,
    #[error("ERR rate must be a decimal number of units per second, at least 0.000001")]
    Rate,
    #[error("ERR now must be * or a non-negative decimal Unix time in seconds")]
    Now,
    #[error("ERR limit must be a positive integer")]
    Limit,
    #[error("ERR window must be a decimal number of seconds, at least 0.001")]
    Window,
    #[error("ERR n must be a non-negative integer")]
    Count,
    #[error(
        "ERR state must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW or SLIDINGLOG, \
         its fields, and optionally PXAT unix_ms"
    )]
    State,
}

impl Error {
    pub fn into_redis(self) -> RedisError {
        match self {
            // Redis's own wording: "wrong number of arguments for '...' command".
            Error::WrongArity => RedisError::WrongArity,
            other => RedisError::String(other.to_string()),
        }
    }
}
