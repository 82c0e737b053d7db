//! `RL.THROTTLE key max_burst count_per_period period [quantity]`, a
//! drop-in for redis-cell's `CL.THROTTLE` (and registered under that name
//! too when the module is loaded with the argument `CL.THROTTLE`): the
//! same arguments and reply, on the server's clock, with the effect
//! replicated as `RL.SETSTATE key THROTTLE tat_ns PXAT ms` (redis-cell
//! replicates the clock-reading call itself). The math is
//! `algorithms::gcra`; this is the glue.

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString, RedisValue, raw};

use crate::algorithms::MAX_UNITS;
use crate::algorithms::gcra::{self, OutOfRange};
use crate::clock;
use crate::commands::signal_modified;
use crate::error::Error;
use crate::key::LimiterKey;
use crate::replicate;
use crate::state::{Fixed, Value};
use crate::stats::Counters;

/// The name redis-cell registers, and the module argument that registers
/// it here as well.
pub const CELL_NAME: &CStr = c"CL.THROTTLE";

/// `RL.THROTTLE key max_burst count_per_period period [quantity]`:
/// `[limited, limit, remaining, retry_after_s, reset_after_s]`.
pub fn throttle(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    run(ctx, argv, counters).map(|()| RedisValue::NoReply).map_err(Error::into_redis)
}

fn run(ctx: &Context, argv: &[RedisString], counters: &Counters) -> Result<(), Error> {
    let [_, name, max_burst, count_per_period, period, rest @ ..] = argv else {
        return Err(Error::WrongArity);
    };
    let quantity = match rest {
        [] => 1,
        [quantity] => integer(quantity, 0, MAX_UNITS).ok_or(Error::Quantity)?,
        _ => return Err(Error::WrongArity),
    };
    let params = params(max_burst, count_per_period, period)?;
    let mut key = LimiterKey::open(ctx, name, true);
    let stored = match key.value()? {
        None => None,
        Some(Value::Fixed(Fixed::Throttle(state))) => Some(state),
        Some(_) => return Err(Error::WrongType),
    };
    let verdict = gcra::decide(stored, clock::now_ns(), &params, quantity);
    if let Some(state) = verdict.store {
        let fixed = Fixed::Throttle(state);
        let expire_at_ms = state.expire_at_ms();
        key.put(fixed)?;
        key.expire_at(Some(expire_at_ms));
        replicate::fields(ctx, name, &fixed, expire_at_ms);
        signal_modified(ctx, name, counters.event());
    }
    counters.record(!verdict.limited, quantity);
    let ctx = ctx.get_raw();
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    raw::reply_with_array(ctx, 5);
    raw::reply_with_long_long(ctx, i64::from(verdict.limited));
    raw::reply_with_long_long(ctx, int(verdict.limit));
    raw::reply_with_long_long(ctx, int(verdict.remaining));
    raw::reply_with_long_long(ctx, verdict.retry_after_s);
    raw::reply_with_long_long(ctx, int(verdict.reset_after_s));
    Ok(())
}

/// `max_burst count_per_period period`, each in its range, then the
/// emission interval and the tolerance they make.
fn params(max_burst: &[u8], count_per_period: &[u8], period: &[u8]) -> Result<gcra::Params, Error> {
    let max_burst = integer(max_burst, 0, MAX_UNITS - 1).ok_or(Error::MaxBurst)?;
    let count_per_period = integer(count_per_period, 1, MAX_UNITS).ok_or(Error::CountPerPeriod)?;
    let period = integer(period, 1, MAX_UNITS).ok_or(Error::Period)?;
    gcra::Params::new(max_burst, count_per_period, period).map_err(|out| match out {
        OutOfRange::EmissionInterval => Error::EmissionInterval,
        OutOfRange::Tolerance => Error::Tolerance,
    })
}

/// An integer written as redis-cell reads one (Rust's `i64::from_str`: an
/// optional `+` or `-`, then ASCII digits), when it lies in `min..=max`.
fn integer(arg: &[u8], min: u64, max: u64) -> Option<u64> {
    let (negative, digits) = match arg {
        [b'-', digits @ ..] => (true, digits),
        [b'+', digits @ ..] => (false, digits),
        digits => (false, digits),
    };
    let value = crate::args::integer(digits)?;
    (!(negative && value != 0) && (min..=max).contains(&value)).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_redis_cell_reads_them() {
        let any = |arg: &[u8]| integer(arg, 0, u64::MAX);
        assert_eq!(any(b"15"), Some(15));
        assert_eq!(any(b"+15"), Some(15));
        assert_eq!(any(b"-0"), Some(0));
        assert_eq!(any(b"007"), Some(7));
        assert_eq!(any(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"+",
            b"-",
            b"-1",
            b"+-1",
            b"--1",
            b" 1",
            b"1 ",
            b"1.0",
            b"1e3",
            b"0x10",
            b"\xff",
        ] {
            assert_eq!(any(bad), None, "{bad:?}");
        }
        assert_eq!(any(b"18446744073709551616"), None);
        assert_eq!(integer(b"0", 1, 10), None);
        assert_eq!(integer(b"11", 1, 10), None);
    }

    #[test]
    fn parameters_in_order_then_derived() {
        assert_eq!(
            params(b"15", b"30", b"60").map(|p| (p.emission_ns, p.limit)),
            Ok((2_000_000_000, 16))
        );
        assert_eq!(params(b"-1", b"30", b"60"), Err(Error::MaxBurst));
        assert_eq!(params(b"9007199254740991", b"1", b"1"), Err(Error::MaxBurst));
        assert_eq!(params(b"x", b"0", b"0"), Err(Error::MaxBurst));
        assert_eq!(params(b"1", b"0", b"0"), Err(Error::CountPerPeriod));
        assert_eq!(params(b"1", b"-30", b"60"), Err(Error::CountPerPeriod));
        assert_eq!(params(b"1", b"30", b"0"), Err(Error::Period));
        assert_eq!(params(b"1", b"30", b"-60"), Err(Error::Period));
        assert_eq!(params(b"1", b"1000001", b"1"), Err(Error::EmissionInterval));
        assert_eq!(params(b"0", b"1000000", b"1").map(|p| p.emission_ns), Ok(1000));
        assert_eq!(params(b"1000000000", b"1", b"1"), Err(Error::Tolerance));
    }
}
