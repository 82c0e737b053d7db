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

    let keys: Vec<String> = (0..20).map(|i| format!("user:{i}")).collect();
    let mut admitted = 0;
    for i in 0..400 {
        let key = &keys[i % keys.len()];
        let n = (i % 3 + 1).to_string();
        // capacity 30 at 50 tokens/s: some calls are denied, most admitted.
        admitted += ints(p, &["RL.TOKENBUCKET", key, "30", "50", "*", &n])[0];
        if i % 7 == 0 {
            sleep(Duration::from_millis(1));
        }
    }
    assert!(admitted > 100, "admitted {admitted}");
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(p).unwrap();
    assert_eq!(acked, 1);
    for key in &keys {
        let on_primary = dump(p, key).expect("key on primary");
        assert_eq!(dump(r, key), Some(on_primary), "{key}");
        let at_p: i64 = redis::cmd("PEXPIRETIME").arg(key).query(p).unwrap();
        let at_r: i64 = redis::cmd("PEXPIRETIME").arg(key).query(r).unwrap();
        assert_eq!(at_p, at_r, "{key}: the same absolute expiry");
    }

    // Denied calls and peeks propagate nothing.
    ints(p, &["RL.TOKENBUCKET", "full", "3", "0.001", "*", "3"]);
    let _: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(p).unwrap();
    let offset = info_field(p, "replication", "master_repl_offset");
    assert_eq!(ints(p, &["RL.TOKENBUCKET", "full", "3", "0.001", "*", "1"])[0], 0);
    assert_eq!(ints(p, &["RL.TOKENBUCKET", "full", "3", "0.001", "*", "4"])[3], -1);
    assert_eq!(ints(p, &["RL.TOKENBUCKET", "full", "3", "0.001", "*", "0"])[0], 1);
    assert_eq!(ints(p, &["RL.TOKENBUCKET", "none", "3", "0.001", "*", "0"])[0], 1);
    assert_eq!(info_field(p, "replication", "master_repl_offset"), offset);
}
