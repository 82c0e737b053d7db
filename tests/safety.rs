//! Operators' limits (issue 8: never crash, never lose): out
//! of memory under `noeviction` every write command gets Redis's own OOM
//! error and changes nothing while reads still answer; MODULE UNLOAD is
//! refused while the module's data type is in use.

mod common;

use common::{Server, err, ints, snapshot};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A valid call of every write command, each on its own key, all of which
/// would change or create something.
fn writes() -> Vec<Vec<&'static str>> {
    vec![
        vec!["RL.TOKENBUCKET", "tb", "10", "1", "*", "1"],
        vec!["RL.LEAKYBUCKET", "lb", "10", "1", "*", "1"],
        vec!["RL.FIXEDWINDOW", "fw", "10", "60", "*", "1"],
        vec!["RL.SLIDINGWINDOW", "sw", "10", "60", "*", "1"],
        vec!["RL.SLIDINGLOG", "sl", "10", "60", "*", "1"],
        vec![
            "RL.MULTI",
            "2",
            "tb",
            "new",
            "*",
            "TOKENBUCKET",
            "10",
            "1",
            "1",
            "FIXEDWINDOW",
            "10",
            "60",
            "1",
        ],
        vec!["RL.REFUND", "fw", "FIXEDWINDOW", "10", "60", "*", "1"],
        vec!["RL.SETSTATE", "new", "FIXEDWINDOW", "1700000000000000", "1"],
    ]
}

fn used_memory(con: &mut redis::Connection) -> u64 {
    common::info_field(con, "memory", "used_memory").parse().unwrap()
}

#[test]
fn out_of_memory_every_write_gets_the_oom_error_and_changes_nothing() {
    let server = Server::start(&["--maxmemory-policy", "noeviction"]);
    let con = &mut server.connect();
    // One key per algorithm, made while there is memory.
    for write in &writes()[..5] {
        assert_eq!(ints(con, write)[0], 1, "{write:?}");
    }
    let keys: Vec<String> = ["tb", "lb", "fw", "sw", "sl", "new"].map(String::from).to_vec();
    // Just above what is used; then values of 20 kB until Redis refuses one
    // (it counts the request's own buffers too, so that can come before
    // INFO's used_memory passes the limit).
    let limit = used_memory(con) + 100_000;
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(limit).query(con).unwrap();
    let mut fillers = 0;
    let refused = loop {
        let set = redis::cmd("SET").arg(fillers).arg(vec![b'x'; 20_000]).query::<()>(con);
        match set {
            Ok(()) if fillers < 10 => fillers += 1,
            other => break other.unwrap_err(),
        }
    };
    assert_eq!(refused.code(), Some("OOM"), "{refused}");
    let before = snapshot(con, &keys);

    for write in writes() {
        assert_eq!(err(con, &write), OOM, "{write:?}");
    }
    // Reads still answer: the token bucket holds 9 of 10 (at most a few
    // ms have passed, at 1 token/s: floor(9.00x) = 9), so one more would
    // be admitted and leave 8.
    let peek = ints(con, &["RL.PEEK", "tb", "TOKENBUCKET", "10", "1", "*"]);
    assert_eq!(peek[..4], [1, 8, 10, 0]);
    assert_eq!(snapshot(con, &keys), before);
    assert_eq!(redis::cmd("PING").query::<String>(con).unwrap(), "PONG");

    // Without the limit, writes work again.
    let _: () = redis::cmd("CONFIG").arg(&["SET", "maxmemory", "0"]).query(con).unwrap();
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "tb", "10", "1", "*", "1"])[0], 1);
}

fn unload(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("MODULE").arg("UNLOAD").arg("ratelimit").query(con)
}

fn module_loaded(con: &mut redis::Connection) -> bool {
    let list: redis::Value = redis::cmd("MODULE").arg("LIST").query(con).unwrap();
    format!("{list:?}").contains("ratelimit")
}

const UNLOAD_REFUSED: &str =
    "Error unloading module: the module exports one or more module-side data types, can't unload";

/// Redis refuses to unload a module that exports a data type: the
/// module's commands and keys stay as they were.
#[test]
fn module_unload_is_refused_while_a_key_of_the_type_exists() {
    let server = Server::start(&["--enable-module-command", "yes"]);
    let con = &mut server.connect();
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "1", "*", "1"])[0], 1);
    let refused = unload(con).unwrap_err();
    assert_eq!(refused.detail(), Some(UNLOAD_REFUSED));
    assert!(module_loaded(con));
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "1", "*", "1"])[..2], [1, 8]);
}

/// Not even with no key left: Redis 7.0, Valkey 8.0 and the newest Redis
/// refuse to unload any module that registered a data type (moduleUnload
/// checks `listLength(module->types)`, not the keys). So unloading is never
/// possible; a restart without the module is the way to remove it.
#[test]
fn module_unload_is_refused_after_flushall_too() {
    let server = Server::start(&["--enable-module-command", "yes"]);
    let con = &mut server.connect();
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "1", "*", "1"])[0], 1);
    let _: () = redis::cmd("FLUSHALL").query(con).unwrap();
    assert_eq!(unload(con).unwrap_err().detail(), Some(UNLOAD_REFUSED));
    assert!(module_loaded(con));
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "1", "*", "1"])[..2], [1, 9]);
}
