//! What operators see: COMMAND INFO and COMMAND DOCS for every command,
//! the INFO ratelimit section, and keyspace events.

mod common;

use std::time::Duration;

use common::{COMMANDS, Server, ints};
use redis::Value;

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// A flat [name, value, name, value...] reply as pairs.
fn pairs(value: &Value) -> Vec<(String, Value)> {
    match value {
        Value::Array(items) => items.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect(),
        Value::Map(items) => items.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        other => panic!("not a map: {other:?}"),
    }
}

fn field(value: &Value, name: &str) -> Value {
    pairs(value).into_iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name}")).1
}

#[test]
fn command_info_has_flags_arity_and_key_spec() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    for command in COMMANDS {
        let reply: Value = redis::cmd("COMMAND").arg("INFO").arg(command).query(con).unwrap();
        let Value::Array(outer) = reply else { panic!("{reply:?}") };
        let Value::Array(info) = &outer[0] else { panic!("{outer:?}") };
        assert_eq!(text(&info[0]), command);
        let arity = match command {
            "RL.SETSTATE" => "-3",
            "RL.LOGAPPLY" => "-7",
            "RL.MULTI" => "-8",
            "RL.PEEK" => "-6",
            "RL.REFUND" => "7",
            "RL.RELEASE" => "4",
            "RL.RENEW" => "5",
            _ => "-5",
        };
        assert_eq!(text(&info[1]), arity, "{command}");
        let Value::Array(flags) = &info[2] else { panic!() };
        let flags: Vec<String> = flags.iter().map(text).collect();
        let expected: &[&str] = match command {
            "RL.PEEK" => &["readonly", "module", "fast"],
            "RL.SLIDINGLOG" | "RL.SETSTATE" | "RL.LOGAPPLY" | "RL.REFUND" | "RL.ACQUIRE"
            | "RL.RELEASE" | "RL.RENEW" | "RL.LEASEAPPLY" => &["write", "denyoom", "module"],
            "RL.MULTI" => &["write", "denyoom", "module", "movablekeys"],
            _ => &["write", "denyoom", "module", "fast"],
        };
        assert_eq!(flags, expected, "{command}");
        // first key, last key, step
        let range = if command == "RL.MULTI" { ["0", "0", "0"] } else { ["1", "1", "1"] };
        assert_eq!([&info[3], &info[4], &info[5]].map(text), range, "{command}");
        let Value::Array(specs) = &info[8] else { panic!("{info:?}") };
        assert_eq!(specs.len(), 1, "{command}");
        let spec_flags: Vec<String> = match field(&specs[0], "flags") {
            Value::Array(f) => f.iter().map(text).collect(),
            other => panic!("{other:?}"),
        };
        let access: &[&str] =
            if command == "RL.PEEK" { &["RO", "access"] } else { &["RW", "access", "update"] };
        assert_eq!(spec_flags, access, "{command}");
        let find_keys = text(&field(&specs[0], "find_keys"));
        let expected = if command == "RL.MULTI" { "keynum" } else { "range" };
        assert!(find_keys.contains(expected), "{command}: {find_keys}");
    }
    // GETKEYS follows the key specs: every key of RL.MULTI.
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg(&["GETKEYS", "RL.MULTI", "2", "a", "b", "*", "TOKENBUCKET", "1", "1", "1"])
        .arg(&["FIXEDWINDOW", "1", "1", "1"])
        .query(con)
        .unwrap();
    assert_eq!(keys, ["a", "b"]);
}

