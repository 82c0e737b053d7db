//! What the commands report beyond their replies: the `INFO ratelimit`
//! section (calls and admitted and denied units per command, and the number
//! of limiter values in memory) and the name of each keyspace event.

use std::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::raw;

use crate::table::COMMANDS;

/// A command's counts in INFO, and the keyspace event its writes emit.
pub struct Counters {
    /// Its field in INFO, and the names of the units counted when a call
    /// admits and when it denies (none for a command that never denies);
    /// `None` for a command INFO leaves out (the replication forms).
    info: Option<(&'static CStr, &'static CStr, Option<&'static CStr>)>,
    /// The keyspace event (class `d`, module keys); `None` for RL.LOGAPPLY
    /// and RL.LEASEAPPLY, which emit the event of the call whose change
    /// they apply.
    event: Option<&'static CStr>,
    calls: AtomicU64,
    admitted_units: AtomicU64,
    denied_units: AtomicU64,
}

impl Counters {
    /// In INFO as `name`: `calls`, `admitted_units` and `denied_units`.
    pub const fn units(name: &'static CStr, event: &'static CStr) -> Counters {
        Self::new(Some((name, c"admitted_units", Some(c"denied_units"))), Some(event))
    }

    /// In INFO as `name`: `calls` and `done`, what the calls did (units
    /// refunded, leases released or renewed).
    pub const fn done(name: &'static CStr, event: &'static CStr, done: &'static CStr) -> Counters {
        Self::new(Some((name, done, None)), Some(event))
    }

    /// Not in INFO, emitting `event` (RL.SETSTATE).
    pub const fn uncounted(event: &'static CStr) -> Counters {
        Self::new(None, Some(event))
    }

    /// Not in INFO, and no event of its own (RL.LOGAPPLY, RL.LEASEAPPLY).
    pub const fn none() -> Counters {
        Self::new(None, None)
    }

    const fn new(
        info: Option<(&'static CStr, &'static CStr, Option<&'static CStr>)>,
        event: Option<&'static CStr>,
    ) -> Counters {
        Counters {
            info,
            event,
            calls: AtomicU64::new(0),
            admitted_units: AtomicU64::new(0),
            denied_units: AtomicU64::new(0),
        }
    }

    /// The keyspace event the command's writes emit.
    pub fn event(&self) -> &'static CStr {
        self.event.expect("a command that writes has its event")
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

/// Limiter values in memory. Values may be freed on a lazy-free thread,
/// so these are real atomic updates; they happen once per key, not per call.
static VALUES: AtomicU64 = AtomicU64::new(0);

pub fn value_created() {
    VALUES.fetch_add(1, Relaxed);
}

pub fn value_freed() {
    VALUES.fetch_sub(1, Relaxed);
}

/// The `ratelimit` INFO section, the commands in the table's order:
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
        for counters in COMMANDS.iter().map(|command| &command.counters) {
            let Some((name, admitted, denied)) = counters.info else { continue };
            raw::RedisModule_InfoBeginDictField.unwrap()(ctx, name.as_ptr());
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
