//! What Redis shows about the commands: COMMAND DOCS and INFO (summary,
//! complexity, arguments, key specs), and, where the server has ACL
//! categories for module commands (Redis 7.2+, Valkey), `@ratelimit` with
//! `@write` or `@read`.

use std::ffi::{CStr, c_int};
use std::mem::{size_of, zeroed};
use std::ptr;

use redis_module::{Context, raw};

const SINCE: &CStr = c"0.1.0";

const VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
};

struct Arg {
    name: &'static CStr,
    kind: raw::RedisModuleCommandArgType,
    flags: u32,
    token: Option<&'static CStr>,
    summary: &'static CStr,
    /// The arguments of a block.
    subargs: &'static [Arg],
}

const fn arg(
    name: &'static CStr,
    kind: raw::RedisModuleCommandArgType,
    summary: &'static CStr,
) -> Arg {
    Arg { name, kind, flags: 0, token: None, summary, subargs: &[] }
}

/// `arg` as an optional argument.
const fn optional(arg: Arg) -> Arg {
    Arg { flags: raw::REDISMODULE_CMD_ARG_OPTIONAL, ..arg }
}

const KEY: Arg =
    arg(c"key", raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY, c"the limiter's key");
const INTEGER: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER;
const DOUBLE: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE;
const BLOCK: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK;
const STRING: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
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
    ..arg(
        c"unix-time-milliseconds",
        raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
        c"when the key expires",
    )
};
const CAPACITY: Arg = arg(c"capacity", INTEGER, c"most units the bucket holds");
const RATE: Arg = arg(c"rate", DOUBLE, c"units per second");
const LIMIT: Arg = arg(c"limit", INTEGER, c"most units per window");
const WINDOW: Arg = arg(c"window", DOUBLE, c"window length in seconds");

/// Which arguments are keys.
#[derive(Clone, Copy)]
enum Keys {
    /// The first argument, read and written.
    First,
    /// The first argument, only read.
    FirstReadOnly,
    /// `numkeys key [key ...]`, read and written.
    Counted,
}

pub struct Doc {
    pub name: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    /// Arguments including the command name: this many, or at least minus
    /// this many when negative.
    arity: c_int,
    keys: Keys,
    /// ACL categories, where the server has them for modules.
    categories: &'static CStr,
    args: &'static [Arg],
}

const WRITE: &CStr = c"ratelimit write";
const READ: &CStr = c"ratelimit read";

