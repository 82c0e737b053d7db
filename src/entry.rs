//! The command table and the functions Redis calls. The handlers borrow
//! Redis's own argument vector: redis-module's wrapper would retain every
//! argument, collect them in a Vec and release them again on every call,
//! about a sixth of a denied call's time.

use std::ffi::{CStr, c_int};
use std::mem::ManuallyDrop;

use redis_module::{Context, RedisResult, RedisString, raw};

use crate::{commands, throttle};

type Handler = fn(&Context, &[RedisString]) -> RedisResult;

/// Calls `handler` with the arguments Redis passed, borrowed for the call.
#[inline(always)]
fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: Handler,
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

/// An `extern "C"` entry point for a handler.
macro_rules! entry {
    ($handler:path) => {{
        extern "C" fn entry(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            dispatch(ctx, argv, argc, $handler)
        }
        entry as unsafe extern "C" fn(_, _, _) -> c_int
    }};
}

struct Command {
    name: &'static CStr,
    entry: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *mut *mut raw::RedisModuleString,
        c_int,
    ) -> c_int,
    flags: &'static CStr,
    /// First key, last key, step: 0 0 0 for RL.MULTI, whose keys are its
    /// key spec (set in `metadata`) and, for Redis 7.0's cluster routing,
    /// the command itself when asked (`getkeys-api`).
    keys: [c_int; 3],
}

const ONE_KEY: [c_int; 3] = [1, 1, 1];

fn commands() -> [Command; 10] {
    let command = |name, entry, flags, keys| Command { name, entry, flags, keys };
    let write_fast = c"write deny-oom fast";
    [
        command(c"RL.TOKENBUCKET", entry!(commands::token_bucket), write_fast, ONE_KEY),
        command(c"RL.LEAKYBUCKET", entry!(commands::leaky_bucket), write_fast, ONE_KEY),
        command(c"RL.FIXEDWINDOW", entry!(commands::fixed_window), write_fast, ONE_KEY),
        command(c"RL.SLIDINGWINDOW", entry!(commands::sliding_window), write_fast, ONE_KEY),
        command(c"RL.SLIDINGLOG", entry!(commands::sliding_log), c"write deny-oom", ONE_KEY),
        command(c"RL.MULTI", entry!(commands::multi), c"write deny-oom getkeys-api", [0; 3]),
        command(c"RL.PEEK", entry!(commands::peek), c"readonly fast", ONE_KEY),
        command(c"RL.REFUND", entry!(commands::refund), c"write deny-oom", ONE_KEY),
        command(c"RL.SETSTATE", entry!(commands::set_state), c"write deny-oom", ONE_KEY),
        command(c"RL.THROTTLE", entry!(throttle::throttle), write_fast, ONE_KEY),
    ]
}

/// Registers the commands, and RL.THROTTLE under redis-cell's name too
/// when `cell_name`.
pub fn register(ctx: &Context, cell_name: bool) -> Result<(), String> {
    let cell = Command {
        name: throttle::CELL_NAME,
        entry: entry!(throttle::throttle),
        flags: c"write deny-oom fast",
        keys: ONE_KEY,
    };
    for command in commands().iter().chain(cell_name.then_some(&cell)) {
        let [first, last, step] = command.keys;
        // SAFETY: called from RedisModule_OnLoad with a valid context;
        // Redis copies the name and flags.
        let created = unsafe {
            raw::RedisModule_CreateCommand.unwrap()(
                ctx.get_raw(),
                command.name.as_ptr(),
                Some(command.entry),
                command.flags.as_ptr(),
                first,
                last,
                step,
            )
        };
        if created != raw::REDISMODULE_OK as c_int {
            let name = command.name.to_string_lossy();
            return Err(format!(
                "ratelimit: could not register {name} (does redis-cell or another module have it?)"
            ));
        }
    }
    Ok(())
}