#[test]
fn command_docs_describe_every_argument() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let reply: Value = redis::cmd("COMMAND").arg("DOCS").arg(&COMMANDS).query(con).unwrap();
    let docs = pairs(&reply);
    assert_eq!(docs.len(), COMMANDS.len());
    for (command, doc) in docs {
        assert!(COMMANDS.contains(&command.as_str()), "{command}");
        assert_eq!(text(&field(&doc, "since")), "0.1.0");
        assert_eq!(text(&field(&doc, "module")), "ratelimit");
        assert!(!text(&field(&doc, "summary")).is_empty());
        let complexity = text(&field(&doc, "complexity"));
        let names: Vec<String> = match field(&doc, "arguments") {
            Value::Array(args) => args.iter().map(|a| text(&field(a, "name"))).collect(),
            other => panic!("{other:?}"),
        };
        match command.as_str() {
            "RL.TOKENBUCKET" | "RL.LEAKYBUCKET" => {
                assert_eq!(names, ["key", "capacity", "rate", "now", "n"]);
                assert_eq!(complexity, "O(1)");
            }
            "RL.SETSTATE" => assert_eq!(names, ["key", "kind", "field", "unix-time-milliseconds"]),
            "RL.LOGAPPLY" => assert_eq!(
                names,
                ["key", "change", "cutoff_us", "at_us", "n", "unix-time-milliseconds"]
            ),
            "RL.MULTI" => assert_eq!(names, ["numkeys", "key", "now", "limit"]),
            "RL.PEEK" => assert_eq!(names, ["key", "algorithm", "a", "b", "now", "n"]),
            "RL.REFUND" => assert_eq!(names, ["key", "algorithm", "a", "b", "now", "n"]),
            "RL.THROTTLE" => {
                assert_eq!(names, ["key", "max_burst", "count_per_period", "period", "quantity"])
            }
            "RL.SLIDINGLOG" => {
                assert_eq!(names, ["key", "limit", "window", "now", "n"]);
                assert_eq!(complexity, "O(L), L the calls logged within the window");
            }
            "RL.ACQUIRE" => {
                assert_eq!(names, ["key", "limit", "lease", "now", "n"]);
                assert_eq!(complexity, "O(H), H the leases held");
            }
            "RL.RELEASE" => assert_eq!(names, ["key", "lease_id", "now"]),
            "RL.RENEW" => assert_eq!(names, ["key", "lease_id", "lease", "now"]),
            "RL.LEASEAPPLY" => assert_eq!(
                names,
                ["key", "change", "at_us", "id", "expires_us", "n", "unix-time-milliseconds"]
            ),
            _ => {
                assert_eq!(names, ["key", "limit", "window", "now", "n"]);
                assert_eq!(complexity, "O(1)");
            }
        }
    }
}

fn info(con: &mut redis::Connection) -> Vec<(String, String)> {
    let text: String = redis::cmd("INFO").arg("ratelimit").query(con).unwrap();
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn info_value(con: &mut redis::Connection, name: &str) -> String {
    info(con).into_iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name}")).1
}

#[test]
fn info_counts_calls_units_and_keys() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    assert_eq!(info_value(con, "ratelimit_keys"), "0");
    // Token bucket: 3 admitted units in 2 calls, 5 denied in 1, a peek.
    ints(con, &["RL.TOKENBUCKET", "a", "4", "0.001", "1000", "1"]);
    ints(con, &["RL.TOKENBUCKET", "a", "4", "0.001", "1000", "2"]);
    ints(con, &["RL.TOKENBUCKET", "a", "4", "0.001", "1000", "5"]);
    ints(con, &["RL.TOKENBUCKET", "b", "4", "0.001", "1000", "0"]);
    ints(con, &["RL.SLIDINGLOG", "c", "4", "100", "1000", "4"]);
    ints(con, &["RL.SLIDINGLOG", "c", "4", "100", "1000", "1"]);
    assert_eq!(info_value(con, "ratelimit_tokenbucket"), "calls=4,admitted_units=3,denied_units=5");
    assert_eq!(info_value(con, "ratelimit_slidinglog"), "calls=2,admitted_units=4,denied_units=1");
    assert_eq!(info_value(con, "ratelimit_leakybucket"), "calls=0,admitted_units=0,denied_units=0");
    assert_eq!(info_value(con, "ratelimit_keys"), "2");
    let _: () = redis::cmd("COPY").arg("a").arg("a2").query(con).unwrap();
    assert_eq!(info_value(con, "ratelimit_keys"), "3");
    let _: () = redis::cmd("DEL").arg(&["a", "c"]).query(con).unwrap();
    assert_eq!(info_value(con, "ratelimit_keys"), "1");
    let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query(con).unwrap();
    for _ in 0..100 {
        if info_value(con, "ratelimit_keys") == "0" {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("keys not counted down after FLUSHALL ASYNC");
}

#[test]
fn info_counts_acquire_release_and_renew() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // 3 slots taken in 2 calls, 2 denied in 1, a look; 1 lease renewed of
    // 2 tries, 1 released of 2 tries; the leases' key counted once.
    ints(con, &["RL.ACQUIRE", "c", "3", "100", "1000", "1"]);
    ints(con, &["RL.ACQUIRE", "c", "3", "100", "1000", "2"]);
    ints(con, &["RL.ACQUIRE", "c", "3", "100", "1000", "2"]);
    ints(con, &["RL.ACQUIRE", "c", "3", "100", "1000", "0"]);
    ints(con, &["RL.RENEW", "c", "1", "100", "1000"]);
    ints(con, &["RL.RENEW", "c", "5", "100", "1000"]);
    assert_eq!(info_value(con, "ratelimit_keys"), "1");
    ints(con, &["RL.RELEASE", "c", "2", "1000"]);
    ints(con, &["RL.RELEASE", "c", "2", "1000"]);
    assert_eq!(info_value(con, "ratelimit_acquire"), "calls=4,admitted_units=3,denied_units=2");
    assert_eq!(info_value(con, "ratelimit_renew"), "calls=2,renewed_leases=1");
    assert_eq!(info_value(con, "ratelimit_release"), "calls=2,released_leases=1");
    ints(con, &["RL.RELEASE", "c", "1", "1000"]);
    assert_eq!(info_value(con, "ratelimit_keys"), "0");
}

