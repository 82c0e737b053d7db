//! Redis Cluster: three primaries with the module, made with
//! `redis-cli --cluster create`. Every command routes by its key, keys
//! spread over the shards, a slot moved with live limiters keeps their
//! state and expiry, and so does a failover to a replica.

mod common;

use std::process::Command;
use std::thread::sleep;
use std::time::Duration;

use common::{Server, dump, info_field};

const CLUSTER_ARGS: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-node-timeout",
    "3000",
    "--cluster-config-file",
    "nodes.conf",
];

fn redis_cli(args: &[String]) -> String {
    let out = Command::new("redis-cli").args(args).output().expect("redis-cli");
    assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..300 {
        if done() {
            return;
        }
        sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

fn cluster_state(con: &mut redis::Connection) -> String {
    info_field_of(con, "CLUSTER", "INFO", "cluster_state")
}

fn info_field_of(con: &mut redis::Connection, a: &str, b: &str, field: &str) -> String {
    let info: String = redis::cmd(a).arg(b).query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn node_id(con: &mut redis::Connection) -> String {
    redis::cmd("CLUSTER").arg("MYID").query(con).unwrap()
}

fn slot_of(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(con).unwrap()
}

/// The five limiters with parameters under which nothing expires mid-test.
const LIMITERS: [(&str, [&str; 2]); 6] = [
    ("RL.TOKENBUCKET", ["10", "0.001"]),
    ("RL.LEAKYBUCKET", ["10", "0.001"]),
    ("RL.FIXEDWINDOW", ["10", "100000"]),
    ("RL.SLIDINGWINDOW", ["10", "100000"]),
    ("RL.SLIDINGLOG", ["10", "100000"]),
    ("RL.ACQUIRE", ["10", "100000"]),
];

fn snapshot(con: &mut redis::Connection, keys: &[String]) -> Vec<(Option<Vec<u8>>, i64)> {
    keys.iter()
        .map(|key| {
            let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
            (dump(con, key), at)
        })
        .collect()
}

#[test]
fn commands_route_reshard_and_fail_over() {
    let nodes: Vec<Server> = (0..3).map(|_| Server::start(&CLUSTER_ARGS)).collect();
    let mut create = vec!["--cluster".to_string(), "create".to_string()];
    create.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
    redis_cli(&create);
    for node in &nodes {
        let con = &mut node.connect();
        wait_until("cluster_state:ok", || cluster_state(con) == "ok");
    }

    // A cluster-aware client follows the slots: every command on 60 keys.
    let urls: Vec<String> =
        nodes.iter().map(|n| format!("redis://127.0.0.1:{}/", n.port)).collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut cluster = client.get_connection().unwrap();
    for (command, [a, b]) in LIMITERS {
        for i in 0..60 {
            let key = format!("{command}:user:{i}");
            let reply: Vec<i64> =
                redis::cmd(command).arg(&key).arg(&[a, b, "*", "3"]).query(&mut cluster).unwrap();
            assert_eq!(reply[..3], [1, 7, 10], "{command} {key}");
        }
    }
    for node in &nodes {
        let keys: i64 = redis::cmd("DBSIZE").query(&mut node.connect()).unwrap();
        assert!(keys > 30, "node {} holds {keys} keys", node.port);
    }

    // redis-cli -c follows MOVED from a node that does not own the key.
    let key = "RL.TOKENBUCKET:user:0";
    let owner = slot_owner(&nodes, key);
    let other = nodes.iter().position(|n| n.port != nodes[owner].port).unwrap();
    let args = [
        "-c",
        "-p",
        &nodes[other].port.to_string(),
        "RL.TOKENBUCKET",
        key,
        "10",
        "0.001",
        "*",
        "0",
    ];
    let reply = redis_cli(&args.map(String::from));
    assert_eq!(reply.split_whitespace().collect::<Vec<_>>()[..3], ["1", "7", "10"]);

    // Move one slot holding a limiter of every kind from its node to another.
    let keys: Vec<String> = LIMITERS.iter().map(|(c, _)| format!("{{moving}}:{c}")).collect();
    for ((command, [a, b]), key) in LIMITERS.iter().zip(&keys) {
        let reply: Vec<i64> =
            redis::cmd(command).arg(key).arg(&[a, b, "*", "4"]).query(&mut cluster).unwrap();
        assert_eq!(reply[0], 1);
    }
    let from = slot_owner(&nodes, &keys[0]);
    let to = (from + 1) % 3;
    let (source, target) = (&mut nodes[from].connect(), &mut nodes[to].connect());
    let before = snapshot(source, &keys);
    let slot = slot_of(source, &keys[0]);
    let (source_id, target_id) = (node_id(source), node_id(target));
    let setslot = |con: &mut redis::Connection, how: &str, id: &str| {
        let _: () =
            redis::cmd("CLUSTER").arg("SETSLOT").arg(slot).arg(how).arg(id).query(con).unwrap();
    };
    setslot(target, "IMPORTING", &source_id);
    setslot(source, "MIGRATING", &target_id);
    let in_slot: Vec<String> =
        redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(slot).arg(100).query(source).unwrap();
    assert_eq!(in_slot.len(), keys.len());
    let started = common::server_ms(source);
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(nodes[to].port)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&in_slot)
        .query(source)
        .unwrap();
    for node in &nodes {
        setslot(&mut node.connect(), "NODE", &target_id);
    }
    let took = common::server_ms(source) - started;
    // MIGRATE sends a key's TTL as milliseconds left, so its deadline may
    // shift by as long as the move took; the state must not change at all.
    for ((payload, at), (was_payload, was_at)) in snapshot(target, &keys).iter().zip(&before) {
        assert_eq!(payload, was_payload, "state after the move");
        assert!(
            (at - was_at).abs() <= took + 1,
            "expiry {at} was {was_at}, the move took {took} ms"
        );
    }
    let left: Vec<String> =
        redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(slot).arg(100).query(source).unwrap();
    assert_eq!(left, Vec::<String>::new(), "the source keeps none of them");
    let moved = snapshot(target, &keys);
    // The client finds them on their new node, in the state they had.
    let mut cluster = client.get_connection().unwrap();
    for ((command, [a, b]), key) in LIMITERS.iter().zip(&keys) {
        let reply: Vec<i64> =
            redis::cmd(command).arg(key).arg(&[a, b, "*", "0"]).query(&mut cluster).unwrap();
        assert_eq!(reply[..3], [1, 6, 10], "{command} after the move");
    }

    // A replica of the target takes over with CLUSTER FAILOVER.
    let replica = Server::start(&CLUSTER_ARGS);
    redis_cli(&[
        "--cluster".into(),
        "add-node".into(),
        format!("127.0.0.1:{}", replica.port),
        format!("127.0.0.1:{}", nodes[to].port),
        "--cluster-slave".into(),
        "--cluster-master-id".into(),
        target_id.clone(),
    ]);
    let r = &mut replica.connect();
    wait_until("the replica in sync", || {
        info_field(r, "replication", "master_link_status") == "up"
    });
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(target).unwrap();
    assert_eq!(acked, 1);
    let _: () = redis::cmd("CLUSTER").arg("FAILOVER").query(r).unwrap();
    wait_until("the replica promoted", || info_field(r, "replication", "role") == "master");
    assert_eq!(snapshot(r, &keys), moved, "state and expiry after the failover");
    wait_until("the cluster to see the new primary", || {
        let mut cluster = client.get_connection().unwrap();
        let reply: Result<Vec<i64>, _> = redis::cmd("RL.TOKENBUCKET")
            .arg(&keys[0])
            .arg(&["10", "0.001", "*", "1"])
            .query(&mut cluster);
        reply.is_ok_and(|r| r[..2] == [1, 5])
    });
    assert_eq!(dump(r, &keys[1]), moved[1].0);
}

/// The index of the node that serves `key`'s slot.
fn slot_owner(nodes: &[Server], key: &str) -> usize {
    let slot = slot_of(&mut nodes[0].connect(), key);
    let slots: Vec<redis::Value> =
        redis::cmd("CLUSTER").arg("SLOTS").query(&mut nodes[0].connect()).unwrap();
    for range in slots {
        let redis::Value::Array(parts) = range else { continue };
        let (redis::Value::Int(start), redis::Value::Int(end)) = (&parts[0], &parts[1]) else {
            continue;
        };
        if (*start..=*end).contains(&slot) {
            let redis::Value::Array(primary) = &parts[2] else { continue };
            let redis::Value::Int(port) = primary[1] else { continue };
            return nodes.iter().position(|n| i64::from(n.port) == port).unwrap();
        }
    }
    panic!("no node serves slot {slot}");
}