pub const DOCS: [Doc; 15] = [
    Doc {
        name: c"RL.TOKENBUCKET",
        summary: c"Takes n tokens from a bucket of capacity tokens refilled at rate per second.",
        complexity: c"O(1)",
        arity: -5,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, CAPACITY, RATE, NOW, N],
    },
    Doc {
        name: c"RL.LEAKYBUCKET",
        summary: c"Queues n units in a queue of capacity draining at rate per second; replies with the delay.",
        complexity: c"O(1)",
        arity: -5,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, CAPACITY, RATE, NOW, N],
    },
    Doc {
        name: c"RL.FIXEDWINDOW",
        summary: c"Counts n units in the epoch-aligned window holding now, up to limit per window.",
        complexity: c"O(1)",
        arity: -5,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    Doc {
        name: c"RL.SLIDINGWINDOW",
        summary: c"Admits n units when the weighted count of the last window leaves room under limit.",
        complexity: c"O(1)",
        arity: -5,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    Doc {
        name: c"RL.SLIDINGLOG",
        summary: c"Admits n units when fewer than limit - n were admitted in the last window seconds.",
        complexity: c"O(T) amortized when admitted, T the runs that left the window since the last call; O(L) when denied, L the runs in the window",
        arity: -5,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    Doc {
        name: c"RL.MULTI",
        summary: c"Takes n units from every limit, each on its own key, when all of them admit; else nothing.",
        complexity: c"O(K), K the keys (at most 1000), plus O(L) for each sliding log, O(H) for each concurrency limit",
        arity: -8,
        keys: Keys::Counted,
        categories: WRITE,
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
    Doc {
        name: c"RL.PEEK",
        summary: c"Replies what a limit would answer to taking n units, and takes nothing.",
        complexity: c"O(1), O(L) for a sliding log",
        arity: -6,
        keys: Keys::FirstReadOnly,
        categories: READ,
        args: &[KEY, ALGORITHM, A, B, NOW, N],
    },
    Doc {
        name: c"RL.REFUND",
        summary: c"Gives back up to n units taken earlier; a limiter fresh again is deleted.",
        complexity: c"O(1), O(L) for a sliding log",
        arity: 7,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, ALGORITHM, A, B, NOW, N_REQUIRED],
    },
    Doc {
        name: c"RL.SETSTATE",
        summary: c"Writes a limiter's state as given; how changes reach replicas and the AOF.",
        complexity: c"O(F), F the fields given; APPEND to leases O(H), H the leases held",
        arity: -3,
        keys: Keys::First,
        categories: WRITE,
        args: &[
            KEY,
            arg(c"kind", STRING, c"TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG, THROTTLE or CONCURRENCY"),
            Arg {
                flags: raw::REDISMODULE_CMD_ARG_OPTIONAL,
                token: Some(c"APPEND"),
                ..arg(c"append", raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN, c"adds a log's runs or leases to the key's state")
            },
            Arg {
                flags: raw::REDISMODULE_CMD_ARG_MULTIPLE | raw::REDISMODULE_CMD_ARG_OPTIONAL,
                ..arg(c"field", INTEGER, c"the kind's fields")
            },
            optional(PXAT),
        ],
    },
    Doc {
        name: c"RL.LOGAPPLY",
        summary: c"Applies a sliding log's change as given; how its changes reach replicas and the AOF.",
        complexity: c"O(L), L the runs in the log",
        arity: -7,
        keys: Keys::First,
        categories: WRITE,
        args: &[
            KEY,
            arg(c"change", STRING, c"APPEND (an admitted call's units) or REMOVE (a refund's)"),
            arg(c"cutoff_us", INTEGER, c"the units logged before this Unix microsecond leave first"),
            optional(arg(c"at_us", INTEGER, c"APPEND only: the Unix microsecond of the new units")),
            N_REQUIRED,
            PXAT,
        ],
    },
    Doc {
        name: c"RL.ACQUIRE",
        summary: c"Takes n slots under a new lease when at most limit are then held; replies with the lease id.",
        complexity: c"O(H), H the leases held",
        arity: -5,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, LIMIT_SLOTS, LEASE, NOW, N],
    },
    Doc {
        name: c"RL.RELEASE",
        summary: c"Frees a lease's slots; a second release is harmless; the last one deletes the key.",
        complexity: c"O(H), H the leases held",
        arity: 4,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, LEASE_ID, NOW],
    },
    Doc {
        name: c"RL.RENEW",
        summary: c"Makes a held lease last until now + lease.",
        complexity: c"O(H), H the leases held",
        arity: 5,
        keys: Keys::First,
        categories: WRITE,
        args: &[KEY, LEASE_ID, LEASE, NOW],
    },
    Doc {
        name: c"RL.LEASEAPPLY",
        summary: c"Applies a lease's change as given; how concurrency limits' changes reach replicas and the AOF.",
        complexity: c"O(H), H the leases held",
        arity: -5,
        keys: Keys::First,
        categories: WRITE,
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
    THROTTLE,
];

const LIMIT_SLOTS: Arg = arg(c"limit", INTEGER, c"most slots held at once");

/// RL.THROTTLE, redis-cell's CL.THROTTLE on our data type.
const THROTTLE: Doc = Doc {
    name: c"RL.THROTTLE",
    summary: c"redis-cell's CL.THROTTLE (GCRA): admits quantity units at count_per_period per period seconds, bursts up to max_burst + 1.",
    complexity: c"O(1)",
    arity: -5,
    keys: Keys::First,
    categories: WRITE,
    args: &[
        KEY,
        arg(c"max_burst", INTEGER, c"units admitted at once beyond the steady rate; the limit is max_burst + 1"),
        arg(c"count_per_period", INTEGER, c"units per period"),
        arg(c"period", INTEGER, c"seconds"),
        optional(arg(c"quantity", INTEGER, c"units to take, 1 by default; 0 only looks")),
    ],
};

/// The same command under redis-cell's name, when the module argument
/// `CL.THROTTLE` registers it.
const CL_THROTTLE: Doc = Doc { name: c"CL.THROTTLE", ..THROTTLE };

fn raw_arg(arg: &Arg, key_spec_index: c_int) -> raw::RedisModuleCommandArg {
    raw::RedisModuleCommandArg {
        name: arg.name.as_ptr(),
        type_: arg.kind,
        key_spec_index,
        token: arg.token.map_or(ptr::null(), CStr::as_ptr),
        summary: arg.summary.as_ptr(),
        since: ptr::null(),
        flags: arg.flags as c_int,
        deprecated_since: ptr::null(),
        subargs: ptr::null_mut(),
        display_text: ptr::null(),
    }
}

fn key_spec(keys: Keys) -> raw::RedisModuleCommandKeySpec {
    // SAFETY: an all-zero key spec is the terminator Redis expects, and a
    // valid start for the one below.
    let mut spec: raw::RedisModuleCommandKeySpec = unsafe { zeroed() };
    let access = match keys {
        Keys::FirstReadOnly => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
        Keys::First | Keys::Counted => {
            raw::REDISMODULE_CMD_KEY_RW
                | raw::REDISMODULE_CMD_KEY_ACCESS
                | raw::REDISMODULE_CMD_KEY_UPDATE
        }
    };
    spec.flags = u64::from(access);
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    match keys {
        Keys::First | Keys::FirstReadOnly => {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            spec.fk.range.lastkey = 0;
            spec.fk.range.keystep = 1;
            spec.fk.range.limit = 0;
        }
        Keys::Counted => {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
            spec.fk.keynum.keynumidx = 0;
            spec.fk.keynum.firstkey = 1;
            spec.fk.keynum.keystep = 1;
        }
    }
    spec
}

/// Sets each command's docs and key spec (Redis copies them) and, where
/// the server supports them for modules, its ACL categories: `@ratelimit`,
/// added here unless the server has it built in, and `@write` or `@read`.
/// Run at load, after the commands exist; `cl_throttle` when CL.THROTTLE
/// is one of them, `skipped` the commands whose names were taken.
pub fn register(ctx: &Context, cl_throttle: bool, skipped: &[&CStr]) -> Result<(), String> {
    let ctx = ctx.get_raw();
    // SAFETY: called during OnLoad with a valid context; every pointer
    // handed to Redis lives until the call returns, and Redis copies it.
    unsafe {
        if let Some(add) = raw::RedisModule_AddACLCategory {
            // Fails with EBUSY where the category exists already (Redis
            // builds with GCRA have it): the commands join it all the same.
            add(ctx, c"ratelimit".as_ptr());
        }
        let docs = DOCS.iter().chain(cl_throttle.then_some(&CL_THROTTLE));
        for doc in docs.filter(|doc| !skipped.contains(&doc.name)) {
            let command = raw::RedisModule_GetCommand.unwrap()(ctx, doc.name.as_ptr());
            if command.is_null() {
                return Err(format!("{:?} is not registered", doc.name));
            }
            // A block's arguments live in `blocks` until Redis has copied them.
            let mut blocks: Vec<Vec<raw::RedisModuleCommandArg>> = Vec::new();
            let mut args: Vec<raw::RedisModuleCommandArg> = Vec::new();
            for arg in doc.args {
                let is_key = arg.kind == raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY;
                let mut raw = raw_arg(arg, if is_key { 0 } else { -1 });
                if !arg.subargs.is_empty() {
                    let mut block: Vec<_> = arg.subargs.iter().map(|a| raw_arg(a, -1)).collect();
                    block.push(zeroed());
                    raw.subargs = block.as_mut_ptr();
                    blocks.push(block);
                }
                args.push(raw);
            }
            args.push(zeroed());
            let mut key_specs = [key_spec(doc.keys), zeroed()];
            let mut info = raw::RedisModuleCommandInfo {
                version: &VERSION,
                summary: doc.summary.as_ptr(),
                complexity: doc.complexity.as_ptr(),
                since: SINCE.as_ptr(),
                history: ptr::null_mut(),
                tips: ptr::null(),
                arity: doc.arity,
                key_specs: key_specs.as_mut_ptr(),
                args: args.as_mut_ptr(),
            };
            if raw::RedisModule_SetCommandInfo.unwrap()(command, &mut info)
                != raw::REDISMODULE_OK as c_int
            {
                return Err(format!("could not set the info of {:?}", doc.name));
            }
            if let Some(set) = raw::RedisModule_SetCommandACLCategories
                && set(command, doc.categories.as_ptr()) != raw::REDISMODULE_OK as c_int
            {
                return Err(format!("could not set the ACL categories of {:?}", doc.name));
            }
        }
    }
    Ok(())
}