#[test]
fn info_counts_multi_peek_and_refund() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let multi = |con: &mut redis::Connection, n: [&str; 2]| {
        let _: redis::Value = redis::cmd("RL.MULTI")
            .arg(&["2", "m:a", "m:b", "1000", "TOKENBUCKET", "4", "0.001", n[0]])
            .arg(&["FIXEDWINDOW", "3", "1000000", n[1]])
            .query(con)
            .unwrap();
    };
    // Admitted: 1 + 2 units; denied (the window holds 3): 1 + 2 units.
    multi(con, ["1", "2"]);
    multi(con, ["1", "2"]);
    assert_eq!(info_value(con, "ratelimit_multi"), "calls=2,admitted_units=3,denied_units=3");
    // A peek that would admit 3 tokens of the 3 left, one that would not admit 4.
    ints(con, &["RL.PEEK", "m:a", "TOKENBUCKET", "4", "0.001", "1000", "3"]);
    ints(con, &["RL.PEEK", "m:a", "TOKENBUCKET", "4", "0.001", "1000", "4"]);
    assert_eq!(info_value(con, "ratelimit_peek"), "calls=2,admitted_units=3,denied_units=4");
    ints(con, &["RL.REFUND", "m:b", "FIXEDWINDOW", "3", "1000000", "1000", "2"]);
    ints(con, &["RL.REFUND", "missing", "FIXEDWINDOW", "3", "1000000", "1000", "5"]);
    assert_eq!(info_value(con, "ratelimit_refund"), "calls=2,refunded_units=7");
    // The single-key commands' counters saw none of it.
    assert_eq!(info_value(con, "ratelimit_tokenbucket"), "calls=0,admitted_units=0,denied_units=0");
}

#[test]
fn multi_and_refund_emit_their_events() {
    let server = Server::start(&["--notify-keyspace-events", "Eg$d"]);
    let mut listener = server.connect();
    let mut pubsub = listener.as_pubsub();
    common::listen_keyevents(&mut pubsub);
    let con = &mut server.connect();
    let mut next = || common::next_keyevent(&mut pubsub);
    let event = |name: &str, key: &str| (format!("__keyevent@0__:{name}"), key.to_string());
    let _: redis::Value = redis::cmd("RL.MULTI")
        .arg(&["2", "a", "b", "1000", "TOKENBUCKET", "4", "0.001", "1"])
        .arg(&["FIXEDWINDOW", "3", "1000000", "0"])
        .query(con)
        .unwrap();
    // Only the key that took units is written; the look at b writes nothing.
    assert_eq!(next(), event("rl.multi", "a"));
    ints(con, &["RL.REFUND", "a", "TOKENBUCKET", "4", "0.001", "1000", "1"]);
    // Full again: the refund deletes the key, as Redis deletes an emptied list.
    assert_eq!(next(), event("rl.refund", "a"));
    assert_eq!(next(), event("del", "a"));
    let _: () = redis::cmd("SET").arg("sentinel").arg("1").query(con).unwrap();
    assert_eq!(next(), event("set", "sentinel"));
}

