//! Glue between Redis and the math: parse, open the key, load the state,
//! decide, store, expire, replicate, reply. No arithmetic on limits here.

use redis_module::{Context, RedisResult, RedisString, RedisValue, Status, raw};

use crate::algorithms::{Verdict, token_bucket};
use crate::args::{self, Now};
use crate::clock;
use crate::error::Error;
use crate::key::LimiterKey;
use crate::state::Limiter;

/// At load: keys are signalled as modified (WATCH, client tracking) only
/// when a command really changes them, as Redis's own commands do, not
/// whenever one is opened for writing.
pub fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    // SAFETY: called from RedisModule_OnLoad with a valid context.
    unsafe {
        raw::RedisModule_SetModuleOptions.unwrap()(
            ctx.get_raw(),
            raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as i32,
        )
    };
    Status::Ok
}

/// `RL.TOKENBUCKET key capacity rate now [n]`
pub fn token_bucket(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_token_bucket(ctx, &argv).map_err(Error::into_redis)
}

/// `RL.SETSTATE key kind field... [PXAT unix_ms]`: writes a state as it is.
/// Replicas, the AOF and AOF rewrite receive every change in this form, so
/// replaying it never depends on a clock.
pub fn set_state(ctx: &Context, argv: Vec<RedisString>) -> RedisResult {
    run_set_state(ctx, &argv).map_err(Error::into_redis)
}

fn run_token_bucket(ctx: &Context, argv: &[RedisString]) -> Result<RedisValue, Error> {
    let [_, name, rest @ ..] = argv else {
        return Err(Error::WrongArity);
    };
    let call = args::bucket_call(rest)?;
    let key = LimiterKey::open(ctx, name);
    let stored = match key.get()? {
        None => None,
        Some(Limiter::TokenBucket(state)) => Some(*state),
    };
    let server_us = clock::now_us();
    let now_us = match call.now {
        Now::Server => server_us,
        Now::At { us } => us,
    };
    let verdict = token_bucket::decide(stored, now_us, &call.params, call.n);
    if let Some(state) = verdict.store {
        let expire_at_ms = (server_us / 1000).saturating_add(verdict.reset_after_ms);
        store(ctx, &key, name, Limiter::TokenBucket(state), expire_at_ms)?;
    }
    reply(ctx, &verdict, call.params.capacity);
    Ok(RedisValue::NoReply)
}

fn run_set_state(ctx: &Context, argv: &[RedisString]) -> Result<RedisValue, Error> {
    let (limiter, expire_at_ms) = match argv {
        [_, _, kind, a, b] => (args::state(kind, [a, b])?, None),
        [_, _, kind, a, b, pxat, ms] if pxat.eq_ignore_ascii_case(b"PXAT") => (
            args::state(kind, [a, b])?,
            Some(args::integer(ms).ok_or(Error::State)?),
        ),
        [_, _, _, _, _, _, _] => return Err(Error::State),
        _ => return Err(Error::WrongArity),
    };
    let key = LimiterKey::open(ctx, &argv[1]);
    key.put(limiter)?;
    key.expire_at(expire_at_ms);
    signal_modified(ctx, &argv[1]);
    ctx.replicate_verbatim();
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Writes the new state with its absolute expiry and propagates exactly
/// that, never the clock-dependent command.
fn store(
    ctx: &Context,
    key: &LimiterKey,
    name: &RedisString,
    limiter: Limiter,
    expire_at_ms: u64,
) -> Result<(), Error> {
    key.put(limiter)?;
    key.expire_at(Some(expire_at_ms));
    signal_modified(ctx, name);
    let [a, b] = limiter.fields();
    let (mut a_text, mut b_text) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (a, b) = (a_text.format(a), b_text.format(b));
    let expire_at = i64::try_from(expire_at_ms).unwrap_or(i64::MAX);
    // RL.SETSTATE key KIND a b PXAT expire_at, straight from stack buffers:
    // this runs on every admitted call.
    // SAFETY: the format string matches the arguments that follow it.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            c"RL.SETSTATE".as_ptr(),
            c"scbbcl".as_ptr(),
            name.inner,
            limiter.kind().0.as_ptr(),
            a.as_ptr(),
            a.len(),
            b.as_ptr(),
            b.len(),
            c"PXAT".as_ptr(),
            expire_at,
        );
    }
    Ok(())
}

fn signal_modified(ctx: &Context, name: &RedisString) {
    // SAFETY: a valid context and key name.
    unsafe { raw::RedisModule_SignalModifiedKey.unwrap()(ctx.get_raw(), name.inner) };
}

/// `[allowed, remaining, limit, retry_after_ms, reset_after_ms]`, written
/// straight to the client without building a reply value.
fn reply<S>(ctx: &Context, verdict: &Verdict<S>, limit: u64) {
    let ctx = ctx.get_raw();
    let saturate = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    raw::reply_with_array(ctx, 5);
    raw::reply_with_long_long(ctx, i64::from(verdict.allowed));
    raw::reply_with_long_long(ctx, saturate(verdict.remaining));
    raw::reply_with_long_long(ctx, saturate(limit));
    raw::reply_with_long_long(ctx, verdict.retry_after_ms);
    raw::reply_with_long_long(ctx, saturate(verdict.reset_after_ms));
}
