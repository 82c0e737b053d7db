//! Active defrag moves the module's values as it moves Redis's own types,
//! on servers that offer it: a Redis built with its own jemalloc (Redis
//! 8.2 here, `scripts/servers.sh`). Debian's Redis 7.0 and Valkey builds on
//! another allocator refuse `activedefrag`, and this test checks that
//! refusal instead.

mod common;

use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{Server, info_field};

const KEYS: usize = 10_000;

/// A log of 100 runs a quarter of an hour apart, 2^40 units each: about
/// 11 bytes a run, 1.1 KB a key, so the logs' buffers are most of memory.
fn log_args(key: usize) -> Vec<String> {
    let runs = (0..100u64).flat_map(|i| [1_000_000_000_000_000 + i * 1_000_000_000, 1 << 40]);
    let head = [format!("log:{key}"), "SLIDINGLOG".to_owned()];
    head.into_iter().chain(runs.map(|field| field.to_string())).collect()
}

/// The allocator's fragmentation, as the server's cron last read it
/// (every 100 ms at the default hz).
fn frag_ratio(con: &mut redis::Connection) -> f64 {
    sleep(Duration::from_millis(300));
    info_field(con, "memory", "allocator_frag_ratio").parse().unwrap()
}

/// Logs fill memory, 70% of them are deleted, leaving the allocator's
/// pages of log buffers mostly empty; active defrag then moves the logs
/// that stay (their state intact) until little fragmentation is left (2.9 to 1.2 here). Without the
/// type's defrag callback Redis moved only its own wrapper of each value,
/// and the ratio stayed above 1.8.
#[test]
fn active_defrag_moves_sliding_logs() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // On, it does nothing until the thresholds below are lowered (it
    // ignores the first 100 MB of fragmentation by default).
    let on = redis::cmd("CONFIG").arg("SET").arg("activedefrag").arg("yes").query::<()>(con);
    if let Err(refused) = on {
        let allocator = info_field(con, "memory", "mem_allocator");
        eprintln!("this server ({allocator}) has no active defrag: {refused}");
        assert!(refused.to_string().contains("Active defragmentation cannot be enabled"));
        return;
    }
    let mut pipe = redis::pipe();
    for key in 0..KEYS {
        pipe.cmd("RL.SETSTATE").arg(log_args(key)).ignore();
    }
    let () = pipe.query(con).unwrap();
    let kept: Vec<String> = (0..KEYS)
        .filter(|key| [0, 3, 7].contains(&(key % 10)))
        .map(|key| format!("log:{key}"))
        .collect();
    let mut pipe = redis::pipe();
    for key in (0..KEYS).filter(|key| ![0, 3, 7].contains(&(key % 10))) {
        pipe.cmd("DEL").arg(format!("log:{key}")).ignore();
    }
    let () = pipe.query(con).unwrap();
    let before = common::snapshot(con, &kept);
    let fragmented = frag_ratio(con);
    assert!(fragmented > 1.5, "allocator_frag_ratio {fragmented} after the deletes");
    for (name, value) in [
        ("active-defrag-ignore-bytes", "1mb"),
        ("active-defrag-threshold-lower", "1"),
        ("active-defrag-cycle-min", "50"),
        ("active-defrag-cycle-max", "90"),
    ] {
        let () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(con).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while frag_ratio(con) > 1.3 {
        let ratio = frag_ratio(con);
        assert!(
            Instant::now() < deadline,
            "allocator_frag_ratio stayed at {ratio} (from {fragmented})"
        );
    }
    assert_eq!(common::snapshot(con, &kept), before);
}
