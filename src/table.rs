//! The module's commands, one row each: name, handler, flags, keys, what
//! COMMAND DOCS shows, INFO counters and keyspace event. `lib.rs`
//! registers them, `metadata.rs` sets their docs, `stats.rs` reports
//! their counters, in this order.

use std::ffi::CStr;

use redis_module::raw;

use crate::algorithms::concurrency::Concurrency;
use crate::algorithms::fixed_window::FixedWindow;
use crate::algorithms::leaky_bucket::LeakyBucket;
use crate::algorithms::sliding_log::SlidingLog;
use crate::algorithms::sliding_window::SlidingWindow;
use crate::algorithms::token_bucket::TokenBucket;
use crate::entry::Command;
use crate::metadata::{
    Arg, BLOCK, DOUBLE, Doc, INTEGER, Keys, PURE_TOKEN, STRING, UNIX_TIME, arg, optional,
};
use crate::stats::Counters;
use crate::{commands, throttle};

/// Every command, in INFO's order.
pub static COMMANDS: [&Command; 15] = [
    &TOKEN_BUCKET,
    &LEAKY_BUCKET,
    &FIXED_WINDOW,
    &SLIDING_WINDOW,
    &SLIDING_LOG,
    &MULTI,
    &PEEK,
    &REFUND,
    &SET_STATE,
    &LOG_APPLY,
    &THROTTLE,
    &ACQUIRE,
    &RELEASE,
    &RENEW,
    &LEASE_APPLY,
];

const WRITE: &CStr = c"write deny-oom";
const WRITE_FAST: &CStr = c"write deny-oom fast";

/// `RL.TOKENBUCKET key capacity rate now [n]`
pub static TOKEN_BUCKET: Command = Command {
    name: c"RL.TOKENBUCKET",
    entry: entry!(commands::single::<TokenBucket>, TOKEN_BUCKET),
    flags: WRITE_FAST,
    keys: Keys::First,
    doc: Doc {
        summary: c"Takes n tokens from a bucket of capacity tokens refilled at rate per second.",
        complexity: c"O(1)",
        arity: -5,
        args: &[KEY, CAPACITY, RATE, NOW, N],
    },
    counters: Counters::units(c"tokenbucket", c"rl.tokenbucket"),
};

/// `RL.LEAKYBUCKET key capacity rate now [n]`: replies with a sixth field,
/// `delay_ms`.
pub static LEAKY_BUCKET: Command = Command {
    name: c"RL.LEAKYBUCKET",
    entry: entry!(commands::single::<LeakyBucket>, LEAKY_BUCKET),
    flags: WRITE_FAST,
    keys: Keys::First,
    doc: Doc {
        summary: c"Queues n units in a queue of capacity draining at rate per second; replies with the delay.",
        complexity: c"O(1)",
        arity: -5,
        args: &[KEY, CAPACITY, RATE, NOW, N],
    },
    counters: Counters::units(c"leakybucket", c"rl.leakybucket"),
};

