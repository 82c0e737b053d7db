//! What Redis shows about the commands: COMMAND DOCS and INFO (summary,
//! complexity, arguments, key specs), and, where the server has it (Redis
//! 7.2+, Valkey), the `ratelimit` ACL category.

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
}

const fn arg(
    name: &'static CStr,
    kind: raw::RedisModuleCommandArgType,
    summary: &'static CStr,
) -> Arg {
    Arg { name, kind, flags: 0, token: None, summary }
}

const KEY: Arg =
    arg(c"key", raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY, c"the limiter's key");
const INTEGER: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER;
const DOUBLE: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE;
const STRING: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
const NOW: Arg =
    arg(c"now", STRING, c"Unix seconds with up to 6 decimals, or * for the server clock");
const N: Arg = Arg {
    flags: raw::REDISMODULE_CMD_ARG_OPTIONAL,
    ..arg(c"n", INTEGER, c"units to take, 1 by default; 0 only looks")
};
const CAPACITY: Arg = arg(c"capacity", INTEGER, c"most units the bucket holds");
const RATE: Arg = arg(c"rate", DOUBLE, c"units per second");
const LIMIT: Arg = arg(c"limit", INTEGER, c"most units per window");
const WINDOW: Arg = arg(c"window", DOUBLE, c"window length in seconds");

pub struct Doc {
    pub name: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    /// Arguments including the command name: at least this many.
    min_arity: c_int,
    args: &'static [Arg],
}

pub const DOCS: [Doc; 6] = [
    Doc {
        name: c"RL.TOKENBUCKET",
        summary: c"Takes n tokens from a bucket of capacity tokens refilled at rate per second.",
        complexity: c"O(1)",
        min_arity: 5,
        args: &[KEY, CAPACITY, RATE, NOW, N],
    },
    Doc {
        name: c"RL.LEAKYBUCKET",
        summary: c"Queues n units in a queue of capacity draining at rate per second; replies with the delay.",
        complexity: c"O(1)",
        min_arity: 5,
        args: &[KEY, CAPACITY, RATE, NOW, N],
    },
    Doc {
        name: c"RL.FIXEDWINDOW",
        summary: c"Counts n units in the epoch-aligned window holding now, up to limit per window.",
        complexity: c"O(1)",
        min_arity: 5,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    Doc {
        name: c"RL.SLIDINGWINDOW",
        summary: c"Admits n units when the weighted count of the last window leaves room under limit.",
        complexity: c"O(1)",
        min_arity: 5,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    Doc {
        name: c"RL.SLIDINGLOG",
        summary: c"Admits n units when fewer than limit - n were admitted in the last window seconds.",
        complexity: c"O(L), L the calls logged within the window",
        min_arity: 5,
        args: &[KEY, LIMIT, WINDOW, NOW, N],
    },
    Doc {
        name: c"RL.SETSTATE",
        summary: c"Writes a limiter's state as given; how changes reach replicas and the AOF.",
        complexity: c"O(F), F the fields given",
        min_arity: 4,
        args: &[
            KEY,
            arg(c"kind", STRING, c"TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW or SLIDINGLOG"),
            Arg { flags: raw::REDISMODULE_CMD_ARG_MULTIPLE, ..arg(c"field", INTEGER, c"the kind's fields") },
            Arg {
                flags: raw::REDISMODULE_CMD_ARG_OPTIONAL,
                token: Some(c"PXAT"),
                ..arg(c"unix-time-milliseconds", raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME, c"when the key expires")
            },
        ],
    },
];

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

/// The key is the first argument: read, written and returned in the reply.
fn key_spec() -> raw::RedisModuleCommandKeySpec {
    // SAFETY: an all-zero key spec is the terminator Redis expects, and a
    // valid start for the one below.
    let mut spec: raw::RedisModuleCommandKeySpec = unsafe { zeroed() };
    spec.flags = u64::from(
        raw::REDISMODULE_CMD_KEY_RW
            | raw::REDISMODULE_CMD_KEY_ACCESS
            | raw::REDISMODULE_CMD_KEY_UPDATE,
    );
    spec.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    spec.bs.index.pos = 1;
    spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    spec.fk.range.lastkey = 0;
    spec.fk.range.keystep = 1;
    spec.fk.range.limit = 0;
    spec
}

/// Sets each command's docs and key spec (Redis copies them), and adds the
/// `ratelimit` ACL category where the server supports one. Run at load,
/// after the commands exist.
pub fn register(ctx: &Context) -> Result<(), String> {
    let ctx = ctx.get_raw();
    // SAFETY: called during OnLoad with a valid context; every pointer
    // handed to Redis lives until the call returns, and Redis copies it.
    unsafe {
        let acl = raw::RedisModule_AddACLCategory
            .is_some_and(|add| add(ctx, c"ratelimit".as_ptr()) == raw::REDISMODULE_OK as c_int);
        for doc in &DOCS {
            let command = raw::RedisModule_GetCommand.unwrap()(ctx, doc.name.as_ptr());
            if command.is_null() {
                return Err(format!("{:?} is not registered", doc.name));
            }
            let mut args: Vec<raw::RedisModuleCommandArg> = doc
                .args
                .iter()
                .enumerate()
                .map(|(i, arg)| raw_arg(arg, if i == 0 { 0 } else { -1 }))
                .collect();
            args.push(zeroed());
            let mut key_specs = [key_spec(), zeroed()];
            let mut info = raw::RedisModuleCommandInfo {
                version: &VERSION,
                summary: doc.summary.as_ptr(),
                complexity: doc.complexity.as_ptr(),
                since: SINCE.as_ptr(),
                history: ptr::null_mut(),
                tips: ptr::null(),
                arity: -doc.min_arity,
                key_specs: key_specs.as_mut_ptr(),
                args: args.as_mut_ptr(),
            };
            if raw::RedisModule_SetCommandInfo.unwrap()(command, &mut info)
                != raw::REDISMODULE_OK as c_int
            {
                return Err(format!("could not set the info of {:?}", doc.name));
            }
            if let (true, Some(set)) = (acl, raw::RedisModule_SetCommandACLCategories)
                && set(command, c"ratelimit".as_ptr()) != raw::REDISMODULE_OK as c_int
            {
                return Err(format!("could not set the ACL category of {:?}", doc.name));
            }
        }
    }
    Ok(())
}
