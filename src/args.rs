//! Parsing and validation of command arguments. Numbers are parsed from the
//! raw bytes, exactly: no float ever stands between the text and the integer.

use std::ops::Deref;

use crate::algorithms::token_bucket::{self, MAX_CAPACITY};
use crate::error::Error;
use crate::state::Limiter;

/// Microseconds per second: `now` and `rate` are read to six decimals.
const MICRO: u64 = 1_000_000;

/// The time of a call: given by the caller, or the server's clock (`*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    Server,
    At { us: u64 },
}

/// `capacity rate now [n]`, the arguments after the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketCall {
    pub params: token_bucket::Params,
    pub now: Now,
    pub n: u64,
}

pub fn bucket_call<A: Deref<Target = [u8]>>(args: &[A]) -> Result<BucketCall, Error> {
    let (capacity, rate, now, n) = match args {
        [capacity, rate, now] => (capacity, rate, now, None),
        [capacity, rate, now, n] => (capacity, rate, now, Some(n)),
        _ => return Err(Error::WrongArity),
    };
    let capacity = integer(capacity)
        .filter(|c| (1..=MAX_CAPACITY).contains(c))
        .ok_or(Error::Capacity)?;
    let refill_per_us = micros(rate).filter(|&r| r > 0).ok_or(Error::Rate)?;
    let now = self::now(now)?;
    let n = n.map_or(Some(1), |n| integer(n)).ok_or(Error::Count)?;
    Ok(BucketCall {
        params: token_bucket::Params {
            capacity,
            refill_per_us,
        },
        now,
        n,
    })
}

/// `kind field field`, the state RL.SETSTATE writes.
pub fn state(kind: &[u8], fields: [&[u8]; 2]) -> Result<Limiter, Error> {
    let tag = [Limiter::TOKEN_BUCKET]
        .into_iter()
        .find(|(name, _)| kind.eq_ignore_ascii_case(name.to_bytes()))
        .ok_or(Error::State)?
        .1;
    let [a, b] = fields;
    let fields = [
        integer(a).ok_or(Error::State)?,
        integer(b).ok_or(Error::State)?,
    ];
    Limiter::from_fields(tag, fields).ok_or(Error::State)
}

pub fn now(arg: &[u8]) -> Result<Now, Error> {
    if arg == b"*" {
        return Ok(Now::Server);
    }
    micros(arg).map(|us| Now::At { us }).ok_or(Error::Now)
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
    whole
        .checked_mul(MICRO)?
        .checked_add(millionths + u64::from(round_up))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(integer(b"0"), Some(0));
        assert_eq!(integer(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"18446744073709551616",
            b"-1",
            b"+1",
            b"1.0",
            b" 1",
            b"1e3",
            b"\xff",
        ] {
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
        assert_eq!((call.now, call.n), (Now::Server, 1));
        assert_eq!(
            bucket_call::<&[u8]>(&[b"10", b"1", b"12.5", b"0"])
                .unwrap()
                .n,
            0
        );
        assert_eq!(
            bucket_call::<&[u8]>(&[b"0", b"1", b"1"]),
            Err(Error::Capacity)
        );
        assert_eq!(
            bucket_call::<&[u8]>(&[b"18446745", b"1", b"1"]),
            Err(Error::Capacity)
        );
        assert_eq!(
            bucket_call::<&[u8]>(&[b"1", b"0.0000004", b"1"]),
            Err(Error::Rate)
        );
        assert_eq!(bucket_call::<&[u8]>(&[b"1", b"1", b"**"]), Err(Error::Now));
        assert_eq!(
            bucket_call::<&[u8]>(&[b"1", b"1", b"1", b"1.5"]),
            Err(Error::Count)
        );
        assert_eq!(bucket_call::<&[u8]>(&[b"1", b"1"]), Err(Error::WrongArity));
    }
}
