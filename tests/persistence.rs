//! State survives RDB (DEBUG RELOAD, restart) and AOF (replay, rewrite with
//! and without the RDB preamble) exactly: the same DUMP bytes and the same
//! absolute expiry.

mod common;

use common::{
    Server, aof_base, aof_commands, aof_server, contains, dump, ints, wait_for_aof_rewrite,
};

/// Every kind of limiter, each with parameters under which nothing expires
/// while a test runs.
const LIMITERS: [(&str, [&str; 2]); 6] = [
    ("RL.TOKENBUCKET", ["50", "0.001"]),
    ("RL.LEAKYBUCKET", ["50", "0.001"]),
    ("RL.FIXEDWINDOW", ["50", "1000000"]),
    ("RL.SLIDINGWINDOW", ["50", "1000000"]),
    ("RL.SLIDINGLOG", ["50", "1000000"]),
    ("RL.ACQUIRE", ["50", "1000000"]),
];
const KEYS: [&str; 3] = ["a", "b", "{user}:42"];

fn names() -> impl Iterator<Item = String> {
    LIMITERS.iter().flat_map(|(command, _)| {
        KEYS.iter().chain(&["fixed"]).map(move |key| format!("{command}:{key}"))
    })
}

/// Limiters of every kind in various states: on the server clock, and one
/// each at a fixed time.
fn fill(con: &mut redis::Connection, round: u64) {
    for (command, [a, b]) in LIMITERS {
        for (i, key) in KEYS.iter().enumerate() {
            let n = ((i as u64 + round) % 4 + 1).to_string();
            ints(con, &[command, &format!("{command}:{key}"), a, b, "*", &n]);
        }
        ints(con, &[command, &format!("{command}:fixed"), a, b, "1700000000.123456", "3"]);
    }
}

type Snapshot = Vec<(Option<Vec<u8>>, i64)>;

fn snapshot(con: &mut redis::Connection) -> Snapshot {
    names()
        .map(|key| {
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(con).unwrap();
            (dump(con, &key), at)
        })
        .collect()
}

fn assert_all_present(snap: &Snapshot) {
    for (payload, at) in snap {
        assert!(payload.is_some() && *at > 0, "{snap:?}");
    }
}

#[test]
fn debug_reload_keeps_state() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    fill(con, 0);
    let before = snapshot(con);
    assert_all_present(&before);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(con).unwrap();
    assert_eq!(snapshot(con), before);
    // The reloaded state behaves the same: 50 - 3 = 47 left at t0.
    let key = "RL.TOKENBUCKET:fixed";
    let reply = ints(con, &["RL.TOKENBUCKET", key, "50", "0.001", "1700000000.123456", "0"]);
    assert_eq!(reply, [1, 47, 50, 0, 3_000_000]);
    let key = "RL.ACQUIRE:fixed";
    let reply = ints(con, &["RL.ACQUIRE", key, "50", "1000000", "1700000000.123456", "1"]);
    assert_eq!(reply, [1, 46, 50, 0, 1_000_000_000, 2]);
}

#[test]
fn restart_from_rdb_keeps_state() {
    let mut server = Server::start(&[]);
    let before = {
        let con = &mut server.connect();
        fill(con, 1);
        let _: () = redis::cmd("SAVE").query(con).unwrap();
        snapshot(con)
    };
    assert_all_present(&before);
    server.restart();
    assert_eq!(snapshot(&mut server.connect()), before);
}

#[test]
fn aof_replay_keeps_state() {
    let mut server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let before = {
        let con = &mut server.connect();
        for round in 0..5 {
            fill(con, round);
        }
        snapshot(con)
    };
    assert_all_present(&before);
    server.restart();
    assert_eq!(snapshot(&mut server.connect()), before, "{}", server.log());
}

fn rewrite_then_restart(preamble: &str) {
    let mut server = aof_server(preamble);
    let before = {
        let con = &mut server.connect();
        fill(con, 0);
        wait_for_aof_rewrite(con); // the initial rewrite that turning AOF on starts
        let _: String = redis::cmd("BGREWRITEAOF").query(con).unwrap();
        wait_for_aof_rewrite(con);
        fill(con, 2); // these land in the incremental file after the rewrite
        snapshot(con)
    };
    let has_commands = contains(&aof_base(&server), b"RL.SETSTATE");
    assert_eq!(has_commands, preamble == "no", "the rewrite's form");
    assert_all_present(&before);
    server.restart();
    assert_eq!(snapshot(&mut server.connect()), before, "{}", server.log());
}

#[test]
fn bgrewriteaof_with_rdb_preamble_keeps_state() {
    rewrite_then_restart("yes");
}

