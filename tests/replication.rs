//! A real replica holds byte-identical state after a run of calls on the
//! server clock; denied calls and peeks send nothing to it.

mod common;

use std::thread::sleep;
use std::time::Duration;

use common::{Server, dump, info_field, ints};

#[test]
fn replica_holds_identical_state() {
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = Server::start(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let p = &mut primary.connect();
    let r = &mut replica.connect();
    for _ in 0..500 {
        if info_field(r, "replication", "master_link_status") == "up" {
            break;
        }
        sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(r, "replication", "master_link_status"), "up", "{}", replica.log());

    // Parameters under which some calls are denied and no key expires
    // before it is compared, however slowly a loaded machine runs: buckets
    // that take 100 s a unit to refill or drain, a fixed window that ends
    // at a multiple of 100,000 s since the epoch, windows and leases that
    // last 60 s from the last call.
    let limiters = [
        ("RL.TOKENBUCKET", ["30", "0.01"]),
        ("RL.LEAKYBUCKET", ["30", "0.01"]),
        ("RL.FIXEDWINDOW", ["30", "100000"]),
        ("RL.SLIDINGWINDOW", ["30", "60"]),
        ("RL.SLIDINGLOG", ["30", "60"]),
        ("RL.ACQUIRE", ["30", "60"]),
    ];
    let mut keys = Vec::new();
    for (command, [a, b]) in limiters {
        let (mut admitted, mut denied) = (0, 0);
        for i in 0..400 {
            let key = format!("{command}:user:{}", i % 20);
            let n = (i % 3 + 1).to_string();
            match ints(p, &[command, &key, a, b, "*", &n])[0] {
                1 => admitted += 1,
                _ => denied += 1,
            }
            if i % 7 == 0 {
                sleep(Duration::from_millis(1));
            }
            keys.push(key);
        }
        assert!(admitted > 100 && denied > 10, "{command}: {admitted} admitted, {denied} denied");
    }
    // Leases released and renewed: the same ids, the same expiries.
    for i in 0..200 {
        let key = format!("RL.ACQUIRE:user:{}", i % 20);
        let id = (i / 20 + 1).to_string();
        if i % 2 == 0 {
            ints(p, &["RL.RELEASE", &key, &id, "*"]);
        } else {
            ints(p, &["RL.RENEW", &key, &id, "90", "*"]);
        }
    }
    let reply = ints(p, &["RL.ACQUIRE", "RL.ACQUIRE:user:0", "30", "60", "*", "0"]);
    assert!(reply[1] > 0, "some leases released: {reply:?}");
    keys.sort();
    keys.dedup();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(p).unwrap();
    assert_eq!(acked, 1);
    for key in &keys {
        let on_primary = dump(p, key).unwrap_or_else(|| panic!("{key} on the primary"));
        assert_eq!(dump(r, key), Some(on_primary), "{key}");
        let at_p: i64 = redis::cmd("PEXPIRETIME").arg(key).query(p).unwrap();
        let at_r: i64 = redis::cmd("PEXPIRETIME").arg(key).query(r).unwrap();
        assert_eq!(at_p, at_r, "{key}: the same absolute expiry");
    }
    let digest = |con: &mut redis::Connection| -> String {
        redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
    };
    assert_eq!(digest(p), digest(r));

    // Denied calls and peeks propagate nothing.
    for (command, [_, rate_or_window]) in limiters {
        // Parameters under which nothing refills, drains or slides meanwhile.
        let b = if rate_or_window == "0.01" { "0.001" } else { "100000" };
        let key = format!("{command}:full");
        assert_eq!(ints(p, &[command, &key, "3", b, "*", "3"])[0], 1);
        let _: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(p).unwrap();
        let offset = info_field(p, "replication", "master_repl_offset");
        assert_eq!(ints(p, &[command, &key, "3", b, "*", "1"])[0], 0, "{command}");
        assert_eq!(ints(p, &[command, &key, "3", b, "*", "4"])[3], -1, "{command}");
        assert_eq!(ints(p, &[command, &key, "3", b, "*", "0"])[0], 1, "{command}");
        assert_eq!(ints(p, &[command, "none", "3", b, "*", "0"])[0], 1, "{command}");
        assert_eq!(info_field(p, "replication", "master_repl_offset"), offset, "{command}");
    }
}

/// With `repl-diskless-load swapdb` a replica loads the primary's data
/// from the socket into a second database while it keeps serving its own,
/// then swaps them: the module declares that it supports this, so the
/// replica no longer falls back to a load from disk ("Skipping
/// diskless-load because there are modules that are not aware of async
/// replication").
#[test]
fn a_replica_loads_swapdb_diskless() {
    let primary =
        Server::start(&["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]);
    let p = &mut primary.connect();
    common::one_a_microsecond(p, &["RL.SLIDINGLOG", "log", common::MAX_UNITS, "1000000"], 20_000);
    common::one_a_microsecond(p, &["RL.ACQUIRE", "leases", common::MAX_UNITS, "1000000"], 500);
    ints(p, &["RL.TOKENBUCKET", "bucket", "10", "0.001", "*", "3"]);
    let keys = ["log", "leases", "bucket"];
    let port = primary.port.to_string();
    let replica =
        Server::start(&["--replicaof", "127.0.0.1", &port, "--repl-diskless-load", "swapdb"]);
    let r = &mut replica.connect();
    for _ in 0..500 {
        if info_field(r, "replication", "master_link_status") == "up" {
            break;
        }
        sleep(Duration::from_millis(20));
    }
    let log = replica.log();
    assert!(log.contains("Swapping active DB with loaded DB"), "{log}");
    assert!(!log.contains("Skipping diskless-load"), "{log}");
    assert_eq!(common::snapshot(r, &keys), common::snapshot(p, &keys));
}
