//! redis-ratelimit: rate-limiting and throttling commands for Redis.
//! This file only registers the module and its commands; the commands'
//! contract is docs/commands.md, the code's map docs/architecture.md.

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
mod table;
mod throttle;

use std::ffi::CStr;

#[cfg(not(test))]
use state::RATELIMIT_TYPE;

/// Valkey 9's VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION: the module
/// lets `CLUSTER MIGRATESLOTS` move its keys. The source sends a slot as
/// its AOF rewrite's commands (RL.SETSTATE, a long state in bounded
/// commands, and the expiry), then the commands propagated for it while it
/// moves (RL.SETSTATE, RL.LOGAPPLY, RL.LEASEAPPLY, DEL): all of them replay
/// without a clock, and no value refers to another key or to its slot.
const VALKEY_HANDLE_ATOMIC_SLOT_MIGRATION: u32 = 1 << 5;

/// Whether the server is Valkey (`server_name:valkey` in INFO server).
fn is_valkey(ctx: &redis_module::Context) -> bool {
    use redis_module::raw;
    // SAFETY: a valid context; the field's text lives until the info is freed.
    unsafe {
        let (Some(get), Some(field), Some(free)) = (
            raw::RedisModule_GetServerInfo,
            raw::RedisModule_ServerInfoGetFieldC,
            raw::RedisModule_FreeServerInfo,
        ) else {
            return false;
        };
        let info = get(ctx.get_raw(), c"server".as_ptr());
        if info.is_null() {
            return false;
        }
        let name = field(info, c"server_name".as_ptr());
        let valkey = !name.is_null() && CStr::from_ptr(name) == c"valkey";
        free(ctx.get_raw(), info);
        valkey
    }
}

/// At load, after the commands exist: command docs, key specs and ACL
/// categories, the `INFO ratelimit` section, and two module options: keys
/// signalled as modified (WATCH, client tracking) only when a command
/// really changes them, as Redis's own commands do, not whenever one is
/// opened for writing; short reads while loading handled by the loader
/// (an error), not fatal to the server; and a replica's load into a
/// second database while it serves the first (`repl-diskless-load
/// swapdb`), which the module allows: its values hold no reference to
/// their database or to one another, and its only global, the key count
/// of INFO, counts values made and freed wherever they live.
///
/// A command whose name is taken already (by the server, as a Valkey with
/// its own RL.THROTTLE would, or by a module loaded first, as redis-cell
/// takes CL.THROTTLE) is skipped with a warning in the server's log, and
/// the others are registered.
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
    let own_names = table::COMMANDS.iter().map(|&command| (command.name, command));
    let cell = cell_name.then_some((throttle::CELL_NAME, &table::THROTTLE));
    let mut registered = Vec::new();
    for (name, command) in own_names.chain(cell) {
        if command.register(ctx, name) {
            registered.push((name, command));
        } else {
            let name = name.to_string_lossy();
            ctx.log_warning(&format!(
                "ratelimit: {name} is taken (by the server or a module loaded before): \
                 skipped; the module's other commands are registered"
            ));
        }
    }
    let options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED
        | raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
        | raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD;
    // A bit Redis does not define: set only where Valkey reads it.
    let valkey = if is_valkey(ctx) { VALKEY_HANDLE_ATOMIC_SLOT_MIGRATION } else { 0 };
    // SAFETY: called from RedisModule_OnLoad with a valid context.
    unsafe {
        // The options replace each other: all of them in one call.
        raw::RedisModule_SetModuleOptions.unwrap()(ctx.get_raw(), (options | valkey) as i32);
        raw::RedisModule_RegisterInfoFunc.unwrap()(ctx.get_raw(), Some(stats::info));
    };
    match metadata::register(ctx, &registered) {
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
