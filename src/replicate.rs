//! What replicas and the AOF receive: the effect of a call, with its time
//! resolved and its expiry absolute, never the clock-dependent call. Built
//! from stack buffers, since this runs on every admitted call.

use std::sync::OnceLock;

use redis_module::{Context, RedisString, raw};

use crate::algorithms::concurrency::Change as LeaseChange;
use crate::algorithms::sliding_log::{Append, Removal};
use crate::state::Fixed;

/// The constant arguments of RL.SETSTATE and RL.LOGAPPLY, made once: Redis
/// takes a reference to a string where it would copy a C string on every
/// call.
struct Constants {
    pxat: Shared,
    append: Shared,
    remove: Shared,
    acquire: Shared,
    release: Shared,
    renew: Shared,
    kinds: [Shared; Fixed::KINDS.len()],
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
    CONSTANTS.get_or_init(|| Constants {
        pxat: make(c"PXAT"),
        append: make(c"APPEND"),
        remove: make(c"REMOVE"),
        acquire: make(c"ACQUIRE"),
        release: make(c"RELEASE"),
        renew: make(c"RENEW"),
        kinds: Fixed::KINDS.map(|kind| make(kind.name)),
    });
}

/// `RL.SETSTATE key KIND field... PXAT expire_at`.
pub fn fields(ctx: &Context, name: &RedisString, state: &Fixed, expire_at_ms: i64) {
    let (kind, fields) = state.fields();
    let mut text = [itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new()];
    let [ta, tb, tc] = &mut text;
    let constants = CONSTANTS.get().expect("replicate::init runs at load");
    let (ctx, setstate) = (ctx.get_raw(), c"RL.SETSTATE");
    let (count, kind, pxat) =
        (Fixed::KINDS[kind].fields, constants.kinds[kind].0, constants.pxat.0);
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

/// `RL.LOGAPPLY key APPEND cutoff_us at_us n PXAT expire_at`.
pub fn log_append(ctx: &Context, name: &RedisString, append: &Append, expire_at_ms: i64) {
    let (mut cutoff, mut at) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (cutoff, at) = (cutoff.format(append.cutoff_us), at.format(append.at_us));
    let constants = CONSTANTS.get().expect("replicate::init runs at load");
    let n = i64::try_from(append.count).unwrap_or(i64::MAX);
    // SAFETY: the format string matches the arguments.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            c"RL.LOGAPPLY".as_ptr(),
            c"ssbblsl".as_ptr(),
            name.inner,
            constants.append.0,
            cutoff.as_ptr(),
            cutoff.len(),
            at.as_ptr(),
            at.len(),
            n,
            constants.pxat.0,
            expire_at_ms,
        )
    };
}

/// `RL.LOGAPPLY key REMOVE cutoff_us n PXAT expire_at`.
pub fn log_removal(ctx: &Context, name: &RedisString, removal: &Removal, expire_at_ms: i64) {
    let mut cutoff = itoa::Buffer::new();
    let cutoff = cutoff.format(removal.cutoff_us);
    let constants = CONSTANTS.get().expect("replicate::init runs at load");
    let n = i64::try_from(removal.count).unwrap_or(i64::MAX);
    // SAFETY: the format string matches the arguments.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            c"RL.LOGAPPLY".as_ptr(),
            c"ssblsl".as_ptr(),
            name.inner,
            constants.remove.0,
            cutoff.as_ptr(),
            cutoff.len(),
            n,
            constants.pxat.0,
            expire_at_ms,
        )
    };
}

/// `RL.LEASEAPPLY key ACQUIRE at_us id expires_us n PXAT expire_at`,
/// `... RELEASE at_us id PXAT expire_at` or `... RENEW at_us id expires_us
/// PXAT expire_at`: a lease's change, never the leases (they can be many).
pub fn lease(ctx: &Context, name: &RedisString, change: &LeaseChange, expire_at_ms: i64) {
    let constants = CONSTANTS.get().expect("replicate::init runs at load");
    // Every number is below 2^63: times up to year 9999 plus the longest
    // lease, ids and slots up to 2^53.
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let (ctx, command, pxat) = (ctx.get_raw(), c"RL.LEASEAPPLY".as_ptr(), constants.pxat.0);
    // SAFETY: each format string matches the arguments that follow it.
    unsafe {
        let replicate = raw::RedisModule_Replicate.unwrap();
        match *change {
            LeaseChange::Acquire { at_us, lease } => replicate(
                ctx,
                command,
                c"ssllllsl".as_ptr(),
                name.inner,
                constants.acquire.0,
                int(at_us),
                int(lease.id),
                int(lease.expires_us),
                int(lease.n),
                pxat,
                expire_at_ms,
            ),
            LeaseChange::Release { at_us, id } => replicate(
                ctx,
                command,
                c"ssllsl".as_ptr(),
                name.inner,
                constants.release.0,
                int(at_us),
                int(id),
                pxat,
                expire_at_ms,
            ),
            LeaseChange::Renew { at_us, id, expires_us } => replicate(
                ctx,
                command,
                c"sslllsl".as_ptr(),
                name.inner,
                constants.renew.0,
                int(at_us),
                int(id),
                int(expires_us),
                pxat,
                expire_at_ms,
            ),
        }
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
