//! ACL: which users may call which RL.* commands, on every kind of server
//! the module loads into (issue 8 item 7; docs/commands.md, "ACL"). The
//! tests ask the server what it is and assert the exact
//! behaviour for that kind:
//!
//! - Redis 7.0 (Debian's): module commands carry no ACL category at all.
//!   Only rules that name the commands work there.
//! - Redis 7.2+ and Valkey: the module adds `@ratelimit`; RL.PEEK is in
//!   `@read`, every other RL.* command in `@write`.
//! - Redis with a built-in `ratelimit` category (the GCRA builds): adding
//!   the category fails with EBUSY, and our commands join the existing one.

mod common;

use common::{COMMANDS, Server};

/// What the server offers modules for ACL categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Redis before 7.2: no categories for module commands.
    NoModuleCategories,
    /// The module added `@ratelimit` itself.
    ModuleCategory,
    /// `@ratelimit` is built into the server and holds its own commands too.
    BuiltInCategory,
}

/// The server's own commands in a built-in `@ratelimit` (Redis's GCRA builds).
const BUILT_IN_RATELIMIT: [&str; 2] = ["gcra", "gcrasetvalue"];

fn version(info: &str, field: &str) -> Option<(u32, u32)> {
    info.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).map(|v| {
        let parts: Vec<u32> = v.trim().split('.').map(|p| p.parse().unwrap_or(0)).collect();
        (parts[0], parts[1])
    })
}

fn kind(con: &mut redis::Connection) -> Kind {
    let info: String = redis::cmd("INFO").arg("server").query(con).unwrap();
    let has_categories = version(&info, "valkey_version").is_some()
        || version(&info, "redis_version").is_some_and(|v| v >= (7, 2));
    if !has_categories {
        return Kind::NoModuleCategories;
    }
    // A built-in category lists the server's own commands besides ours.
    if acl_cat_ratelimit(con).iter().any(|c| !c.starts_with("rl.")) {
        Kind::BuiltInCategory
    } else {
        Kind::ModuleCategory
    }
}

/// `ACL CAT ratelimit`, lower-cased and sorted.
fn acl_cat_ratelimit(con: &mut redis::Connection) -> Vec<String> {
    let mut names: Vec<String> = redis::cmd("ACL").arg("CAT").arg("ratelimit").query(con).unwrap();
    names.iter_mut().for_each(|n| *n = n.to_lowercase());
    names.sort();
    names
}

/// A valid call of each command, each on its own key.
fn call(command: &str) -> Vec<String> {
    let key = format!("acl:{command}");
    let args: Vec<&str> = match command {
        "RL.MULTI" => vec!["1", &key, "*", "TOKENBUCKET", "5", "1", "1"],
        "RL.PEEK" => vec![&key, "TOKENBUCKET", "5", "1", "*"],
        "RL.REFUND" => vec![&key, "TOKENBUCKET", "5", "1", "*", "1"],
        "RL.SETSTATE" => vec![&key, "TOKENBUCKET", "0", "0"],
        "RL.LOGAPPLY" => vec![&key, "APPEND", "0", "5", "1", "PXAT", "32503680000000"],
        "RL.THROTTLE" => vec![&key, "5", "10", "60", "1"],
        "RL.RELEASE" => vec![&key, "1", "*"],
        "RL.RENEW" => vec![&key, "1", "10", "*"],
        "RL.LEASEAPPLY" => vec![&key, "ACQUIRE", "1000000", "1", "2000000", "1"],
        _ => vec![&key, "5", "1", "*", "1"],
    };
    std::iter::once(command).chain(args).map(str::to_string).collect()
}

/// Whether `user` may run `args`: Ok, or an error other than NOPERM, means
/// the ACL let it through.
fn permitted(user: &mut redis::Connection, args: &[String]) -> bool {
    let mut cmd = redis::cmd(&args[0]);
    cmd.arg(&args[1..]);
    match cmd.query::<redis::Value>(user) {
        Ok(_) => true,
        Err(e) if e.code() == Some("NOPERM") => false,
        Err(e) => panic!("{args:?}: {e}"),
    }
}

/// Creates `name` with `rules` (after `on >pw ~*`) and connects as it.
fn user(server: &Server, name: &str, rules: &[&str]) -> redis::Connection {
    let con = &mut server.connect();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", name, "reset", "on", ">pw", "~*"])
        .arg(rules)
        .query(con)
        .unwrap_or_else(|e| panic!("ACL SETUSER {name} {rules:?}: {e}"));
    redis::Client::open(format!("redis://{name}:pw@127.0.0.1:{}/", server.port))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// The commands of COMMANDS that `rules` let a user call, in COMMANDS' order.
fn allowed_by(server: &Server, rules: &[&str]) -> Vec<&'static str> {
    let u = &mut user(server, "probe", rules);
    COMMANDS.into_iter().filter(|c| permitted(u, &call(c))).collect()
}

fn may_get(server: &Server, rules: &[&str]) -> bool {
    let u = &mut user(server, "probe", rules);
    permitted(u, &["GET".to_string(), "x".to_string()])
}

/// The ACL categories `COMMAND INFO` lists for a command, sorted.
fn categories(con: &mut redis::Connection, command: &str) -> Vec<String> {
    let info: Vec<redis::Value> =
        redis::cmd("COMMAND").arg("INFO").arg(command).query(con).unwrap();
    let redis::Value::Array(fields) = &info[0] else { panic!("{command}: {info:?}") };
    let mut cats: Vec<String> = redis::from_redis_value(fields[6].clone()).unwrap();
    cats.sort();
    cats
}

