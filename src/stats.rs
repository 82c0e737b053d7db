//! What the commands report beyond their replies: the `INFO ratelimit`
//! section (calls and admitted and denied units per command, and the number
//! of limiter values in memory) and the name of each keyspace event.

use std::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::raw;

pub struct Counters {
    /// The field name in INFO.
    name: &'static CStr,
    /// The keyspace event a write emits (class `d`, module keys).
    pub event: &'static CStr,
    /// The names in INFO of the units counted when a call admits, and
    /// when it denies (none for a command that never denies).
    unit_names: (&'static CStr, Option<&'static CStr>),
    calls: AtomicU64,
    admitted_units: AtomicU64,
    denied_units: AtomicU64,
}

impl Counters {
    const fn new(name: &'static CStr, event: &'static CStr) -> Counters {
        Self::named(name, event, (c"admitted_units", Some(c"denied_units")))
    }

    const fn named(
        name: &'static CStr,
        event: &'static CStr,
        unit_names: (&'static CStr, Option<&'static CStr>),
    ) -> Counters {
        Counters {
            name,
            event,
            unit_names,
            calls: AtomicU64::new(0),
            admitted_units: AtomicU64::new(0),
            denied_units: AtomicU64::new(0),
        }
    }

    pub fn record(&self, allowed: bool, n: u64) {
        add(&self.calls, 1);
        add(if allowed { &self.admitted_units } else { &self.denied_units }, n);
    }
}

/// Commands run on Redis's main thread only, so a plain load and store
/// counts right, without a locked read-modify-write on the hot path.
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

pub static TOKEN_BUCKET: Counters = Counters::new(c"tokenbucket", c"rl.tokenbucket");
pub static LEAKY_BUCKET: Counters = Counters::new(c"leakybucket", c"rl.leakybucket");
pub static FIXED_WINDOW: Counters = Counters::new(c"fixedwindow", c"rl.fixedwindow");
pub static SLIDING_WINDOW: Counters = Counters::new(c"slidingwindow", c"rl.slidingwindow");
pub static SLIDING_LOG: Counters = Counters::new(c"slidinglog", c"rl.slidinglog");
/// RL.MULTI counts the units of all its limits.
pub static MULTI: Counters = Counters::new(c"multi", c"rl.multi");
/// RL.PEEK counts what it would admit and deny; it writes nothing.
pub static PEEK: Counters = Counters::new(c"peek", c"rl.peek");
pub static REFUND: Counters = Counters::named(c"refund", c"rl.refund", (c"refunded_units", None));
pub const SET_STATE_EVENT: &CStr = c"rl.setstate";
/// RL.ACQUIRE counts slots; RL.RELEASE and RL.RENEW the leases they free
/// and renew.
pub static ACQUIRE: Counters = Counters::new(c"acquire", c"rl.acquire");
pub static RELEASE: Counters =
    Counters::named(c"release", c"rl.release", (c"released_leases", None));
pub static RENEW: Counters = Counters::named(c"renew", c"rl.renew", (c"renewed_leases", None));
/// RL.THROTTLE, and CL.THROTTLE when the module registers it.
pub static THROTTLE: Counters = Counters::new(c"throttle", c"rl.throttle");

/// Limiter values in memory. Values may be freed on a lazy-free thread,
/// so these are real atomic updates; they happen once per key, not per call.
static VALUES: AtomicU64 = AtomicU64::new(0);

pub fn value_created() {
    VALUES.fetch_add(1, Relaxed);
}

pub fn value_freed() {
    VALUES.fetch_sub(1, Relaxed);
}

/// The `ratelimit` INFO section:
/// `keys:N`, `tokenbucket:calls=C,admitted_units=A,denied_units=D`...,
/// `refund:calls=C,refunded_units=R`, `release:calls=C,released_leases=R`
/// and `renew:calls=C,renewed_leases=R`.
///
/// # Safety
/// Redis calls it on its main thread with a live INFO context, for the
/// call only.
pub unsafe extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    // SAFETY: Redis calls this with a valid INFO context.
    unsafe {
        raw::RedisModule_InfoAddSection.unwrap()(ctx, c"".as_ptr());
        raw::RedisModule_InfoAddFieldULongLong.unwrap()(
            ctx,
            c"keys".as_ptr(),
            VALUES.load(Relaxed),
        );
        let all = [
            &TOKEN_BUCKET,
            &LEAKY_BUCKET,
            &FIXED_WINDOW,
            &SLIDING_WINDOW,
            &SLIDING_LOG,
            &MULTI,
            &PEEK,
            &REFUND,
            &THROTTLE,
            &ACQUIRE,
            &RELEASE,
            &RENEW,
        ];
        for counters in all {
            raw::RedisModule_InfoBeginDictField.unwrap()(ctx, counters.name.as_ptr());
            let (admitted, denied) = counters.unit_names;
            let fields = [
                Some((c"calls", &counters.calls)),
                Some((admitted, &counters.admitted_units)),
                denied.map(|denied| (denied, &counters.denied_units)),
            ];
            for (field, counter) in fields.into_iter().flatten() {
                raw::RedisModule_InfoAddFieldULongLong.unwrap()(
                    ctx,
                    field.as_ptr(),
                    counter.load(Relaxed),
                );
            }
            raw::RedisModule_InfoEndDictField.unwrap()(ctx);
        }
    }
}
