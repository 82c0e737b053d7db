//! redis-ratelimit: rate-limiting and throttling commands for Redis.
//! This file only registers the module; see DESIGN.md for the contract.

// Under `cargo test` the registration is left out, so the glue looks unused.
#![cfg_attr(test, allow(dead_code, unused_imports))]

mod algorithms;
mod args;
mod clock;
mod commands;
mod error;
mod key;
mod limit;
mod metadata;
mod replicate;
mod state;
mod stats;
mod throttle;

#[cfg(not(test))]
use state::RATELIMIT_TYPE;

/// At load, after the commands exist: command docs, key specs and ACL
/// categories, the `INFO ratelimit` section, and two module options: keys
/// signalled as modified (WATCH, client tracking) only when a command
/// really changes them, as Redis's own commands do, not whenever one is
/// opened for writing; and short reads while loading handled by the loader
/// (an error), not fatal to the server.
///
/// The module's arguments: `CL.THROTTLE` also registers RL.THROTTLE under
/// redis-cell's name; anything else fails the load.
fn init(ctx: &redis_module::Context, args: &[redis_module::RedisString]) -> redis_module::Status {
    use redis_module::raw;
    let mut cell_name = false;
    for arg in args {
        if arg.as_slice().eq_ignore_ascii_case(throttle::CELL_NAME.to_bytes()) {
            cell_name = true;
        } else {
            let arg = String::from_utf8_lossy(arg.as_slice());
            ctx.log_warning(&format!(
                "ratelimit: unknown module argument '{arg}' (the only one is {})",
                throttle::CELL_NAME.to_string_lossy()
            ));
            return redis_module::Status::Err;
        }
    }
    if cell_name {
        // SAFETY: called from RedisModule_OnLoad with a valid context.
        let created = unsafe {
            raw::RedisModule_CreateCommand.unwrap()(
                ctx.get_raw(),
                throttle::CELL_NAME.as_ptr(),
                Some(throttle::cell_command),
                c"write deny-oom fast".as_ptr(),
                1,
                1,
                1,
            )
        };
        if created != raw::REDISMODULE_OK as i32 {
            ctx.log_warning("ratelimit: could not register CL.THROTTLE (is redis-cell loaded?)");
            return redis_module::Status::Err;
        }
    }
    // SAFETY: called from RedisModule_OnLoad with a valid context.
    unsafe {
        // The options replace each other: all of them in one call.
        raw::RedisModule_SetModuleOptions.unwrap()(
            ctx.get_raw(),
            (raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED
                | raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS) as i32,
        );
        raw::RedisModule_RegisterInfoFunc.unwrap()(ctx.get_raw(), Some(stats::info));
    };
    match metadata::register(ctx, cell_name) {
        Ok(()) => redis_module::Status::Ok,
        Err(message) => {
            ctx.log_warning(&message);
            redis_module::Status::Err
        }
    }
}

// Unit tests run without Redis, so without its allocator.
#[cfg(not(test))]
redis_module::redis_module! {
    name: "ratelimit",
    version: 1,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [RATELIMIT_TYPE],
    init: init,
    commands: [
        ["RL.TOKENBUCKET", commands::token_bucket, "write deny-oom fast", 1, 1, 1, ""],
        ["RL.LEAKYBUCKET", commands::leaky_bucket, "write deny-oom fast", 1, 1, 1, ""],
        ["RL.FIXEDWINDOW", commands::fixed_window, "write deny-oom fast", 1, 1, 1, ""],
        ["RL.SLIDINGWINDOW", commands::sliding_window, "write deny-oom fast", 1, 1, 1, ""],
        ["RL.SLIDINGLOG", commands::sliding_log, "write deny-oom", 1, 1, 1, ""],
        // Its keys: the key spec set in `init` (numkeys), and the command
        // itself when asked (Redis 7.0's cluster routing asks it).
        ["RL.MULTI", commands::multi, "write deny-oom getkeys-api", 0, 0, 0, ""],
        ["RL.PEEK", commands::peek, "readonly fast", 1, 1, 1, ""],
        ["RL.REFUND", commands::refund, "write deny-oom", 1, 1, 1, ""],
        ["RL.SETSTATE", commands::set_state, "write deny-oom", 1, 1, 1, ""],
        ["RL.THROTTLE", throttle::throttle, "write deny-oom fast", 1, 1, 1, ""],
    ],
}