#[test]
fn bgrewriteaof_with_commands_keeps_state() {
    rewrite_then_restart("no");
}

/// A DUMP made by the first release (RDB encoding 1, token buckets only):
/// `RL.TOKENBUCKET k 10 1 1000 3`, so 7 tokens at t = 1000 s.
#[test]
fn loads_encoding_version_1() {
    let hex = include_str!("fixtures/token-bucket-encoding-1.dump.hex").trim();
    let payload: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let _: () = redis::cmd("RESTORE").arg("k").arg(0).arg(payload).query(con).unwrap();
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "1", "1000", "0"]), [1, 7, 10, 0, 3000]);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(con).unwrap();
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "1", "1000", "1"]), [1, 6, 10, 0, 4000]);
}

/// A key of many leases, some released and one renewed, on the server's
/// clock: 150 leases, more than two of the AOF rewrite's commands hold.
fn many_leases(con: &mut redis::Connection) {
    for i in 0..200 {
        let reply = ints(con, &["RL.ACQUIRE", "leases", "1000", "1000000", "*", "1"]);
        assert_eq!(reply[5], i + 1);
    }
    for id in (1..=200).filter(|id| id % 4 == 0) {
        assert_eq!(ints(con, &["RL.RELEASE", "leases", &id.to_string(), "*"])[0], 1);
    }
    assert_eq!(ints(con, &["RL.RENEW", "leases", "7", "2000000", "*"])[..2], [1, 150]);
}

#[test]
fn many_leases_survive_every_way_of_persisting() {
    for preamble in ["yes", "no"] {
        let mut server = aof_server(preamble);
        let before = {
            let con = &mut server.connect();
            many_leases(con);
            wait_for_aof_rewrite(con);
            let _: String = redis::cmd("BGREWRITEAOF").query(con).unwrap();
            wait_for_aof_rewrite(con);
            common::snapshot(con, &["leases"])
        };
        if preamble == "no" {
            // Bounded commands: the first 64 leases in RL.SETSTATE, the rest one
            // RL.LEASEAPPLY each.
            let base = String::from_utf8_lossy(&aof_base(&server)).into_owned();
            assert_eq!(base.matches("RL.SETSTATE").count(), 1);
            assert_eq!(base.matches("RL.LEASEAPPLY").count(), 150 - 64);
            let longest = base.split("*").map(str::len).max().unwrap_or(0);
            assert!(longest < 4000, "a command of {longest} bytes");
        }
        server.restart();
        let con = &mut server.connect();
        assert_eq!(common::snapshot(con, &["leases"]), before, "{preamble}: {}", server.log());
        let _: () = redis::cmd("DEBUG").arg("RELOAD").query(con).unwrap();
        assert_eq!(common::snapshot(con, &["leases"]), before);
        // The next id goes on from the last one given, not the last one held.
        assert_eq!(ints(con, &["RL.ACQUIRE", "leases", "1000", "1000000", "*", "1"])[5], 201);
    }
}

/// A sliding log's change reaches the AOF (and replicas, the same stream)
/// as one RL.LOGAPPLY with its cutoff, time and absolute expiry: never the
/// call, never a second command for the expiry.
#[test]
fn a_sliding_log_change_is_propagated_as_one_logapply() {
    let server = aof_server("yes");
    let con = &mut server.connect();
    // At 1000 s with a 10 s window: units before 990.000001 s leave.
    assert_eq!(ints(con, &["RL.SLIDINGLOG", "sl", "3", "10", "1000", "2"]), [1, 1, 3, 0, 10_000]);
    let first: i64 = redis::cmd("PEXPIRETIME").arg("sl").query(con).unwrap();
    assert_eq!(
        ints(con, &["RL.REFUND", "sl", "SLIDINGLOG", "3", "10", "1001", "1"]),
        [1, 2, 3, 0, 9000]
    );
    let second: i64 = redis::cmd("PEXPIRETIME").arg("sl").query(con).unwrap();
    let commands: Vec<Vec<String>> = aof_commands(&server)
        .into_iter()
        .filter(|args| !["SELECT", "CONFIG"].contains(&args[0].as_str()))
        .collect();
    let expected = [
        ["RL.LOGAPPLY", "sl", "APPEND", "990000001", "1000000000", "2", "PXAT", &first.to_string()]
            .map(String::from)
            .to_vec(),
        ["RL.LOGAPPLY", "sl", "REMOVE", "991000001", "1", "PXAT", &second.to_string()]
            .map(String::from)
            .to_vec(),
    ];
    assert_eq!(commands, expected);
}
