//! Parsing and validation of command arguments. Numbers are parsed from the
//! raw bytes, exactly: no float ever stands between the text and the integer.

use std::ops::Deref;

use crate::algorithms::token_bucket::MAX_CAPACITY;
use crate::algorithms::{fixed_window, token_bucket};
use crate::error::Error;

/// Microseconds per second: `now`, `rate` and `window` are read to six decimals.
const MICRO: u64 = 1_000_000;

/// The time of a call: given by the caller, or the server's clock (`*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    Server,
    At { us: u64 },
}

/// The arguments after the key: `capacity rate now [n]` or `limit window now [n]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<P> {
    pub params: P,
    /// The capacity or limit, the reply's third field.
    pub limit: u64,
    pub now: Now,
    pub n: u64,
}

/// `capacity rate now [n]`, for the token and leaky buckets.
pub fn bucket_call<A: Deref<Target = [u8]>>(
    args: &[A],
) -> Result<Call<token_bucket::Params>, Error> {
    let ([capacity, rate], now, n) = split(args)?;
    let capacity =
        integer(capacity).filter(|c| (1..=MAX_CAPACITY).contains(c)).ok_or(Error::Capacity)?;
    let refill_per_us = micros(rate).filter(|&r| r > 0).ok_or(Error::Rate)?;
    let params = token_bucket::Params { capacity, refill_per_us };
    Ok(Call { params, limit: capacity, now: self::now(now)?, n: count(n)? })
}

/// `limit window now [n]`, for the three window algorithms.
pub fn window_call<A: Deref<Target = [u8]>>(
    args: &[A],
) -> Result<Call<fixed_window::Params>, Error> {
    let ([limit, window], now, n) = split(args)?;
    let limit = integer(limit).filter(|&l| l > 0).ok_or(Error::Limit)?;
    let window_us = micros(window).filter(|&w| w >= 1000).ok_or(Error::Window)?;
    let params = fixed_window::Params { limit, window_us };
    Ok(Call { params, limit, now: self::now(now)?, n: count(n)? })
}

/// The two parameters, `now` and an optional `n`.
type Split<'a> = ([&'a [u8]; 2], &'a [u8], Option<&'a [u8]>);

/// Splits the arguments after the key; 3 or 4 of them, else wrong arity.
fn split<A: Deref<Target = [u8]>>(args: &[A]) -> Result<Split<'_>, Error> {
    match args {
        [a, b, now] => Ok(([a, b], now, None)),
        [a, b, now, n] => Ok(([a, b], now, Some(n))),
        _ => Err(Error::WrongArity),
    }
}

fn count(n: Option<&[u8]>) -> Result<u64, Error> {
    n.map_or(Some(1), integer).ok_or(Error::Count)
}

pub fn now(arg: &[u8]) -> Result<Now, Error> {
    if arg == b"*" {
        return Ok(Now::Server);
    }
    micros(arg).map(|us| Now::At { us }).ok_or(Error::Now)
}

/// RL.SETSTATE's arguments after the kind: integer fields, then optionally
/// `PXAT unix_ms`.
pub fn state_fields<A: Deref<Target = [u8]>>(args: &[A]) -> Result<(Vec<u64>, Option<u64>), Error> {
    let (fields, expire_at) = match args {
        [fields @ .., pxat, ms] if pxat.eq_ignore_ascii_case(b"PXAT") => {
            (fields, Some(integer(ms).ok_or(Error::State)?))
        }
        fields => (fields, None),
    };
    let fields = fields.iter().map(|f| integer(f)).collect::<Option<Vec<_>>>();
    Ok((fields.ok_or(Error::State)?, expire_at))
}

