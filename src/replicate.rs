//! What replicas and the AOF receive: the effect of a call, with its time
//! resolved and its expiry absolute, never the clock-dependent call. Built
//! from stack buffers, since this runs on every admitted call.

use std::sync::OnceLock;

use redis_module::{Context, RedisString, raw};

use crate::state::Fixed;

/// The constant arguments of RL.SETSTATE, made once: Redis takes a
/// reference to a string where it would copy a C string on every call.
struct Constants {
    pxat: Shared,
    kinds: [Shared; Fixed::NAMES.len()],
}

struct Shared(*mut raw::RedisModuleString);

// SAFETY: made once at load and only ever read, on Redis's main thread.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

static CONSTANTS: OnceLock<Constants> = OnceLock::new();

/// Makes the constant arguments; called once, at load.
pub fn init() {
    let make = |text: &std::ffi::CStr| {
        let bytes = text.to_bytes();
        // SAFETY: a null context makes a string that lives until freed,
        // which it never is: the module cannot be unloaded.
        Shared(unsafe {
            raw::RedisModule_CreateString.unwrap()(
                std::ptr::null_mut(),
                bytes.as_ptr().cast(),
                bytes.len(),
            )
        })
    };
    CONSTANTS.get_or_init(|| Constants { pxat: make(c"PXAT"), kinds: Fixed::NAMES.map(make) });
}

/// `RL.SETSTATE key KIND field... PXAT expire_at`.
pub fn fields(ctx: &Context, name: &RedisString, state: &Fixed, expire_at_ms: i64) {
    let (fields, count) = state.fields();
    let mut text = [itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new()];
    let [ta, tb, tc] = &mut text;
    let constants = CONSTANTS.get().expect("replicate::init runs at load");
    let (ctx, setstate) = (ctx.get_raw(), c"RL.SETSTATE");
    let (kind, pxat) = (constants.kinds[state.kind()].0, constants.pxat.0);
    // One call a field count, each format string matching its arguments.
    macro_rules! setstate {
        ($format:literal $(, $field:ident)*) => {
            // SAFETY: the format string matches the arguments that follow it.
            unsafe {
                raw::RedisModule_Replicate.unwrap()(
                    ctx,
                    setstate.as_ptr(),
                    $format.as_ptr(),
                    name.inner,
                    kind,
                    $($field.as_ptr(), $field.len(),)*
                    pxat,
                    expire_at_ms,
                )
            }
        };
    }
    let a = decimal(ta, fields[0]);
    match count {
        1 => setstate!(c"ssbsl", a),
        2 => {
            let b = decimal(tb, fields[1]);
            setstate!(c"ssbbsl", a, b)
        }
        _ => {
            let (b, c) = (decimal(tb, fields[1]), decimal(tc, fields[2]));
            setstate!(c"ssbbbsl", a, b, c)
        }
    };
}

/// `value` in decimal; in 64 bits when it fits, which is several times
/// cheaper than 128.
fn decimal(buffer: &mut itoa::Buffer, value: u128) -> &str {
    match u64::try_from(value) {
        Ok(value) => buffer.format(value),
        Err(_) => buffer.format(value),
    }
}

/// A sliding log's call at its resolved time: `RL.SLIDINGLOG key limit
/// window at n`, or, for a refund, `RL.REFUND key SLIDINGLOG limit window
/// at n`. Its expiry follows separately (`expire_at`).
pub fn log_call(
    ctx: &Context,
    name: &RedisString,
    refund: Option<&std::ffi::CStr>,
    [limit, window]: [&RedisString; 2],
    at_us: u64,
    n: u64,
) {
    let mut text = SecondsText::default();
    let at = text.format(at_us);
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    let ctx = ctx.get_raw();
    // SAFETY: each format string matches the arguments that follow it.
    unsafe {
        let replicate = raw::RedisModule_Replicate.unwrap();
        match refund {
            None => replicate(
                ctx,
                c"RL.SLIDINGLOG".as_ptr(),
                c"sssbl".as_ptr(),
                name.inner,
                limit.inner,
                window.inner,
                at.as_ptr(),
                at.len(),
                n,
            ),
            Some(algorithm) => replicate(
                ctx,
                c"RL.REFUND".as_ptr(),
                c"scssbl".as_ptr(),
                name.inner,
                algorithm.as_ptr(),
                limit.inner,
                window.inner,
                at.as_ptr(),
                at.len(),
                n,
            ),
        };
    }
}

/// `PEXPIREAT key expire_at`.
pub fn expire_at(ctx: &Context, name: &RedisString, expire_at_ms: i64) {
    // SAFETY: the format string matches the arguments.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            c"PEXPIREAT".as_ptr(),
            c"sl".as_ptr(),
            name.inner,
            expire_at_ms,
        )
    };
}

/// `DEL key`.
pub fn delete(ctx: &Context, name: &RedisString) {
    // SAFETY: the format string matches the arguments.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            c"DEL".as_ptr(),
            c"s".as_ptr(),
            name.inner,
        )
    };
}

/// Unix microseconds as decimal seconds (`1700000000.000250`), in a stack
/// buffer.
#[derive(Default)]
struct SecondsText {
    seconds: itoa::Buffer,
    bytes: [u8; 28],
}

impl SecondsText {
    fn format(&mut self, us: u64) -> &[u8] {
        let whole = self.seconds.format(us / 1_000_000).as_bytes();
        let length = whole.len() + 7;
        self.bytes[..whole.len()].copy_from_slice(whole);
        self.bytes[whole.len()] = b'.';
        let mut micros = us % 1_000_000;
        for digit in self.bytes[whole.len() + 1..length].iter_mut().rev() {
            *digit = b'0' + (micros % 10) as u8;
            micros /= 10;
        }
        &self.bytes[..length]
    }
}

#[cfg(test)]
mod tests {
    use super::SecondsText;

    #[test]
    fn seconds_text_keeps_every_microsecond() {
        let mut text = SecondsText::default();
        assert_eq!(text.format(1_700_000_000_000_250), b"1700000000.000250");
        assert_eq!(text.format(0), b"0.000000");
        assert_eq!(text.format(u64::MAX), b"18446744073709.551615");
    }
}