/// `RL.FIXEDWINDOW key limit window now [n]`
pub static FIXED_WINDOW: Command = Command {
    name: c"RL.FIXEDWINDOW",
    entry: entry!(commands::single::<FixedWindow>, FIXED_WINDOW),
    flags: WRITE_FAST,
    keys: Keys::First,
    doc: Doc {
        summary: c"Counts n units in the epoch-aligned window holding now, up to limit per window.",
        complexity: c"O(1)",
        arity: -5,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    counters: Counters::units(c"fixedwindow", c"rl.fixedwindow"),
};

/// `RL.SLIDINGWINDOW key limit window now [n]`
pub static SLIDING_WINDOW: Command = Command {
    name: c"RL.SLIDINGWINDOW",
    entry: entry!(commands::single::<SlidingWindow>, SLIDING_WINDOW),
    flags: WRITE_FAST,
    keys: Keys::First,
    doc: Doc {
        summary:
            c"Admits n units when the weighted count of the last window leaves room under limit.",
        complexity: c"O(1)",
        arity: -5,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    counters: Counters::units(c"slidingwindow", c"rl.slidingwindow"),
};

/// `RL.SLIDINGLOG key limit window now [n]`: not `fast`, its log may be
/// scanned.
pub static SLIDING_LOG: Command = Command {
    name: c"RL.SLIDINGLOG",
    entry: entry!(commands::single::<SlidingLog>, SLIDING_LOG),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary: c"Admits n units when fewer than limit - n were admitted in the last window seconds.",
        complexity: c"O(T) amortized when admitted, T the runs that left the window since the last call; O(L) when denied, L the runs in the window",
        arity: -5,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    counters: Counters::units(c"slidinglog", c"rl.slidinglog"),
};

/// `RL.MULTI numkeys key [key ...] now ALGORITHM a b n [ALGORITHM a b n ...]`
pub static MULTI: Command = Command {
    name: c"RL.MULTI",
    entry: entry!(commands::multi, MULTI),
    flags: c"write deny-oom getkeys-api",
    keys: Keys::Counted,
    doc: Doc {
        summary: c"Takes n units from every limit, each on its own key, when all of them admit; else nothing.",
        complexity: c"O(K), K the keys (at most 1000), plus O(L) for each sliding log, O(H) for each concurrency limit",
        arity: -8,
        args: &[
            arg(c"numkeys", INTEGER, c"how many keys, and limits, follow"),
            Arg { flags: raw::REDISMODULE_CMD_ARG_MULTIPLE, ..KEY },
            NOW,
            Arg {
                flags: raw::REDISMODULE_CMD_ARG_MULTIPLE,
                subargs: &[ALGORITHM, A, B, N_REQUIRED],
                ..arg(c"limit", BLOCK, c"ALGORITHM a b n, one for each key, in the keys' order")
            },
        ],
    },
    counters: Counters::units(c"multi", c"rl.multi"),
};

/// `RL.PEEK key ALGORITHM a b now [n]`: not `fast`, a sliding log or leases
/// may be scanned.
pub static PEEK: Command = Command {
    name: c"RL.PEEK",
    entry: entry!(commands::peek, PEEK),
    flags: c"readonly",
    keys: Keys::FirstReadOnly,
    doc: Doc {
        summary: c"Replies what a limit would answer to taking n units, and takes nothing.",
        complexity: c"O(1), O(L) for a sliding log",
        arity: -6,
        args: &[KEY, ALGORITHM, A, B, NOW, N],
    },
    counters: Counters::units(c"peek", c"rl.peek"),
};

/// `RL.REFUND key ALGORITHM a b now n`
pub static REFUND: Command = Command {
    name: c"RL.REFUND",
    entry: entry!(commands::refund, REFUND),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary: c"Gives back up to n units taken earlier; a limiter fresh again is deleted.",
        complexity: c"O(1), O(L) for a sliding log",
        arity: 7,
        args: &[KEY, ALGORITHM, A, B, NOW, N_REQUIRED],
    },
    counters: Counters::done(c"refund", c"rl.refund", c"refunded_units"),
};

/// `RL.SETSTATE key kind [APPEND] field... [PXAT unix_ms]`
pub static SET_STATE: Command = Command {
    name: c"RL.SETSTATE",
    entry: entry!(commands::set_state, SET_STATE),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary: c"Writes a limiter's state as given; how changes reach replicas and the AOF.",
        complexity: c"O(F), F the fields given; APPEND to leases O(H), H the leases held",
        arity: -3,
        args: &[
            KEY,
            arg(c"kind", STRING, c"TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG, THROTTLE or CONCURRENCY"),
            Arg {
                flags: raw::REDISMODULE_CMD_ARG_OPTIONAL,
                token: Some(c"APPEND"),
                ..arg(c"append", PURE_TOKEN, c"adds a log's runs or leases to the key's state")
            },
            Arg {
                flags: raw::REDISMODULE_CMD_ARG_MULTIPLE | raw::REDISMODULE_CMD_ARG_OPTIONAL,
                ..arg(c"field", INTEGER, c"the kind's fields")
            },
            optional(PXAT),
        ],
    },
    counters: Counters::uncounted(c"rl.setstate"),
};

/// `RL.LOGAPPLY key APPEND|REMOVE ... PXAT unix_ms`: emits the event of
/// the call whose change it applies.
pub static LOG_APPLY: Command = Command {
    name: c"RL.LOGAPPLY",
    entry: entry!(commands::log_apply, LOG_APPLY),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary:
            c"Applies a sliding log's change as given; how its changes reach replicas and the AOF.",
        complexity: c"O(L), L the runs in the log",
        arity: -7,
        args: &[
            KEY,
            arg(c"change", STRING, c"APPEND (an admitted call's units) or REMOVE (a refund's)"),
            arg(
                c"cutoff_us",
                INTEGER,
                c"the units logged before this Unix microsecond leave first",
            ),
            optional(arg(c"at_us", INTEGER, c"APPEND only: the Unix microsecond of the new units")),
            N_REQUIRED,
            PXAT,
        ],
    },
    counters: Counters::none(),
};

/// `RL.THROTTLE key max_burst count_per_period period [quantity]`, and
/// CL.THROTTLE when the module argument registers it.
pub static THROTTLE: Command = Command {
    name: c"RL.THROTTLE",
    entry: entry!(throttle::throttle, THROTTLE),
    flags: WRITE_FAST,
    keys: Keys::First,
    doc: Doc {
        summary: c"redis-cell's CL.THROTTLE (GCRA): admits quantity units at count_per_period per period seconds, bursts up to max_burst + 1.",
        complexity: c"O(1)",
        arity: -5,
        args: &[
        KEY,
        arg(c"max_burst", INTEGER, c"units admitted at once beyond the steady rate; the limit is max_burst + 1"),
        arg(c"count_per_period", INTEGER, c"units per period"),
        arg(c"period", INTEGER, c"seconds"),
        optional(arg(c"quantity", INTEGER, c"units to take, 1 by default; 0 only looks")),
        ],
    },
    counters: Counters::units(c"throttle", c"rl.throttle"),
};

