//! redis-ratelimit: rate-limiting and throttling commands for Redis.
//! This file only registers the module and its commands; see DESIGN.md for
//! the contract.

// Under `cargo test` the registration is left out, so the glue looks unused.
#![cfg_attr(test, allow(dead_code, unused_imports))]

#[macro_use]
mod entry;
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

use std::ffi::{CStr, c_int};

use entry::Command;
#[cfg(not(test))]
use state::RATELIMIT_TYPE;

const ONE_KEY: [c_int; 3] = [1, 1, 1];

/// The module's commands: name, entry point, flags, and first key, last
/// key and step.
fn commands() -> [Command; 15] {
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
        command(c"RL.LOGAPPLY", entry!(commands::log_apply), c"write deny-oom", ONE_KEY),
        // O(held): not `fast`, like the sliding log.
        command(c"RL.ACQUIRE", entry!(commands::acquire), c"write deny-oom", ONE_KEY),
        command(c"RL.RELEASE", entry!(commands::release), c"write deny-oom", ONE_KEY),
        command(c"RL.RENEW", entry!(commands::renew), c"write deny-oom", ONE_KEY),
        command(c"RL.LEASEAPPLY", entry!(commands::lease_apply), c"write deny-oom", ONE_KEY),
        throttle_command(c"RL.THROTTLE"),
    ]
}

/// RL.THROTTLE, under its own name or (with the module argument
/// `CL.THROTTLE`) redis-cell's.
fn throttle_command(name: &'static CStr) -> Command {
    let entry = entry!(throttle::throttle);
    Command { name, entry, flags: c"write deny-oom fast", keys: ONE_KEY }
}

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
    replicate::init();
    let cell = cell_name.then(|| throttle_command(throttle::CELL_NAME));
    for command in commands().iter().chain(&cell) {
        if let Err(message) = command.register(ctx) {
            ctx.log_warning(&message);
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
}
