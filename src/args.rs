//! Parsing and validation of command arguments. Numbers are parsed from the
//! raw bytes, exactly: no float ever stands between the text and the integer.

use std::ops::Deref;

use crate::algorithms::concurrency::{Change as LeaseChange, Lease};
use crate::algorithms::sliding_log::{Append, Removal};
use crate::algorithms::{MAX_SPAN_US, MAX_TIME_US, MAX_UNITS};
use crate::error::Error;
use crate::limit::Change;

/// Microseconds per second: `now`, `rate` and `window` are read to six decimals.
const MICRO: u64 = 1_000_000;

/// The time of a call: given by the caller, or the server's clock (`*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    Server,
    At { us: u64 },
}

/// A window or a lease: seconds, from 0.001 to 10^12, in microseconds.
pub fn duration_us(arg: &[u8]) -> Option<u64> {
    micros(arg).filter(|us| (1000..=MAX_SPAN_US).contains(us))
}

/// RL.RENEW's `lease`.
pub fn lease_us(arg: &[u8]) -> Result<u64, Error> {
    duration_us(arg).ok_or(Error::Lease)
}

/// A lease id, 0 (never given) to the largest.
pub fn lease_id(arg: &[u8]) -> Result<u64, Error> {
    integer(arg).filter(|&id| id <= MAX_UNITS).ok_or(Error::LeaseId)
}

pub fn now(arg: &[u8]) -> Result<Now, Error> {
    if arg == b"*" {
        return Ok(Now::Server);
    }
    let us = micros(arg).filter(|&us| us <= MAX_TIME_US).ok_or(Error::Now)?;
    Ok(Now::At { us })
}

/// `n`: units, 1 when left out.
pub fn count(n: Option<&[u8]>) -> Result<u64, Error> {
    n.map_or(Some(1), integer).filter(|&n| n <= MAX_UNITS).ok_or(Error::Count)
}

/// RL.SETSTATE's arguments after the kind: integer fields, then optionally
/// `PXAT unix_ms`.
pub fn state_fields<A: Deref<Target = [u8]>>(
    args: &[A],
) -> Result<(Vec<u128>, Option<i64>), Error> {
    let (fields, expire_at) = match args {
        [fields @ .., pxat, ms] if pxat.eq_ignore_ascii_case(b"PXAT") => {
            let ms = integer(ms).and_then(|ms| i64::try_from(ms).ok()).ok_or(Error::State)?;
            (fields, Some(ms))
        }
        fields => (fields, None),
    };
    let fields = fields.iter().map(|f| wide_integer(f)).collect::<Option<Vec<_>>>();
    Ok((fields.ok_or(Error::State)?, expire_at))
}

/// RL.LOGAPPLY's arguments after the key: `APPEND cutoff_us at_us n` or
/// `REMOVE cutoff_us n`, then `PXAT unix_ms`.
pub fn log_change<A: Deref<Target = [u8]>>(args: &[A]) -> Result<(Change, i64), Error> {
    let number = |arg: &A| integer(arg).ok_or(Error::LogChange);
    let is = |arg: &A, word: &[u8]| arg.eq_ignore_ascii_case(word);
    let (change, ms) = match args {
        [op, cutoff, at, n, pxat, ms] if is(op, b"APPEND") && is(pxat, b"PXAT") => {
            let (cutoff_us, at_us, count) = (number(cutoff)?, number(at)?, number(n)?);
            (Change::Append(Append { cutoff_us, at_us, count }), ms)
        }
        [op, cutoff, n, pxat, ms] if is(op, b"REMOVE") && is(pxat, b"PXAT") => {
            (Change::Remove(Removal { cutoff_us: number(cutoff)?, count: number(n)? }), ms)
        }
        _ => return Err(Error::LogChange),
    };
    let ms = integer(ms).and_then(|ms| i64::try_from(ms).ok()).ok_or(Error::LogChange)?;
    Ok((change, ms))
}

/// RL.LEASEAPPLY's arguments after the key: `ACQUIRE at_us id expires_us
/// n`, `RELEASE at_us id` or `RENEW at_us id expires_us`, then optionally
/// `PXAT unix_ms` (an AOF rewrite leaves it to Redis's own expiry).
pub fn lease_change<A: Deref<Target = [u8]>>(
    args: &[A],
) -> Result<(LeaseChange, Option<i64>), Error> {
    let number = |arg: &A| integer(arg).ok_or(Error::LeaseChange);
    let (change, expire_at) = match args {
        [change @ .., pxat, ms] if pxat.eq_ignore_ascii_case(b"PXAT") => {
            let ms = integer(ms).and_then(|ms| i64::try_from(ms).ok());
            (change, Some(ms.ok_or(Error::LeaseChange)?))
        }
        change => (change, None),
    };
    let is = |arg: &A, word: &[u8]| arg.eq_ignore_ascii_case(word);
    let change = match change {
        [op, at, id, expires, n] if is(op, b"ACQUIRE") => {
            let (expires_us, n) = (number(expires)?, number(n)?);
            let lease = Lease { id: number(id)?, expires_us, n };
            LeaseChange::Acquire { at_us: number(at)?, lease }
        }
        [op, at, id] if is(op, b"RELEASE") => {
            LeaseChange::Release { at_us: number(at)?, id: number(id)? }
        }
        [op, at, id, expires] if is(op, b"RENEW") => {
            let (at_us, id, expires_us) = (number(at)?, number(id)?, number(expires)?);
            LeaseChange::Renew { at_us, id, expires_us }
        }
        _ => return Err(Error::LeaseChange),
    };
    Ok((change, expire_at))
}