const WRITERS: [&str; 14] = [
    "RL.TOKENBUCKET",
    "RL.LEAKYBUCKET",
    "RL.FIXEDWINDOW",
    "RL.SLIDINGWINDOW",
    "RL.SLIDINGLOG",
    "RL.MULTI",
    "RL.REFUND",
    "RL.THROTTLE",
    "RL.SETSTATE",
    "RL.LOGAPPLY",
    "RL.ACQUIRE",
    "RL.RELEASE",
    "RL.RENEW",
    "RL.LEASEAPPLY",
];

#[test]
fn command_info_lists_the_categories_the_server_gives_modules() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let kind = kind(con);
    for command in COMMANDS {
        let expected: Vec<&str> = match (kind, command) {
            (Kind::NoModuleCategories, _) => vec![],
            (_, "RL.PEEK") => vec!["@ratelimit", "@read"],
            _ => vec!["@ratelimit", "@write"],
        };
        assert_eq!(categories(con, command), expected, "{kind:?}: {command}");
    }
}

#[test]
fn ratelimit_category_holds_every_command_where_categories_exist() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let kind = kind(con);
    if kind == Kind::NoModuleCategories {
        // Redis 7.0: the module cannot add a category, and none exists.
        let e = redis::cmd("ACL").arg("CAT").arg("ratelimit").query::<Vec<String>>(con);
        assert_eq!(e.unwrap_err().detail(), Some("Unknown category 'ratelimit'"));
        return;
    }
    let categories: Vec<String> = redis::cmd("ACL").arg("CAT").query(con).unwrap();
    assert!(categories.iter().any(|c| c == "ratelimit"), "{categories:?}");
    let info: String = redis::cmd("INFO").arg("server").query(con).unwrap();
    if version(&info, "valkey_version").is_some_and(|v| v == (8, 0)) {
        // Valkey 8.0's `ACL CAT category` lists no module command at all
        // (not even under `write`); COMMAND INFO and the users in the
        // other tests show that ours are in the category all the same.
        assert_eq!(acl_cat_ratelimit(con), Vec::<String>::new());
        return;
    }
    let mut expected: Vec<String> = COMMANDS.iter().map(|c| c.to_lowercase()).collect();
    if kind == Kind::BuiltInCategory {
        // Ours joined the server's own category instead of none at all.
        expected.extend(BUILT_IN_RATELIMIT.iter().map(|c| c.to_string()));
    }
    expected.sort();
    assert_eq!(acl_cat_ratelimit(con), expected, "{kind:?}");
}

/// On Redis 7.0 `+@write` grants no module command and `-@write` denies
/// none: a `+@all -@write` user can still write through every RL.*
/// command. This is the limitation docs/operations.md documents for 7.0.
#[test]
fn write_category_rules_match_the_server_kind() {
    let server = Server::start(&[]);
    let kind = kind(&mut server.connect());
    let write = allowed_by(&server, &["+@write"]);
    let all_but_write = allowed_by(&server, &["+@all", "-@write"]);
    let read = allowed_by(&server, &["+@read"]);
    match kind {
        Kind::NoModuleCategories => {
            assert_eq!(write, Vec::<&str>::new());
            assert_eq!(all_but_write, COMMANDS.to_vec());
            assert_eq!(read, Vec::<&str>::new());
        }
        Kind::ModuleCategory | Kind::BuiltInCategory => {
            assert_eq!(write, WRITERS.to_vec(), "{kind:?}");
            assert_eq!(all_but_write, vec!["RL.PEEK"], "{kind:?}");
            assert_eq!(read, vec!["RL.PEEK"], "{kind:?}");
        }
    }
}

#[test]
fn ratelimit_category_grants_every_command_and_nothing_else() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    if kind(con) == Kind::NoModuleCategories {
        let e = redis::cmd("ACL")
            .arg(&["SETUSER", "limiter", "on", ">pw", "~*", "+@ratelimit"])
            .query::<()>(con)
            .unwrap_err();
        assert_eq!(
            e.detail(),
            Some(
                "Error in ACL SETUSER modifier '+@ratelimit': Unknown command or category name in ACL"
            )
        );
        return;
    }
    assert_eq!(allowed_by(&server, &["+@ratelimit"]), COMMANDS.to_vec());
    assert!(!may_get(&server, &["+@ratelimit"]));
    assert!(may_get(&server, &["+@read"]), "the probe itself works");
}

/// The rules docs/operations.md gives for Redis 7.0, where categories do not reach
/// module commands: name each command. They work the same on every server.
#[test]
fn rules_naming_the_commands_work_on_every_server() {
    let server = Server::start(&[]);
    // A limiter user: the five algorithms and RL.PEEK, nothing else.
    let limiter = [
        "+rl.tokenbucket",
        "+rl.leakybucket",
        "+rl.fixedwindow",
        "+rl.slidingwindow",
        "+rl.slidinglog",
        "+rl.peek",
    ];
    assert_eq!(
        allowed_by(&server, &limiter),
        vec![
            "RL.TOKENBUCKET",
            "RL.LEAKYBUCKET",
            "RL.FIXEDWINDOW",
            "RL.SLIDINGWINDOW",
            "RL.SLIDINGLOG",
            "RL.PEEK"
        ]
    );
    assert!(!may_get(&server, &limiter));
    // A read-only user: RL.PEEK alone.
    assert_eq!(allowed_by(&server, &["+rl.peek"]), vec!["RL.PEEK"]);
    // Everything but the module's writes: `+@all` then each one taken away.
    let mut no_writes = vec!["+@all"];
    let minus: Vec<String> = WRITERS.iter().map(|c| format!("-{}", c.to_lowercase())).collect();
    no_writes.extend(minus.iter().map(String::as_str));
    assert_eq!(allowed_by(&server, &no_writes), vec!["RL.PEEK"]);
    assert!(may_get(&server, &no_writes));
}
