//! Every way a command can fail, turned into a Redis error reply in one place.
//! The ranges in the messages are those of docs/commands.md.

use redis_module::RedisError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("wrong number of arguments")]
    WrongArity,
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR capacity must be an integer from 1 to 9007199254740991")]
    Capacity,
    #[error("ERR rate must be a decimal number of units per second from 0.000001 to 1000000000000")]
    Rate,
    #[error(
        "ERR capacity / rate must be at most 1000000000000 seconds (the time to refill or drain the whole bucket)"
    )]
    FillTime,
    #[error("ERR limit must be an integer from 1 to 9007199254740991")]
    Limit,
    #[error("ERR window must be a decimal number of seconds from 0.001 to 1000000000000")]
    Window,
    #[error("ERR now must be * or a decimal Unix time in seconds from 0 to 253402300799.999999")]
    Now,
    #[error("ERR n must be an integer from 0 to 9007199254740991")]
    Count,
    #[error(
        "ERR algorithm must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG or \
         CONCURRENCY"
    )]
    Algorithm,
    #[error("ERR lease must be a decimal number of seconds from 0.001 to 1000000000000")]
    Lease,
    #[error("ERR lease_id must be an integer from 0 to 9007199254740991")]
    LeaseId,
    #[error("ERR a concurrency limit takes no refund: release its lease with RL.RELEASE")]
    RefundConcurrency,
    #[error("ERR numkeys must be a positive integer")]
    NumKeys,
    #[error("ERR a key may appear only once")]
    RepeatedKey,
    #[error(
        "ERR state must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG, \
         THROTTLE or CONCURRENCY, fields that a command could have stored, and optionally PXAT unix_ms"
    )]
    State,
    #[error(
        "ERR change must be APPEND cutoff_us at_us n or REMOVE cutoff_us n, then PXAT unix_ms, \
         leaving a log that a command could have stored"
    )]
    LogChange,
    #[error(
        "ERR change must be ACQUIRE at_us id expires_us n, RELEASE at_us id or RENEW at_us id \
         expires_us, then optionally PXAT unix_ms, one that a command could have made"
    )]
    LeaseChange,
    #[error("ERR max_burst must be an integer from 0 to 9007199254740990")]
    MaxBurst,
    #[error("ERR count_per_period must be an integer from 1 to 9007199254740991")]
    CountPerPeriod,
    #[error("ERR period must be an integer number of seconds from 1 to 9007199254740991")]
    Period,
    #[error("ERR quantity must be an integer from 0 to 9007199254740991")]
    Quantity,
    #[error(
        "ERR count_per_period must be at most 1000000 per second of period \
         (an emission interval of at least 1 microsecond)"
    )]
    EmissionInterval,
    #[error(
        "ERR max_burst is too large for the rate: (max_burst + 1) * period / count_per_period \
         must be at most 1000000000 seconds"
    )]
    Tolerance,
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

#[cfg(test)]
mod tests {
    use super::Error;
    use crate::algorithms::gcra::{MAX_TOLERANCE_NS, MIN_EMISSION_NS, SECOND_NS};
    use crate::algorithms::{MAX_SPAN_US, MAX_TIME_US, MAX_UNITS};

    /// The messages spell out the ranges the parser checks.
    #[test]
    fn messages_state_the_ranges() {
        let max = MAX_UNITS.to_string();
        assert!(Error::Capacity.to_string().ends_with(&max));
        assert!(Error::Limit.to_string().ends_with(&max));
        assert!(Error::Count.to_string().ends_with(&max));
        assert!(Error::Window.to_string().ends_with(&(MAX_SPAN_US / 1_000_000).to_string()));
        assert!(Error::Lease.to_string().ends_with(&(MAX_SPAN_US / 1_000_000).to_string()));
        assert!(Error::LeaseId.to_string().ends_with(&max));
        let latest = format!("{}.{}", MAX_TIME_US / 1_000_000, MAX_TIME_US % 1_000_000);
        assert!(Error::Now.to_string().ends_with(&latest));
        assert!(Error::MaxBurst.to_string().ends_with(&(MAX_UNITS - 1).to_string()));
        assert!(Error::CountPerPeriod.to_string().ends_with(&max));
        assert!(Error::Period.to_string().ends_with(&max));
        assert!(Error::Quantity.to_string().ends_with(&max));
        let per_second = SECOND_NS / MIN_EMISSION_NS;
        assert!(Error::EmissionInterval.to_string().contains(&format!("at most {per_second} per")));
        let tolerance = (MAX_TOLERANCE_NS / SECOND_NS).to_string();
        assert!(Error::Tolerance.to_string().contains(&format!("at most {tolerance} seconds")));
    }
}
