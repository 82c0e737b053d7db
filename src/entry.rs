//! A command as the module declares it (`Command`: one row of
//! `table.rs`), how Redis calls it (its `extern "C"` entry point) and its
//! registration. The handlers borrow Redis's own argument vector:
//! redis-module's wrapper would retain every argument, collect them in a
//! Vec and release them again on every call, about a sixth of a denied
//! call's time.

use std::ffi::{CStr, c_int};
use std::mem::ManuallyDrop;

use redis_module::{Context, RedisResult, RedisString, raw};

use crate::metadata::{Doc, Keys};
use crate::stats::Counters;

/// The function Redis calls for a command.
pub type Entry = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// Calls `handler` with the arguments Redis passed, borrowed for the call.
#[inline(always)]
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: impl Fn(&Context, &[RedisString]) -> RedisResult,
) -> c_int {
    /// Most calls have fewer arguments, and then need no allocation.
    const ON_STACK: usize = 8;
    let context = Context::new(ctx);
    let count = usize::try_from(argc).unwrap_or(0);
    // SAFETY: Redis passes `argc` strings that live until the call returns.
    let argv = if count == 0 { &[] } else { unsafe { std::slice::from_raw_parts(argv, count) } };
    let borrow = |inner| ManuallyDrop::new(RedisString::from_redis_module_string(ctx, inner));
    let reply = if count <= ON_STACK {
        let mut stack: [_; ON_STACK] = std::array::from_fn(|_| borrow(std::ptr::null_mut()));
        for (slot, &inner) in stack.iter_mut().zip(argv) {
            *slot = borrow(inner);
        }
        handler(&context, as_strings(&stack[..count]))
    } else {
        let heap: Vec<_> = argv.iter().map(|&inner| borrow(inner)).collect();
        handler(&context, as_strings(&heap))
    };
    context.reply(reply) as c_int
}

fn as_strings(borrowed: &[ManuallyDrop<RedisString>]) -> &[RedisString] {
    // SAFETY: ManuallyDrop is repr(transparent), and a shared slice never
    // drops (releases) the strings it borrows.
    unsafe { &*(borrowed as *const [ManuallyDrop<RedisString>] as *const [RedisString]) }
}

/// The `extern "C"` entry point of the command `$command` (a `static` row
/// of the table), which calls `$handler` with the arguments and the
/// command's counters.
macro_rules! entry {
    ($handler:path, $command:path) => {{
        /// The command's entry point.
        ///
        /// # Safety
        /// Safe to call as Redis does: on its main thread, with a live
        /// context and `argc` strings in `argv` that live through the call.
        extern "C" fn entry(
            ctx: *mut ::redis_module::raw::RedisModuleCtx,
            argv: *mut *mut ::redis_module::raw::RedisModuleString,
            argc: ::std::ffi::c_int,
        ) -> ::std::ffi::c_int {
            $crate::entry::dispatch(ctx, argv, argc, |ctx, argv| {
                $handler(ctx, argv, &$command.counters)
            })
        }
        entry as $crate::entry::Entry
    }};
}

/// A command: everything Redis and INFO know of it, in one row.
pub struct Command {
    pub name: &'static CStr,
    pub entry: Entry,
    pub flags: &'static CStr,
    /// Which of its arguments are keys.
    pub keys: Keys,
    /// What COMMAND DOCS and COMMAND INFO show.
    pub doc: Doc,
    /// Its calls and units in INFO, and its keyspace event.
    pub counters: Counters,
}

impl Command {
    /// Creates the command under `name` (its own, or another for the same
    /// command); called at load. False when it could not be: the name is
    /// taken (the flags are the module's own, and valid).
    pub fn register(&self, ctx: &Context, name: &CStr) -> bool {
        let [first, last, step] = self.keys.positions();
        // SAFETY: called from RedisModule_OnLoad with a valid context;
        // Redis copies the name and flags.
        let created = unsafe {
            raw::RedisModule_CreateCommand.unwrap()(
                ctx.get_raw(),
                name.as_ptr(),
                Some(self.entry),
                self.flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        created == raw::REDISMODULE_OK as c_int
    }
}