#[test]
fn writes_emit_keyspace_events_and_nothing_else_does() {
    let server = Server::start(&["--notify-keyspace-events", "Ed"]);
    let mut listener = server.connect();
    let mut pubsub = listener.as_pubsub();
    common::listen_keyevents(&mut pubsub);
    let con = &mut server.connect();
    let mut next = || common::next_keyevent(&mut pubsub);
    let slow = |command: &str| if command.ends_with("BUCKET") { "0.001" } else { "100000" };
    for command in &COMMANDS[..5] {
        let key = format!("{command}:k");
        assert_eq!(ints(con, &[command, &key, "1", slow(command), "1000", "1"])[0], 1);
        // Denied and peek: no event; the next one comes from another key.
        assert_eq!(ints(con, &[command, &key, "1", slow(command), "1000", "1"])[0], 0);
        assert_eq!(ints(con, &[command, &key, "1", slow(command), "1000", "0"])[0], 1);
        let channel = format!("__keyevent@0__:{}", command.to_lowercase());
        assert_eq!(next(), (channel.clone(), key));
        assert_eq!(ints(con, &[command, "other", "1", slow(command), "1000", "1"])[0], 1);
        assert_eq!(next(), (channel, "other".to_string()));
        let _: () = redis::cmd("DEL").arg("other").query(con).unwrap();
    }
    let _: String =
        redis::cmd("RL.SETSTATE").arg(&["s", "TOKENBUCKET", "0", "0"]).query(con).unwrap();
    assert_eq!(next(), ("__keyevent@0__:rl.setstate".to_string(), "s".to_string()));
    // A sliding log's change as a replica receives it: the events of the
    // calls it comes from.
    let far = "32503680000000";
    for (change, event) in [
        (&["APPEND", "0", "5", "2", "PXAT", far][..], "rl.slidinglog"),
        (&["REMOVE", "0", "1", "PXAT", far][..], "rl.refund"),
    ] {
        let _: String = redis::cmd("RL.LOGAPPLY").arg("l").arg(change).query(con).unwrap();
        assert_eq!(next(), (format!("__keyevent@0__:{event}"), "l".to_string()));
    }
    // Leases: taking, renewing and releasing each emit their event; a
    // denied acquire, a look and a release of nothing emit none (the last
    // release also emits the generic `del`, a class not enabled here).
    let event = |name: &str| (format!("__keyevent@0__:{name}"), "c".to_string());
    assert_eq!(ints(con, &["RL.ACQUIRE", "c", "1", "100", "1000", "1"])[5], 1);
    assert_eq!(next(), event("rl.acquire"));
    assert_eq!(ints(con, &["RL.ACQUIRE", "c", "1", "100", "1000", "1"])[0], 0);
    assert_eq!(ints(con, &["RL.ACQUIRE", "c", "1", "100", "1000", "0"])[0], 1);
    assert_eq!(ints(con, &["RL.RELEASE", "c", "7", "1000"]), [0, 1, 100_000]);
    assert_eq!(ints(con, &["RL.RENEW", "c", "1", "200", "1000"]), [1, 1, 200_000]);
    assert_eq!(next(), event("rl.renew"));
    assert_eq!(ints(con, &["RL.RELEASE", "c", "1", "1000"]), [1, 0, 0]);
    assert_eq!(next(), event("rl.release"));
    // As a replica receives them.
    let far = "32503680000000";
    for (change, name) in [
        (&["ACQUIRE", "5", "1", "10", "1", "PXAT", far][..], "rl.acquire"),
        (&["RENEW", "6", "1", "20", "PXAT", far], "rl.renew"),
        (&["RELEASE", "7", "1"], "rl.release"),
    ] {
        let _: String = redis::cmd("RL.LEASEAPPLY").arg("c").arg(change).query(con).unwrap();
        assert_eq!(next(), event(name));
    }
}
