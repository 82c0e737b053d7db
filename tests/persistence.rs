//! State survives RDB (DEBUG RELOAD, restart) and AOF (replay, rewrite with
//! and without the RDB preamble) exactly: the same DUMP bytes and the same
//! absolute expiry.

mod common;

use std::thread::sleep;
use std::time::Duration;

use common::{Server, dump, info_field, ints};

const KEYS: [&str; 4] = ["a", "b", "c", "{user}:42"];

/// Limiters in various states, with slow refill so nothing expires mid-test.
fn fill(con: &mut redis::Connection, round: u64) {
    for (i, key) in KEYS.iter().enumerate() {
        let n = (i as u64 + round) % 4 + 1;
        ints(con, &["RL.TOKENBUCKET", key, "50", "0.001", "*", &n.to_string()]);
    }
    ints(con, &["RL.TOKENBUCKET", "fixed", "10", "0.5", "1700000000.123456", "3"]);
}

type Snapshot = Vec<(Option<Vec<u8>>, i64)>;

fn snapshot(con: &mut redis::Connection) -> Snapshot {
    KEYS.iter()
        .chain(["fixed"].iter())
        .map(|key| {
            let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
            (dump(con, key), at)
        })
        .collect()
}

fn assert_all_present(snap: &Snapshot) {
    for (payload, at) in snap {
        assert!(payload.is_some() && *at > 0, "{snap:?}");
    }
}

fn wait_for_rewrite(con: &mut redis::Connection) {
    for _ in 0..500 {
        if info_field(con, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(con, "persistence", "aof_rewrite_scheduled") == "0"
        {
            return;
        }
        sleep(Duration::from_millis(20));
    }
    panic!("BGREWRITEAOF did not finish");
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
    // The reloaded state behaves the same: 10 - 3 = 7 tokens at t0.
    let reply = ints(con, &["RL.TOKENBUCKET", "fixed", "10", "0.5", "1700000000.123456", "0"]);
    assert_eq!(reply, [1, 7, 10, 0, 6000]);
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
    let mut server = Server::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        preamble,
    ]);
    let before = {
        let con = &mut server.connect();
        fill(con, 0);
        wait_for_rewrite(con); // the initial rewrite that turning AOF on starts
        let _: String = redis::cmd("BGREWRITEAOF").query(con).unwrap();
        wait_for_rewrite(con);
        fill(con, 2); // these land in the incremental file after the rewrite
        snapshot(con)
    };
    let base = std::fs::read_dir(server.dir.path().join("appendonlydir"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.to_string_lossy().contains(".base."))
        .expect("a base AOF file");
    let base = std::fs::read(base).unwrap();
    let has_commands = base.windows(11).any(|w| w == b"RL.SETSTATE");
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