/// `RL.ACQUIRE key limit lease now [n]`: replies with a sixth field,
/// `lease_id`; not `fast`, O(held) like the sliding log.
pub static ACQUIRE: Command = Command {
    name: c"RL.ACQUIRE",
    entry: entry!(commands::single::<Concurrency>, ACQUIRE),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary: c"Takes n slots under a new lease when at most limit are then held; replies with the lease id.",
        complexity: c"O(H), H the leases held",
        arity: -5,
        args: &[KEY, LIMIT_SLOTS, LEASE, NOW, N],
    },
    counters: Counters::units(c"acquire", c"rl.acquire"),
};

/// `RL.RELEASE key lease_id now`
pub static RELEASE: Command = Command {
    name: c"RL.RELEASE",
    entry: entry!(commands::release, RELEASE),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary:
            c"Frees a lease's slots; a second release is harmless; the last one deletes the key.",
        complexity: c"O(H), H the leases held",
        arity: 4,
        args: &[KEY, LEASE_ID, NOW],
    },
    counters: Counters::done(c"release", c"rl.release", c"released_leases"),
};

/// `RL.RENEW key lease_id lease now`
pub static RENEW: Command = Command {
    name: c"RL.RENEW",
    entry: entry!(commands::renew, RENEW),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary: c"Makes a held lease last until now + lease.",
        complexity: c"O(H), H the leases held",
        arity: 5,
        args: &[KEY, LEASE_ID, LEASE, NOW],
    },
    counters: Counters::done(c"renew", c"rl.renew", c"renewed_leases"),
};

/// `RL.LEASEAPPLY key ACQUIRE|RELEASE|RENEW ... [PXAT unix_ms]`: emits the
/// event of the call whose change it applies.
pub static LEASE_APPLY: Command = Command {
    name: c"RL.LEASEAPPLY",
    entry: entry!(commands::lease_apply, LEASE_APPLY),
    flags: WRITE,
    keys: Keys::First,
    doc: Doc {
        summary: c"Applies a lease's change as given; how concurrency limits' changes reach replicas and the AOF.",
        complexity: c"O(H), H the leases held",
        arity: -5,
        args: &[
            KEY,
            arg(c"change", STRING, c"ACQUIRE, RELEASE or RENEW"),
            arg(c"at_us", INTEGER, c"the change's Unix microsecond; leases run out by then leave first"),
            arg(c"id", INTEGER, c"the lease's id"),
            optional(arg(c"expires_us", INTEGER, c"ACQUIRE and RENEW: the Unix microsecond the lease runs out")),
            optional(arg(c"n", INTEGER, c"ACQUIRE: the slots the lease holds")),
            optional(PXAT),
        ],
    },
    counters: Counters::none(),
};

const KEY: Arg =
    arg(c"key", raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY, c"the limiter's key");
const NOW: Arg =
    arg(c"now", STRING, c"Unix seconds with up to 6 decimals, or * for the server clock");
const N: Arg = optional(arg(c"n", INTEGER, c"units to take, 1 by default; 0 only looks"));
const N_REQUIRED: Arg = arg(c"n", INTEGER, c"units");
const ALGORITHM: Arg = arg(
    c"algorithm",
    STRING,
    c"TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG or CONCURRENCY",
);
const A: Arg = arg(c"a", INTEGER, c"the algorithm's capacity or limit");
const B: Arg =
    arg(c"b", DOUBLE, c"the algorithm's rate (units per second), window or lease (seconds)");
const LEASE: Arg = arg(c"lease", DOUBLE, c"seconds a lease lasts unless released or renewed");
const LEASE_ID: Arg = arg(c"lease_id", INTEGER, c"the id RL.ACQUIRE replied with");
/// `PXAT unix-time-milliseconds`: the key's expiry, as replicas receive it.
const PXAT: Arg = Arg {
    token: Some(c"PXAT"),
    ..arg(c"unix-time-milliseconds", UNIX_TIME, c"when the key expires")
};
const CAPACITY: Arg = arg(c"capacity", INTEGER, c"most units the bucket holds");
const RATE: Arg = arg(c"rate", DOUBLE, c"units per second");
const LIMIT: Arg = arg(c"limit", INTEGER, c"most units per window");
const WINDOW: Arg = arg(c"window", DOUBLE, c"window length in seconds");
const LIMIT_SLOTS: Arg = arg(c"limit", INTEGER, c"most slots held at once");
