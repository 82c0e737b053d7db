//! Glue between Redis and the math: parse, open the key, load the state,
//! decide, store, expire, replicate, reply. No arithmetic on limits here.

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString, RedisValue, raw};

use crate::algorithms::sliding_log::{self, Log};
use crate::algorithms::{Verdict, fixed_window, leaky_bucket, sliding_window, token_bucket};
use crate::args::{self, Call, Now};
use crate::clock;
use crate::error::Error;
use crate::key::LimiterKey;
use crate::state::{Fields, Stored};
use crate::stats::{self, Counters};

/// `RL.TOKENBUCKET key capacity rate now [n]`
pub fn token_bucket(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_fixed(ctx, &argv, &stats::TOKEN_BUCKET, args::bucket_call, |state, now_us, call| {
        (token_bucket::decide(state, now_us, &call.params, call.n), None)
    })
}

/// `RL.LEAKYBUCKET key capacity rate now [n]`: replies with a sixth field,
/// `delay_ms`.
pub fn leaky_bucket(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_fixed(ctx, &argv, &stats::LEAKY_BUCKET, args::bucket_call, |state, now_us, call| {
        let throttle = leaky_bucket::decide(state, now_us, &call.params, call.n);
        (throttle.verdict, Some(throttle.delay_ms))
    })
}

/// `RL.FIXEDWINDOW key limit window now [n]`
pub fn fixed_window(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_fixed(ctx, &argv, &stats::FIXED_WINDOW, args::window_call, |state, now_us, call| {
        (fixed_window::decide(state, now_us, &call.params, call.n), None)
    })
}

/// `RL.SLIDINGWINDOW key limit window now [n]`
pub fn sliding_window(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_fixed(ctx, &argv, &stats::SLIDING_WINDOW, args::window_call, |state, now_us, call| {
        (sliding_window::decide(state, now_us, &call.params, call.n), None)
    })
}

/// `RL.SLIDINGLOG key limit window now [n]`
pub fn sliding_log(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_sliding_log(ctx, &argv).map_err(Error::into_redis)
}

/// `RL.SETSTATE key kind field... [PXAT unix_ms]`: writes a state as it is.
/// Replicas, the AOF and AOF rewrite receive changes in this form, so
/// replaying them never depends on a clock.
pub fn set_state(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_set_state(ctx, &argv).map_err(Error::into_redis)
}

type Decide<T, P> = fn(Option<T>, u64, &Call<P>) -> (Verdict<T>, Option<u64>);

/// The whole of a command whose state is a few integers.
fn run_fixed<T: Fields, P>(
    ctx: &Context,
    argv: &[RedisString],
    counters: &Counters,
    parse: fn(&[RedisString]) -> Result<Call<P>, Error>,
    decide: Decide<T, P>,
) -> RedisResult {
    let run = || {
        let [_, name, rest @ ..] = argv else {
            return Err(Error::WrongArity);
        };
        let call = parse(rest)?;
        let mut key = LimiterKey::open(ctx, name);
        let stored = key.get::<T>()?.copied();
        let (server_us, now_us) = resolve(call.now);
        let (verdict, delay_ms) = decide(stored, now_us, &call);
        counters.record(verdict.allowed, call.n);
        if let Some(state) = verdict.store {
            let expire_at_ms = expire_at_ms(server_us, &verdict);
            key.put(state)?;
            key.expire_at(Some(expire_at_ms));
            signal_modified(ctx, name, counters.event);
            replicate_fields(ctx, name, &state, expire_at_ms);
        }
        reply(ctx, &verdict, call.limit, delay_ms);
        Ok(RedisValue::NoReply)
    };
    run().map_err(Error::into_redis)
}

fn run_sliding_log(ctx: &Context, argv: &[RedisString]) -> Result<RedisValue, Error> {
    let [_, name, rest @ ..] = argv else {
        return Err(Error::WrongArity);
    };
    let [limit_arg, window_arg, ..] = rest else {
        return Err(Error::WrongArity);
    };
    let call = args::window_call(rest)?;
    let mut key = LimiterKey::open(ctx, name);
    let log = key.get::<Log>()?;
    let (server_us, now_us) = resolve(call.now);
    let verdict = sliding_log::decide(log.as_deref(), now_us, &call.params, call.n);
    stats::SLIDING_LOG.record(verdict.allowed, call.n);
    if let Some(append) = verdict.store {
        match log {
            Some(log) => log.apply(append),
            None => {
                let mut log = Log::default();
                log.apply(append);
                key.put(log)?;
            }
        }
        let expire_at_ms = expire_at_ms(server_us, &verdict);
        key.expire_at(Some(expire_at_ms));
        signal_modified(ctx, name, stats::SLIDING_LOG.event);
        // The log can be long, so the replica runs the same call at the
        // same time instead of receiving it; then the absolute expiry.
        let mut text = SecondsText::default();
        let at = text.format(append.at_us);
        let expire_at = i64::try_from(expire_at_ms).unwrap_or(i64::MAX);
        // SAFETY: each format string matches the arguments that follow it.
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                ctx.get_raw(),
                c"RL.SLIDINGLOG".as_ptr(),
                c"sssbl".as_ptr(),
                name.inner,
                limit_arg.inner,
                window_arg.inner,
                at.as_ptr(),
                at.len(),
                i64::try_from(append.count).unwrap_or(i64::MAX),
            );
            raw::RedisModule_Replicate.unwrap()(
                ctx.get_raw(),
                c"PEXPIREAT".as_ptr(),
                c"sl".as_ptr(),
                name.inner,
                expire_at,
            );
        }
    }
    reply(ctx, &verdict, call.limit, None);
    Ok(RedisValue::NoReply)
}