/// A non-negative decimal integer of plain ASCII digits, up to 128 bits.
fn wide_integer(arg: &[u8]) -> Option<u128> {
    if arg.is_empty() || arg.len() > 39 {
        return None;
    }
    arg.iter().try_fold(0u128, |acc, &b| {
        let digit = char::from(b).to_digit(10)?;
        acc.checked_mul(10)?.checked_add(u128::from(digit))
    })
}

/// A non-negative decimal integer of plain ASCII digits, up to 64 bits:
/// `wide_integer`'s fold in 64-bit arithmetic, since every call parses
/// two or three of these.
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
    fn lease_arguments() {
        assert_eq!(lease_id(b"0"), Ok(0));
        assert_eq!(lease_id(b"9007199254740991"), Ok(MAX_UNITS));
        assert_eq!(lease_id(b"9007199254740992"), Err(Error::LeaseId));
        assert_eq!(lease_id(b"-1"), Err(Error::LeaseId));
        assert_eq!(lease_us(b"0.001"), Ok(1000));
        assert_eq!(lease_us(b"0"), Err(Error::Lease));
    }

    #[test]
    fn lease_changes() {
        let lease = Lease { id: 2, expires_us: 30, n: 1 };
        let acquire = LeaseChange::Acquire { at_us: 5, lease };
        let parse = |args: &[&[u8]]| lease_change::<&[u8]>(args);
        assert_eq!(parse(&[b"acquire", b"5", b"2", b"30", b"1"]), Ok((acquire, None)));
        assert_eq!(
            parse(&[b"RELEASE", b"5", b"2", b"PXAT", b"9"]),
            Ok((LeaseChange::Release { at_us: 5, id: 2 }, Some(9)))
        );
        let renew = LeaseChange::Renew { at_us: 5, id: 2, expires_us: 40 };
        assert_eq!(parse(&[b"RENEW", b"5", b"2", b"40"]), Ok((renew, None)));
        for bad in [
            &[&b"RELEASE"[..], b"5"][..],
            &[b"RELEASE", b"5", b"2", b"PXAT"],
            &[b"RENEW", b"5", b"2"],
            &[b"ACQUIRE", b"5", b"2", b"30", b"-1"],
            &[b"FREE", b"5", b"2"],
        ] {
            assert_eq!(parse(bad), Err(Error::LeaseChange), "{bad:?}");
        }
    }

    #[test]
    fn times_and_counts() {
        assert_eq!(now(b"*"), Ok(Now::Server));
        assert_eq!(now(b"0"), Ok(Now::At { us: 0 }));
        assert_eq!(now(b"253402300799.999999"), Ok(Now::At { us: MAX_TIME_US }));
        assert_eq!(now(b"253402300800"), Err(Error::Now));
        assert_eq!(now(b"**"), Err(Error::Now));
        assert_eq!(count(None), Ok(1));
        assert_eq!(count(Some(b"0")), Ok(0));
        assert_eq!(count(Some(b"9007199254740991")), Ok(MAX_UNITS));
        assert_eq!(count(Some(b"9007199254740992")), Err(Error::Count));
        assert_eq!(count(Some(b"1.5")), Err(Error::Count));
    }

    #[test]
    fn setstate_fields() {
        let parsed = state_fields::<&[u8]>(&[b"1", b"2", b"pxat", b"3"]).unwrap();
        assert_eq!(parsed, (vec![1, 2], Some(3)));
        let wide = state_fields::<&[u8]>(&[b"9007199254740991000000000000"]).unwrap();
        assert_eq!(wide, (vec![9_007_199_254_740_991_000_000_000_000], None));
        assert_eq!(state_fields::<&[u8]>(&[b"PXAT", b"9223372036854775808"]), Err(Error::State));
        assert_eq!(state_fields::<&[u8]>(&[b"1", b"x"]), Err(Error::State));
        assert_eq!(state_fields::<&[u8]>(&[b"1", b"PXAT"]), Err(Error::State));
    }
}
