//! Glue between Redis and the math: parse, open the keys, read the state,
//! run the limits, write, expire, signal, replicate, reply. Each command is
//! a few lines of the same steps; no arithmetic on limits here.

use std::collections::HashSet;
use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisString, RedisValue, raw};

use crate::algorithms::concurrency::{self, FRESH, Held, Leases};
use crate::algorithms::sliding_log::EMPTY;
use crate::args::{self, Now};
use crate::clock;
use crate::error::Error;
use crate::key::LimiterKey;
use crate::limit::{Call, Change, Fields, Kind, Limit, Op, Outcome, Parameters};
use crate::replicate;
use crate::state::{Owned, Value};
use crate::stats::Counters;
use crate::table;

/// `RL.RELEASE key lease_id now`: `[released, held, reset_after_ms]`.
pub fn release(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    run(|| {
        let [_, name, id, now] = argv else { return Err(Error::WrongArity) };
        let (id, now) = (args::lease_id(id)?, args::now(now)?);
        on_lease(ctx, name, now, counters, |leases, now_us| {
            concurrency::release(leases, now_us, id)
        })
    })
}

/// `RL.RENEW key lease_id lease now`: `[renewed, held, reset_after_ms]`.
pub fn renew(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    run(|| {
        let [_, name, id, lease, now] = argv else { return Err(Error::WrongArity) };
        let (id, lease_us, now) = (args::lease_id(id)?, args::lease_us(lease)?, args::now(now)?);
        on_lease(ctx, name, now, counters, |leases, now_us| {
            concurrency::renew(leases, now_us, id, lease_us)
        })
    })
}

/// RL.RELEASE or RL.RENEW: runs `call` on the key's leases, writes its
/// change, replies `[done, held, reset_after_ms]`.
fn on_lease(
    ctx: &Context,
    name: &RedisString,
    now: Now,
    counters: &Counters,
    call: impl FnOnce(Option<&Leases>, u64) -> Held,
) -> Result<(), Error> {
    let mut key = LimiterKey::open(ctx, name, true);
    let (server_us, now_us) = resolve(now);
    let held = match key.value()? {
        None => call(None, now_us),
        Some(Value::Leases(leases)) => call(Some(&leases), now_us),
        Some(_) => return Err(Error::WrongType),
    };
    let fields = Fields {
        allowed: held.done,
        remaining: held.held,
        limit: 0,
        retry_after_ms: 0,
        reset_after_ms: held.reset_after_ms,
        delay_ms: None,
        lease_id: None,
    };
    let outcome = Outcome { fields, change: held.store.map(Change::Lease) };
    commit(ctx, name, &mut key, &outcome, server_us, counters.event())?;
    counters.record(true, u64::from(held.done));
    let ctx = ctx.get_raw();
    raw::reply_with_array(ctx, 3);
    for field in [u64::from(held.done), held.held, held.reset_after_ms] {
        raw::reply_with_long_long(ctx, i64::try_from(field).unwrap_or(i64::MAX));
    }
    Ok(())
}

/// `RL.MULTI numkeys key [key ...] now ALGORITHM a b n [ALGORITHM a b n ...]`:
/// every limit admits its `n` and takes it, or nothing changes anywhere.
pub fn multi(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    if ctx.is_keys_position_request() {
        declare_keys(ctx, argv);
        return Ok(RedisValue::NoReply);
    }
    run(|| {
        let (names, now, calls) = parse_multi(argv)?;
        let (server_us, now_us) = resolve(now);
        let mut keys: Vec<LimiterKey> =
            names.iter().map(|name| LimiterKey::open(ctx, name, true)).collect();
        let mut outcomes = keys
            .iter()
            .zip(&calls)
            .map(|(key, call)| {
                call.limit.run(Call { op: Op::Take, now_us, n: call.n }, key.value()?)
            })
            .collect::<Result<Vec<Outcome>, Error>>()?;
        let allowed = outcomes.iter().all(|o| o.fields.allowed);
        let units = calls.iter().fold(0u64, |units, call| units.wrapping_add(call.n));
        counters.record(allowed, units);
        if allowed {
            for ((key, name), outcome) in keys.iter_mut().zip(names).zip(&outcomes) {
                commit(ctx, name, key, outcome, server_us, counters.event())?;
            }
        } else {
            // Nothing is taken: a limit that would admit reports the state
            // it keeps, as a look (n = 0) does.
            for ((key, call), outcome) in keys.iter().zip(&calls).zip(&mut outcomes) {
                if outcome.fields.allowed {
                    let look = Call { op: Op::Take, now_us, n: 0 };
                    outcome.fields = call.limit.run(look, key.value()?)?.fields;
                }
            }
        }
        let ctx = ctx.get_raw();
        raw::reply_with_array(ctx, 2 + outcomes.len() as std::ffi::c_long);
        raw::reply_with_long_long(ctx, i64::from(allowed));
        raw::reply_with_long_long(ctx, if allowed { 0 } else { retry_after_ms(&outcomes) });
        for outcome in &outcomes {
            reply_fields(ctx, &outcome.fields);
        }
        Ok(())
    })
}

