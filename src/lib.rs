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
mod state;

#[cfg(not(test))]
use {commands::init, state::RATELIMIT_TYPE};

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
        ["RL.SETSTATE", commands::set_state, "write deny-oom", 1, 1, 1, ""],
    ],
}