fn run_set_state(ctx: &Context, argv: &[RedisString]) -> Result<RedisValue, Error> {
    let [_, name, kind, rest @ ..] = argv else {
        return Err(Error::WrongArity);
    };
    if rest.is_empty() {
        return Err(Error::WrongArity);
    }
    let (fields, expire_at_ms) = args::state_fields(rest)?;
    let mut key = LimiterKey::open(ctx, name);
    let is = |name: &CStr| kind.eq_ignore_ascii_case(name.to_bytes());
    if is(token_bucket::State::NAME) {
        key.put(fixed_state::<token_bucket::State>(&fields)?)?;
    } else if is(leaky_bucket::State::NAME) {
        key.put(fixed_state::<leaky_bucket::State>(&fields)?)?;
    } else if is(fixed_window::State::NAME) {
        key.put(fixed_state::<fixed_window::State>(&fields)?)?;
    } else if is(sliding_window::State::NAME) {
        key.put(fixed_state::<sliding_window::State>(&fields)?)?;
    } else if is(Log::NAME) && fields.len() % 2 == 0 {
        let runs = fields.chunks_exact(2).map(|run| (run[0], run[1]));
        key.put(Log::from_runs(runs).ok_or(Error::State)?)?;
    } else {
        return Err(Error::State);
    }
    key.expire_at(expire_at_ms);
    signal_modified(ctx, name, stats::SET_STATE_EVENT);
    ctx.replicate_verbatim();
    Ok(RedisValue::SimpleStringStatic("OK"))
}

fn fixed_state<T: Fields>(fields: &[u64]) -> Result<T, Error> {
    if fields.len() != T::COUNT {
        return Err(Error::State);
    }
    let mut all = [0; 3];
    all[..T::COUNT].copy_from_slice(fields);
    Ok(T::from_fields(all))
}

/// Unix microseconds as decimal seconds (`1700000000.000250`), in a stack
/// buffer: the sliding log replicates its time this way on every admitted call.
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

/// The server's clock, and the call's time (the same for `*`).
fn resolve(now: Now) -> (u64, u64) {
    let server_us = clock::now_us();
    match now {
        Now::Server => (server_us, server_us),
        Now::At { us } => (server_us, us),
    }
}

/// The key expires when the limiter is fresh again, on the server's clock.
fn expire_at_ms<S>(server_us: u64, verdict: &Verdict<S>) -> u64 {
    (server_us / 1000).saturating_add(verdict.reset_after_ms)
}

/// Tells WATCH and client tracking that the key changed, and emits the
/// keyspace event `event` (class `d`, module keys).
fn signal_modified(ctx: &Context, name: &RedisString, event: &CStr) {
    // SAFETY: a valid context and key name.
    unsafe {
        raw::RedisModule_SignalModifiedKey.unwrap()(ctx.get_raw(), name.inner);
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
            ctx.get_raw(),
            raw::REDISMODULE_NOTIFY_MODULE,
            event.as_ptr(),
            name.inner,
        );
    }
}

/// Propagates `RL.SETSTATE key KIND field... PXAT expire_at`, the effect of
/// the call, never the clock-dependent command; built from stack buffers
/// since this runs on every admitted call.
fn replicate_fields<T: Fields>(ctx: &Context, name: &RedisString, state: &T, expire_at_ms: u64) {
    let [a, b, c] = state.to_fields();
    let mut text = [itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new()];
    let [ta, tb, tc] = &mut text;
    let (a, b, c) = (ta.format(a), tb.format(b), tc.format(c));
    let expire_at = i64::try_from(expire_at_ms).unwrap_or(i64::MAX);
    let (ctx, setstate, kind, pxat) = (ctx.get_raw(), c"RL.SETSTATE", T::NAME, c"PXAT");
    // SAFETY: each format string matches the arguments that follow it.
    unsafe {
        let replicate = raw::RedisModule_Replicate.unwrap();
        if T::COUNT == 3 {
            replicate(
                ctx,
                setstate.as_ptr(),
                c"scbbbcl".as_ptr(),
                name.inner,
                kind.as_ptr(),
                a.as_ptr(),
                a.len(),
                b.as_ptr(),
                b.len(),
                c.as_ptr(),
                c.len(),
                pxat.as_ptr(),
                expire_at,
            );
        } else {
            replicate(
                ctx,
                setstate.as_ptr(),
                c"scbbcl".as_ptr(),
                name.inner,
                kind.as_ptr(),
                a.as_ptr(),
                a.len(),
                b.as_ptr(),
                b.len(),
                pxat.as_ptr(),
                expire_at,
            );
        }
    }
}

/// `[allowed, remaining, limit, retry_after_ms, reset_after_ms]` and, for
/// the leaky bucket, `delay_ms`; written straight to the client.
fn reply<S>(ctx: &Context, verdict: &Verdict<S>, limit: u64, delay_ms: Option<u64>) {
    let ctx = ctx.get_raw();
    let saturate = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    raw::reply_with_array(ctx, if delay_ms.is_some() { 6 } else { 5 });
    raw::reply_with_long_long(ctx, i64::from(verdict.allowed));
    raw::reply_with_long_long(ctx, saturate(verdict.remaining));
    raw::reply_with_long_long(ctx, saturate(limit));
    raw::reply_with_long_long(ctx, verdict.retry_after_ms);
    raw::reply_with_long_long(ctx, saturate(verdict.reset_after_ms));
    if let Some(delay_ms) = delay_ms {
        raw::reply_with_long_long(ctx, saturate(delay_ms));
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