/// One limit of RL.MULTI and its `n`.
struct LimitCall {
    limit: Limit,
    n: u64,
}

/// The most keys of one RL.MULTI: a call runs alone on the server, about
/// a microsecond a key, so a million keys would block it for seconds.
pub const MAX_MULTI_KEYS: u64 = 1000;

/// RL.MULTI's keys, time and limits, every one checked; keys once each.
fn parse_multi(argv: &[RedisString]) -> Result<(&[RedisString], Now, Vec<LimitCall>), Error> {
    let [_, numkeys, rest @ ..] = argv else { return Err(Error::WrongArity) };
    let count = args::integer(numkeys)
        .filter(|k| (1..=MAX_MULTI_KEYS).contains(k))
        .ok_or(Error::NumKeys)?;
    let count = usize::try_from(count).map_err(|_| Error::WrongArity)?;
    if rest.len() / 5 < count || rest.len() != count * 5 + 1 {
        return Err(Error::WrongArity);
    }
    let (names, rest) = rest.split_at(count);
    let (now, specs) = rest.split_first().ok_or(Error::WrongArity)?;
    let calls = specs
        .chunks_exact(4)
        .map(|spec| {
            let [algorithm, a, b, n] = spec else { return Err(Error::WrongArity) };
            let limit = Limit::parse(algorithm, a, b)?;
            Ok(LimitCall { limit, n: args::count(Some(n))? })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let now = args::now(now)?;
    let mut seen = HashSet::with_capacity(count);
    if !names.iter().all(|name| seen.insert(name.as_slice())) {
        return Err(Error::RepeatedKey);
    }
    Ok((names, now, calls))
}

/// A denied RL.MULTI's wait: -1 when some limit never admits, else the
/// longest of the limits' own waits, when all of them admit.
fn retry_after_ms(outcomes: &[Outcome]) -> i64 {
    let waits = outcomes.iter().map(|o| o.fields.retry_after_ms);
    if waits.clone().any(|wait| wait < 0) { -1 } else { waits.max().unwrap_or(0) }
}

/// RL.MULTI's keys, for Redis 7.0's cluster routing, which asks the command
/// (`getkeys-api`) rather than reading its key spec: `numkeys` keys from
/// the third argument; none when `numkeys` is not a count of arguments
/// present (the call itself will fail).
fn declare_keys(ctx: &Context, argv: &[RedisString]) {
    let count = argv.get(1).and_then(|n| args::integer(n)).and_then(|n| usize::try_from(n).ok());
    if let Some(count) = count.filter(|&count| count < argv.len().saturating_sub(2)) {
        for position in 2..2 + count {
            ctx.key_at_pos(position as i32);
        }
    }
}

/// `RL.PEEK key ALGORITHM a b now [n]`: the reply the call would get, with
/// nothing taken, created or signalled.
pub fn peek(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    run(|| {
        let [_, name, algorithm, a, b, now, rest @ ..] = argv else {
            return Err(Error::WrongArity);
        };
        let limit = Limit::parse(algorithm, a, b)?;
        let (now, n) = (args::now(now)?, args::count(optional(rest)?)?);
        let key = LimiterKey::open(ctx, name, false);
        let call = Call { op: Op::Take, now_us: resolve(now).1, n };
        let mut outcome = limit.run(call, key.value()?)?;
        // Nothing is taken, so no lease is held.
        outcome.fields.lease_id = outcome.fields.lease_id.map(|_| 0);
        counters.record(outcome.fields.allowed, n);
        reply_fields(ctx.get_raw(), &outcome.fields);
        Ok(())
    })
}

/// `RL.REFUND key ALGORITHM a b now n`: gives back up to `n` units.
pub fn refund(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    run(|| {
        let [_, name, algorithm, a, b, now, n] = argv else {
            return Err(Error::WrongArity);
        };
        let limit = Limit::parse(algorithm, a, b)?;
        let (now, n) = (args::now(now)?, args::count(Some(n))?);
        // A slot comes back by its lease's id: RL.RELEASE.
        if let Limit::Concurrency(_) = limit {
            return Err(Error::RefundConcurrency);
        }
        let outcome = take_or_refund(ctx, name, now, counters.event(), |value, now_us| {
            limit.run(Call { op: Op::Refund, now_us, n }, value)
        })?;
        counters.record(true, n);
        reply_fields(ctx.get_raw(), &outcome.fields);
        Ok(())
    })
}

/// `RL.SETSTATE key kind field... [PXAT unix_ms]`: writes a state as it is.
/// Replicas, the AOF and AOF rewrite receive changes in this form, so
/// replaying them never depends on a clock. `RL.SETSTATE key kind APPEND
/// field... [PXAT unix_ms]` adds a log's runs or leases to the key's
/// state (how an AOF rewrite writes a long one), keeping its expiry
/// unless it gives one.
pub fn set_state(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    let run = || {
        let [_, name, kind, rest @ ..] = argv else { return Err(Error::WrongArity) };
        let (append, rest) = match rest {
            [word, items @ ..] if word.eq_ignore_ascii_case(b"APPEND") => (true, items),
            _ => (false, rest),
        };
        let (fields, expire_at_ms) = args::state_fields(rest)?;
        let mut key = LimiterKey::open(ctx, name, true);
        if append {
            key.append(kind, &fields)?;
        } else {
            key.replace(Owned::from_setstate(kind, &fields).ok_or(Error::State)?)?;
        }
        if !append || expire_at_ms.is_some() {
            key.expire_at(expire_at_ms);
        }
        signal_modified(ctx, name, counters.event());
        ctx.replicate_verbatim();
        Ok(RedisValue::SimpleStringStatic("OK"))
    };
    run().map_err(Error::into_redis)
}

/// `RL.LOGAPPLY key APPEND cutoff_us at_us n PXAT unix_ms` or
/// `RL.LOGAPPLY key REMOVE cutoff_us n PXAT unix_ms`: a sliding log's
/// change (an admitted call's, a refund's), in the form replicas and the
/// AOF receive it, since the whole log can be long.
pub fn log_apply(ctx: &Context, argv: &[RedisString], _: &Counters) -> RedisResult {
    let run = || {
        let [_, name, rest @ ..] = argv else { return Err(Error::WrongArity) };
        let (change, expire_at_ms) = args::log_change(rest)?;
        let mut key = LimiterKey::open(ctx, name, true);
        let log = match key.value()? {
            Some(Value::Log(log)) => Some(log),
            None => None,
            Some(_) => return Err(Error::WrongType),
        };
        let event = match change {
            Change::Append(append) if log.as_deref().unwrap_or(EMPTY).takes(&append) => {
                table::SLIDING_LOG.counters.event()
            }
            // No log, no units to give back: nothing changes, as for RL.REFUND.
            Change::Remove(_) if log.is_none() => return Ok(RedisValue::SimpleStringStatic("OK")),
            Change::Remove(_) => table::REFUND.counters.event(),
            _ => return Err(Error::LogChange),
        };
        key.change_log(|log| match change {
            Change::Append(append) => log.apply(append),
            Change::Remove(removal) => log.remove(removal),
            Change::Put(_) | Change::Lease(_) => {} // refused above
        })?;
        key.expire_at(Some(expire_at_ms));
        signal_modified(ctx, name, event);
        ctx.replicate_verbatim();
        Ok(RedisValue::SimpleStringStatic("OK"))
    };
    run().map_err(Error::into_redis)
}

/// `RL.LEASEAPPLY key ACQUIRE at_us id expires_us n [PXAT unix_ms]`,
/// `... RELEASE at_us id [PXAT unix_ms]` or `... RENEW at_us id expires_us
/// [PXAT unix_ms]`: a lease's change, in the form replicas and the AOF
/// receive it, since a key's leases can be many.
pub fn lease_apply(ctx: &Context, argv: &[RedisString], _: &Counters) -> RedisResult {
    let run = || {
        let [_, name, rest @ ..] = argv else { return Err(Error::WrongArity) };
        let (change, expire_at_ms) = args::lease_change(rest)?;
        let mut key = LimiterKey::open(ctx, name, true);
        let takes = match key.value()? {
            None => FRESH.takes(&change),
            Some(Value::Leases(leases)) => leases.takes(&change),
            Some(_) => return Err(Error::WrongType),
        };
        if !takes {
            return Err(Error::LeaseChange);
        }
        let emptied = key.change_leases(|leases| {
            leases.apply(change);
            leases.held.is_empty()
        })?;
        let event = match change {
            concurrency::Change::Acquire { .. } => table::ACQUIRE.counters.event(),
            concurrency::Change::Release { .. } => table::RELEASE.counters.event(),
            concurrency::Change::Renew { .. } => table::RENEW.counters.event(),
        };
        if emptied {
            key.delete();
            signal_modified(ctx, name, event);
            notify(ctx, raw::REDISMODULE_NOTIFY_GENERIC, c"del", name);
        } else {
            key.expire_at(expire_at_ms);
            signal_modified(ctx, name, event);
        }
        ctx.replicate_verbatim();
        Ok(RedisValue::SimpleStringStatic("OK"))
    };
    run().map_err(Error::into_redis)
}

/// Runs a command that writes its reply itself.
fn run(command: impl FnOnce() -> Result<(), Error>) -> RedisResult {
    command().map(|()| RedisValue::NoReply).map_err(Error::into_redis)
}

/// The optional last argument.
fn optional(rest: &[RedisString]) -> Result<Option<&[u8]>, Error> {
    match rest {
        [] => Ok(None),
        [n] => Ok(Some(n.as_slice())),
        _ => Err(Error::WrongArity),
    }
}

/// `RL.<ALGORITHM> key a b now [n]`: RL.TOKENBUCKET, RL.LEAKYBUCKET,
/// RL.FIXEDWINDOW, RL.SLIDINGWINDOW, RL.SLIDINGLOG and RL.ACQUIRE, each
/// counted in its own `counters`.
pub fn single<K: Kind>(ctx: &Context, argv: &[RedisString], counters: &Counters) -> RedisResult {
    run(|| {
        let [_, name, a, b, now, rest @ ..] = argv else { return Err(Error::WrongArity) };
        let params = K::Params::parse(a, b)?;
        let (now, n) = (args::now(now)?, args::count(optional(rest)?)?);
        let outcome = take_or_refund(ctx, name, now, counters.event(), |value, now_us| {
            K::run(&params, Call { op: Op::Take, now_us, n }, value)
        })?;
        counters.record(outcome.fields.allowed, n);
        reply_fields(ctx.get_raw(), &outcome.fields);
        Ok(())
    })
}

/// One limit on one key: reads it, runs `limit` on its state, writes the
/// change, emitting `event`.
fn take_or_refund(
    ctx: &Context,
    name: &RedisString,
    now: Now,
    event: &CStr,
    limit: impl FnOnce(Option<Value>, u64) -> Result<Outcome, Error>,
) -> Result<Outcome, Error> {
    let mut key = LimiterKey::open(ctx, name, true);
    let (server_us, now_us) = resolve(now);
    let outcome = limit(key.value()?, now_us)?;
    commit(ctx, name, &mut key, &outcome, server_us, event)?;
    Ok(outcome)
}

/// Writes an outcome's change, if any: the key takes the new state and
/// expires when the limiter is fresh again, on the server's clock; a change
/// that leaves it fresh deletes it. Then WATCH, keyspace events, replicas
/// and the AOF hear of it.
fn commit(
    ctx: &Context,
    name: &RedisString,
    key: &mut LimiterKey,
    outcome: &Outcome,
    server_us: u64,
    event: &CStr,
) -> Result<(), Error> {
    let Some(change) = outcome.change else { return Ok(()) };
    let reset_after_ms = outcome.fields.reset_after_ms;
    let fresh = reset_after_ms == 0;
    // The ranges keep this far below i64::MAX.
    let expire_at_ms = i64::try_from(server_us / 1000 + reset_after_ms).unwrap_or(i64::MAX);
    match change {
        Change::Put(fixed) if !fresh => {
            key.put(fixed)?;
            replicate::fields(ctx, name, &fixed, expire_at_ms);
        }
        // A log can be long, so replicas receive the change, not the log.
        Change::Append(append) => {
            key.change_log(|log| log.apply(append))?;
            replicate::log_append(ctx, name, &append, expire_at_ms);
        }
        Change::Remove(removal) if !fresh => {
            key.change_log(|log| log.remove(removal))?;
            replicate::log_removal(ctx, name, &removal, expire_at_ms);
        }
        // Leases can be many too: replicas receive the lease's change.
        Change::Lease(change) if !fresh => {
            key.change_leases(|leases| leases.apply(change))?;
            replicate::lease(ctx, name, &change, expire_at_ms);
        }
        Change::Put(_) | Change::Remove(_) | Change::Lease(_) => {
            key.delete();
            signal_modified(ctx, name, event);
            notify(ctx, raw::REDISMODULE_NOTIFY_GENERIC, c"del", name);
            replicate::delete(ctx, name);
            return Ok(());
        }
    }
    key.expire_at(Some(expire_at_ms));
    signal_modified(ctx, name, event);
    Ok(())
}

/// The server's clock, and the call's time (the same for `*`).
fn resolve(now: Now) -> (u64, u64) {
    let server_us = clock::now_us();
    match now {
        Now::Server => (server_us, server_us),
        Now::At { us } => (server_us, us),
    }
}

/// Tells WATCH and client tracking that the key changed, and emits the
/// keyspace event `event` (class `d`, module keys).
pub(crate) fn signal_modified(ctx: &Context, name: &RedisString, event: &CStr) {
    // SAFETY: a valid context and key name.
    unsafe { raw::RedisModule_SignalModifiedKey.unwrap()(ctx.get_raw(), name.inner) };
    notify(ctx, raw::REDISMODULE_NOTIFY_MODULE, event, name);
}

fn notify(ctx: &Context, class: i32, event: &CStr, name: &RedisString) {
    // SAFETY: a valid context, event name and key name.
    unsafe {
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
            ctx.get_raw(),
            class,
            event.as_ptr(),
            name.inner,
        )
    };
}

/// `[allowed, remaining, limit, retry_after_ms, reset_after_ms]` and, for
/// the leaky bucket, `delay_ms`, for a concurrency limit `lease_id`;
/// written straight to the client. The ranges keep every number below 2^53.
fn reply_fields(ctx: *mut raw::RedisModuleCtx, fields: &Fields) {
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let sixth = fields.delay_ms.or(fields.lease_id);
    raw::reply_with_array(ctx, if sixth.is_some() { 6 } else { 5 });
    raw::reply_with_long_long(ctx, i64::from(fields.allowed));
    raw::reply_with_long_long(ctx, int(fields.remaining));
    raw::reply_with_long_long(ctx, int(fields.limit));
    raw::reply_with_long_long(ctx, fields.retry_after_ms);
    raw::reply_with_long_long(ctx, int(fields.reset_after_ms));
    if let Some(sixth) = sixth {
        raw::reply_with_long_long(ctx, int(sixth));
    }
}
