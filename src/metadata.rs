//! What Redis shows about the commands: COMMAND DOCS and INFO (summary,
//! complexity, arguments, key specs), and, where the server has ACL
//! categories for module commands (Redis 7.2+, Valkey), `@ratelimit` with
//! `@write` or `@read`.

use std::ffi::{CStr, c_int};
use std::mem::{size_of, zeroed};
use std::ptr;

use redis_module::{Context, raw};

use crate::entry::Command;

const SINCE: &CStr = c"0.1.0";

const VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
};

/// An argument, as COMMAND DOCS shows it.
pub struct Arg {
    pub name: &'static CStr,
    pub kind: raw::RedisModuleCommandArgType,
    pub flags: u32,
    pub token: Option<&'static CStr>,
    pub summary: &'static CStr,
    /// The arguments of a block.
    pub subargs: &'static [Arg],
}

pub const fn arg(
    name: &'static CStr,
    kind: raw::RedisModuleCommandArgType,
    summary: &'static CStr,
) -> Arg {
    Arg { name, kind, flags: 0, token: None, summary, subargs: &[] }
}

/// `arg` as an optional argument.
pub const fn optional(arg: Arg) -> Arg {
    Arg { flags: raw::REDISMODULE_CMD_ARG_OPTIONAL, ..arg }
}

/// The kinds of argument.
pub const INTEGER: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER;
pub const DOUBLE: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE;
pub const BLOCK: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK;
pub const STRING: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
pub const UNIX_TIME: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME;
pub const PURE_TOKEN: raw::RedisModuleCommandArgType =
    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN;

/// Which arguments are keys.
#[derive(Clone, Copy)]
pub enum Keys {
    /// The first argument, read and written.
    First,
    /// The first argument, only read.
    FirstReadOnly,
    /// `numkeys key [key ...]`, read and written.
    Counted,
}

impl Keys {
    /// First key, last key and step, as RedisModule_CreateCommand takes
    /// them: 0 0 0 for RL.MULTI, whose keys are its key spec and, for
    /// Redis 7.0's cluster routing, the command itself when asked
    /// (`getkeys-api`).
    pub fn positions(self) -> [c_int; 3] {
        match self {
            Keys::First | Keys::FirstReadOnly => [1, 1, 1],
            Keys::Counted => [0, 0, 0],
        }
    }

    /// ACL categories, where the server has them for modules: `@read` for
    /// a command that only reads.
    fn categories(self) -> &'static CStr {
        match self {
            Keys::FirstReadOnly => c"ratelimit read",
            Keys::First | Keys::Counted => c"ratelimit write",
        }
    }
}

/// What COMMAND DOCS and COMMAND INFO show of a command.
pub struct Doc {
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// Arguments including the command name: this many, or at least minus
    /// this many when negative.
    pub arity: c_int,
    pub args: &'static [Arg],
}

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
/// Run at load, after the commands exist: `registered`, each under its
/// name.
pub fn register(ctx: &Context, registered: &[(&CStr, &Command)]) -> Result<(), String> {
    let ctx = ctx.get_raw();
    // SAFETY: called during OnLoad with a valid context; every pointer
    // handed to Redis lives until the call returns, and Redis copies it.
    unsafe {
        if let Some(add) = raw::RedisModule_AddACLCategory {
            // Fails with EBUSY where the category exists already (Redis
            // builds with GCRA have it): the commands join it all the same.
            add(ctx, c"ratelimit".as_ptr());
        }
        for &(name, command) in registered {
            let doc = &command.doc;
            let raw_command = raw::RedisModule_GetCommand.unwrap()(ctx, name.as_ptr());
            if raw_command.is_null() {
                return Err(format!("{name:?} is not registered"));
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
            let mut key_specs = [key_spec(command.keys), zeroed()];
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
            if raw::RedisModule_SetCommandInfo.unwrap()(raw_command, &mut info)
                != raw::REDISMODULE_OK as c_int
            {
                return Err(format!("could not set the info of {name:?}"));
            }
            let categories = command.keys.categories();
            if let Some(set) = raw::RedisModule_SetCommandACLCategories
                && set(raw_command, categories.as_ptr()) != raw::REDISMODULE_OK as c_int
            {
                return Err(format!("could not set the ACL categories of {name:?}"));
            }
        }
    }
    Ok(())
}