/// A non-negative decimal integer of plain ASCII digits.
pub fn integer(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() || arg.len() > 20 {
        return None;
    }
    arg.iter().try_fold(0u64, |acc, &b| {
        let digit = char::from(b).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// A non-negative decimal (`12`, `0.5`, `.25`, `3.`) in millionths, rounded
/// half up at the seventh decimal.
pub fn micros(arg: &[u8]) -> Option<u64> {
    let (whole, fraction) = match arg.iter().position(|&b| b == b'.') {
        Some(dot) => (&arg[..dot], &arg[dot + 1..]),
        None => (arg, &[][..]),
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole = if whole.is_empty() { 0 } else { integer(whole)? };
    if !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut millionths = 0u64;
    for position in 0..6 {
        let digit = fraction.get(position).map_or(0, |d| u64::from(d - b'0'));
        millionths = millionths * 10 + digit;
    }
    let round_up = fraction.get(6).is_some_and(|&d| d >= b'5');
    whole.checked_mul(MICRO)?.checked_add(millionths + u64::from(round_up))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(integer(b"0"), Some(0));
        assert_eq!(integer(b"18446744073709551615"), Some(u64::MAX));
        for bad in [&b""[..], b"18446744073709551616", b"-1", b"+1", b"1.0", b" 1", b"1e3", b"\xff"]
        {
            assert_eq!(integer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn decimals_in_millionths() {
        assert_eq!(micros(b"1700000000.25"), Some(1_700_000_000_250_000));
        assert_eq!(micros(b"1700000000.123456"), Some(1_700_000_000_123_456));
        assert_eq!(micros(b"0.0000005"), Some(1));
        assert_eq!(micros(b"0.0000004999"), Some(0));
        assert_eq!(micros(b".5"), Some(500_000));
        assert_eq!(micros(b"3."), Some(3_000_000));
        assert_eq!(micros(b"0.9999999"), Some(1_000_000));
        for bad in [
            &b""[..],
            b".",
            b"-1",
            b"1e3",
            b"inf",
            b"NaN",
            b"1..2",
            b"1.2.3",
            b"1,5",
            b"18446744073709.551616",
            b"\xc3\xa9",
        ] {
            assert_eq!(micros(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn bucket_arguments() {
        let call = bucket_call::<&[u8]>(&[b"10", b"0.5", b"*"]).unwrap();
        assert_eq!(call.params.capacity, 10);
        assert_eq!(call.params.refill_per_us, 500_000);
        assert_eq!((call.limit, call.now, call.n), (10, Now::Server, 1));
        assert_eq!(bucket_call::<&[u8]>(&[b"10", b"1", b"12.5", b"0"]).unwrap().n, 0);
        assert_eq!(bucket_call::<&[u8]>(&[b"0", b"1", b"1"]), Err(Error::Capacity));
        assert_eq!(bucket_call::<&[u8]>(&[b"18446745", b"1", b"1"]), Err(Error::Capacity));
        assert_eq!(bucket_call::<&[u8]>(&[b"1", b"0.0000004", b"1"]), Err(Error::Rate));
        assert_eq!(bucket_call::<&[u8]>(&[b"1", b"1", b"**"]), Err(Error::Now));
        assert_eq!(bucket_call::<&[u8]>(&[b"1", b"1", b"1", b"1.5"]), Err(Error::Count));
        assert_eq!(bucket_call::<&[u8]>(&[b"1", b"1"]), Err(Error::WrongArity));
    }

    #[test]
    fn window_arguments() {
        let call = window_call::<&[u8]>(&[b"100", b"60", b"1000.5", b"3"]).unwrap();
        assert_eq!(call.params, fixed_window::Params { limit: 100, window_us: 60_000_000 });
        assert_eq!((call.now, call.n), (Now::At { us: 1_000_500_000 }, 3));
        assert_eq!(window_call::<&[u8]>(&[b"0", b"1", b"*"]), Err(Error::Limit));
        assert_eq!(window_call::<&[u8]>(&[b"1", b"0.0009", b"*"]), Err(Error::Window));
        assert!(window_call::<&[u8]>(&[b"1", b"0.001", b"*"]).is_ok());
    }

    #[test]
    fn setstate_fields() {
        let parsed = state_fields::<&[u8]>(&[b"1", b"2", b"pxat", b"3"]).unwrap();
        assert_eq!(parsed, (vec![1, 2], Some(3)));
        assert_eq!(state_fields::<&[u8]>(&[b"1", b"x"]), Err(Error::State));
        assert_eq!(state_fields::<&[u8]>(&[b"1", b"PXAT"]), Err(Error::State));
    }
}
