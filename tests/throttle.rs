//! RL.THROTTLE, the drop-in for redis-cell's CL.THROTTLE: its exact
//! replies on a real server, CL.THROTTLE registered only with the module
//! argument, replicas and AOF identical after calls on the server clock,
//! bad input refused with nothing changed, and a differential run against
//! redis-cell itself (compiled in only when CELL_MODULE names a build:
//! build.rs: `CELL_MODULE=/path/to/libredis_cell.so make test`).

mod common;

use std::io::Write;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{
    Server, aof_files, aof_server, contains, dump, error, info_field, ints, module_path, server_ms,
    snapshot, start_replica, wait_for_aof_rewrite, wait_for_replica,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Writes past the test harness's capture: what must be seen.
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

#[test]
fn exact_replies() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // 30 per 60 s (T = 2 s), max_burst 15 (limit 16, τ = 32 s): a few
    // milliseconds between calls change none of these numbers.
    let call = |con: &mut redis::Connection, q: &str| {
        ints(con, &["RL.THROTTLE", "u", "15", "30", "60", q])
    };
    let before = server_ms(con);
    assert_eq!(ints(con, &["RL.THROTTLE", "u", "15", "30", "60"]), [0, 16, 15, -1, 2]);
    let at: i64 = redis::cmd("PEXPIRETIME").arg("u").query(con).unwrap();
    assert!((before + 2000..=server_ms(con) + 2001).contains(&at), "expires at {at}");
    assert_eq!(call(con, "1"), [0, 16, 14, -1, 4]);
    // 0 only looks.
    assert_eq!(call(con, "0"), [0, 16, 14, -1, 4]);
    // Above the limit: never, -1.
    assert_eq!(call(con, "17"), [1, 16, 14, -1, 4]);
    // 16 would need 36 s of a 32 s tolerance: 4 s to wait.
    assert_eq!(call(con, "16"), [1, 16, 14, 4, 4]);
    assert_eq!(call(con, "14"), [0, 16, 0, -1, 32]);
    assert_eq!(call(con, "1"), [1, 16, 0, 2, 32]);
    // A missing key looked at is not created.
    assert_eq!(ints(con, &["RL.THROTTLE", "none", "15", "30", "60", "0"]), [0, 16, 16, -1, 0]);
    assert_eq!(ints(con, &["RL.THROTTLE", "none", "15", "30", "60", "20"]), [1, 16, 16, -1, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("none").query(con).unwrap();
    assert_eq!(exists, 0);
    // The same numbers as redis-cell's README: burst 15, 30 per minute.
    let value: String = redis::cmd("TYPE").arg("u").query(con).unwrap();
    assert_eq!(value, "ratelimit");
    let bytes: i64 = redis::cmd("MEMORY").arg("USAGE").arg("u").query(con).unwrap();
    assert!(bytes < 64, "MEMORY USAGE {bytes}");

    // 10 per second, no burst: one now, the next after 100 ms.
    assert_eq!(ints(con, &["RL.THROTTLE", "fast", "0", "10", "1"]), [0, 1, 0, -1, 1]);
    let denied = ints(con, &["RL.THROTTLE", "fast", "0", "10", "1"]);
    assert_eq!(denied[..3], [1, 1, 0]);
    // Up to 0.1 s rounds to 1 s, or to 0 within the last millisecond.
    assert!(denied[3] <= 1 && denied[4] <= 1, "{denied:?}");
    sleep(Duration::from_millis(110));
    assert_eq!(ints(con, &["RL.THROTTLE", "fast", "0", "10", "1"]), [0, 1, 0, -1, 1]);

    // A day: 1 per day, burst 6: a week to reset after taking all 7.
    assert_eq!(ints(con, &["RL.THROTTLE", "day", "6", "1", "86400", "7"]), [0, 7, 0, -1, 604_800]);
    let denied = ints(con, &["RL.THROTTLE", "day", "6", "1", "86400"]);
    assert_eq!(denied, [1, 7, 0, 86_400, 604_800]);

    assert_eq!(
        info_field(con, "ratelimit", "ratelimit_throttle"),
        "calls=14,admitted_units=25,denied_units=56"
    );
}

#[test]
fn cl_throttle_only_with_the_module_argument() {
    let plain = Server::start(&[]);
    let con = &mut plain.connect();
    let unknown = error(con, &[b"CL.THROTTLE", b"k", b"15", b"30", b"60"]);
    assert!(unknown.contains("unknown command"), "{unknown}");

    // Any case, as Redis's own names.
    for argument in ["CL.THROTTLE", "cl.throttle"] {
        let server = Server::start(&[argument]);
        let con = &mut server.connect();
        assert_eq!(ints(con, &["CL.THROTTLE", "k", "15", "30", "60"]), [0, 16, 15, -1, 2]);
        // The same command and the same key as RL.THROTTLE.
        assert_eq!(ints(con, &["RL.THROTTLE", "k", "15", "30", "60"]), [0, 16, 14, -1, 4]);
        assert_eq!(ints(con, &["cl.throttle", "k", "15", "30", "60", "0"]), [0, 16, 14, -1, 4]);
        let info: redis::Value =
            redis::cmd("COMMAND").arg("INFO").arg("CL.THROTTLE").query(con).unwrap();
        let text = format!("{info:?}");
        assert!(text.contains("write") && text.contains("denyoom"), "{text}");
        let keys: Vec<String> = redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg(&["CL.THROTTLE", "k", "1", "2", "3"])
            .query(con)
            .unwrap();
        assert_eq!(keys, ["k"]);
        let docs: redis::Value =
            redis::cmd("COMMAND").arg("DOCS").arg("CL.THROTTLE").query(con).unwrap();
        assert!(format!("{docs:?}").contains("max_burst"), "{docs:?}");
        // From redis-cli, as an operator types it.
        let out = Command::new("redis-cli")
            .args(["-p", &server.port.to_string(), "CL.THROTTLE", "cli", "15", "30", "60"])
            .output()
            .expect("redis-cli");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n16\n15\n-1\n2\n");
        let out = Command::new("redis-cli")
            .args(["-p", &server.port.to_string(), "CL.THROTTLE", "cli", "15", "30"])
            .output()
            .expect("redis-cli");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("wrong number of arguments"), "{text}");
    }
}

#[test]
fn module_load_takes_the_argument_and_refuses_others() {
    let server = common::start_without_module(&[]);
    let con = &mut server.connect();
    let path = module_path();
    let path = path.to_str().unwrap();
    let refused = error(con, &[b"MODULE", b"LOAD", path.as_bytes(), b"CL.THROTTLE", b"bogus"]);
    assert!(refused.starts_with("ERR"), "{refused}");
    assert!(
        server
            .log()
            .contains("ratelimit: unknown module argument 'bogus' (the only one is CL.THROTTLE)"),
        "{}",
        server.log()
    );
    let unknown = error(con, &[b"CL.THROTTLE", b"k", b"1", b"1", b"1"]);
    assert!(unknown.contains("unknown command"), "{unknown}");
    let _: () = redis::cmd("MODULE").arg("LOAD").arg(path).arg("CL.THROTTLE").query(con).unwrap();
    assert_eq!(ints(con, &["CL.THROTTLE", "k", "1", "1", "1"]), [0, 2, 1, -1, 1]);

    // At startup, an unknown argument stops the server with the same line.
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = Command::new(std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into()))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .arg("--dir")
        .arg(dir.path())
        .args(["--loadmodule", path, "CL.THROTTLE=yes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("unknown module argument 'CL.THROTTLE=yes'"), "{log}");
}

#[test]
fn admitted_calls_emit_rl_throttle_and_nothing_else_does() {
    let server = Server::start(&["CL.THROTTLE", "--notify-keyspace-events", "Ed"]);
    let mut listener = server.connect();
    let mut pubsub = listener.as_pubsub();
    common::listen_keyevents(&mut pubsub);
    let con = &mut server.connect();
    let mut next = || common::next_keyevent(&mut pubsub);
    let channel = "__keyevent@0__:rl.throttle".to_string();
    assert_eq!(ints(con, &["RL.THROTTLE", "k", "0", "1", "3600"])[0], 0);
    // Refused, a look, and a call above the limit: no event.
    assert_eq!(ints(con, &["RL.THROTTLE", "k", "0", "1", "3600"])[0], 1);
    assert_eq!(ints(con, &["RL.THROTTLE", "k", "0", "1", "3600", "0"])[0], 0);
    assert_eq!(ints(con, &["RL.THROTTLE", "new", "0", "1", "3600", "2"])[0], 1);
    assert_eq!(next(), (channel.clone(), "k".to_string()));
    assert_eq!(ints(con, &["CL.THROTTLE", "other", "0", "1", "3600"])[0], 0);
    assert_eq!(next(), (channel, "other".to_string()));
}

const KEYS: [&str; 10] = [
    "throttle:0",
    "throttle:1",
    "throttle:2",
    "throttle:3",
    "throttle:4",
    "throttle:5",
    "throttle:6",
    "throttle:7",
    "throttle:8",
    "{user}:9",
];

/// Keys in various states on the server clock, under parameters where
/// nothing expires while a test runs.
fn fill(con: &mut redis::Connection, round: u64) -> Vec<&'static str> {
    let mut keys = Vec::new();
    for i in 0..30u64 {
        let key = KEYS[(i % 10) as usize];
        let q = ((i + round) % 5).to_string();
        ints(con, &["RL.THROTTLE", key, "20", "10", "3600", &q]);
        keys.push(key);
    }
    keys.sort();
    keys.dedup();
    keys
}

#[test]
fn replica_holds_identical_state_and_denials_send_nothing() {
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = start_replica(&primary);
    let p = &mut primary.connect();
    let r = &mut replica.connect();
    let mut keys = Vec::new();
    for round in 0..5 {
        keys.extend(fill(p, round));
        sleep(Duration::from_millis(3));
    }
    keys.sort();
    keys.dedup();
    wait_for_replica(p);
    let on_primary = snapshot(p, &keys);
    assert!(on_primary.iter().all(|(payload, at)| payload.is_some() && *at > 0));
    assert_eq!(snapshot(r, &keys), on_primary);
    let digest = |con: &mut redis::Connection| -> String {
        redis::cmd("DEBUG").arg("DIGEST").query(con).unwrap()
    };
    assert_eq!(digest(p), digest(r));

    // Denied calls, looks and calls above the limit propagate nothing.
    assert_eq!(ints(p, &["RL.THROTTLE", "full", "2", "1", "3600", "3"])[0], 0);
    wait_for_replica(p);
    let offset = info_field(p, "replication", "master_repl_offset");
    assert_eq!(ints(p, &["RL.THROTTLE", "full", "2", "1", "3600"])[0], 1);
    assert_eq!(ints(p, &["RL.THROTTLE", "full", "2", "1", "3600", "4"])[3], -1);
    assert_eq!(ints(p, &["RL.THROTTLE", "full", "2", "1", "3600", "0"])[0], 0);
    assert_eq!(ints(p, &["RL.THROTTLE", "none", "2", "1", "3600", "0"])[0], 0);
    assert_eq!(info_field(p, "replication", "master_repl_offset"), offset);
}

/// The AOF (replayed, then rewritten with and without the RDB preamble)
/// holds the effect, never the clock-reading call.
fn aof_keeps_state(preamble: &str) {
    let mut server = aof_server(preamble);
    let con = &mut server.connect();
    wait_for_aof_rewrite(con);
    let keys = fill(con, 0);
    let incremental = aof_files(&server, ".incr.");
    assert!(contains(&incremental, b"RL.SETSTATE") && contains(&incremental, b"THROTTLE"));
    assert!(contains(&incremental, b"PXAT") && !contains(&incremental, b"RL.THROTTLE"));
    let before = snapshot(con, &keys);
    server.restart();
    let con = &mut server.connect();
    assert_eq!(snapshot(con, &keys), before, "replayed: {}", server.log());

    let _: String = redis::cmd("BGREWRITEAOF").query(con).unwrap();
    wait_for_aof_rewrite(con);
    let base = aof_files(&server, ".base.");
    assert_eq!(contains(&base, b"RL.SETSTATE"), preamble == "no", "the rewrite's form");
    let mut keys: Vec<&str> = keys.into_iter().chain(fill(con, 3)).collect();
    keys.sort();
    keys.dedup();
    let before = snapshot(con, &keys);
    server.restart();
    let con = &mut server.connect();
    assert_eq!(snapshot(con, &keys), before, "rewritten: {}", server.log());
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(con).unwrap();
    assert_eq!(snapshot(con, &keys), before, "DEBUG RELOAD");
}

#[test]
fn aof_with_rdb_preamble_keeps_state() {
    aof_keeps_state("yes");
}

#[test]
fn aof_with_commands_keeps_state() {
    aof_keeps_state("no");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    assert_eq!(ints(con, &["RL.THROTTLE", "k", "5", "1", "3600", "2"]), [0, 6, 4, -1, 7200]);
    let _: () = redis::cmd("SET").arg("s").arg("1796251458327393712").query(con).unwrap();
    let _: i64 = redis::cmd("LPUSH").arg("l").arg("a").query(con).unwrap();
    let _: () = redis::cmd("RL.TOKENBUCKET").arg(&["tb", "5", "1", "*", "1"]).query(con).unwrap();
    let keys = ["k", "s", "l", "tb"];
    let before = snapshot(con, &keys);
    let arity = "ERR wrong number of arguments for 'RL.THROTTLE' command";
    let max_burst = "ERR max_burst must be an integer from 0 to 9007199254740990";
    let count = "ERR count_per_period must be an integer from 1 to 9007199254740991";
    let period = "ERR period must be an integer number of seconds from 1 to 9007199254740991";
    let quantity = "ERR quantity must be an integer from 0 to 9007199254740991";
    let interval = "ERR count_per_period must be at most 1000000 per second of period (an emission interval of at least 1 microsecond)";
    let tolerance = "ERR max_burst is too large for the rate: (max_burst + 1) * period / count_per_period must be at most 1000000000 seconds";
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    let cases: &[(&[&[u8]], &str)] = &[
        (&[b"k"], arity),
        (&[b"k", b"5", b"1"], arity),
        (&[b"k", b"5", b"1", b"3600", b"1", b"1"], arity),
        (&[b"k", b"x", b"1", b"3600"], max_burst),
        (&[b"k", b"-1", b"1", b"3600"], max_burst),
        (&[b"k", b"1.5", b"1", b"3600"], max_burst),
        (&[b"k", b" 5", b"1", b"3600"], max_burst),
        (&[b"k", b"9007199254740991", b"1", b"3600"], max_burst),
        (&[b"k", b"99999999999999999999999", b"1", b"3600"], max_burst),
        (&[b"k", b"\xff", b"1", b"3600"], max_burst),
        (&[b"k", b"5", b"0", b"3600"], count),
        (&[b"k", b"5", b"-30", b"3600"], count),
        (&[b"k", b"5", b"", b"3600"], count),
        (&[b"k", b"5", b"1", b"0"], period),
        (&[b"k", b"5", b"1", b"-60"], period),
        (&[b"k", b"5", b"1", b"1e3"], period),
        (&[b"k", b"5", b"1", b"3600", b"-1"], quantity),
        (&[b"k", b"5", b"1", b"3600", b"9007199254740992"], quantity),
        (&[b"k", b"5", b"1000001", b"1"], interval),
        (&[b"k", b"1000000000", b"1", b"1"], tolerance),
        (&[b"k", b"0", b"1", b"1000000001"], tolerance),
        (&[b"s", b"5", b"1", b"3600"], wrongtype),
        (&[b"l", b"5", b"1", b"3600", b"0"], wrongtype),
        (&[b"tb", b"5", b"1", b"3600"], wrongtype),
        (&[b"missing", b"5", b"0", b"3600"], count),
    ];
    for (args, expected) in cases {
        let argv: Vec<&[u8]> =
            std::iter::once(&b"RL.THROTTLE"[..]).chain(args.iter().copied()).collect();
        assert_eq!(error(con, &argv), *expected, "{args:?}");
    }
    // Another algorithm's command on a throttle key: WRONGTYPE too.
    assert_eq!(error(con, &[b"RL.TOKENBUCKET", b"k", b"5", b"1", b"*"]), wrongtype);
    assert_eq!(error(con, &[b"RL.PEEK", b"k", b"LEAKYBUCKET", b"5", b"1", b"*"]), wrongtype);
    assert_eq!(snapshot(con, &keys), before);
    let exists: i64 = redis::cmd("EXISTS").arg("missing").query(con).unwrap();
    assert_eq!(exists, 0);
    // The state RL.SETSTATE takes is what a call could store.
    let _: () = redis::cmd("RL.SETSTATE").arg(&["set", "THROTTLE", "1000"]).query(con).unwrap();
    let refused = error(con, &[b"RL.SETSTATE", b"set", b"THROTTLE", b"999"]);
    assert!(refused.starts_with("ERR state must be"), "{refused}");
    assert!(error(con, &[b"RL.SETSTATE", b"set", b"THROTTLE", b"1", b"2"]).starts_with("ERR"));
    let corrupt = error(con, &[b"RESTORE", b"bad", b"0", &bad_payload()]);
    assert!(corrupt.contains("Bad data format"), "{corrupt}");
}

/// A DUMP of a throttle state with the arrival time 999 ns: no call
/// stores that.
fn bad_payload() -> Vec<u8> {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let _: () = redis::cmd("RL.SETSTATE").arg(&["x", "THROTTLE", "1000"]).query(con).unwrap();
    let good = dump(con, "x").unwrap();
    // 02 00 (kind 0), 02 then 1000 as a 14-bit length: 43 e8; then 00.
    let at = good.windows(4).position(|w| w == [0x02, 0x00, 0x02, 0x43]).expect("kind 0, 1000");
    let mut bad = good.clone();
    bad[at + 4] = 0xe7;
    // The CRC-64 (Jones) over everything before it.
    let body = &bad[..bad.len() - 8];
    let crc = crc64(body);
    let n = bad.len();
    bad[n - 8..].copy_from_slice(&crc.to_le_bytes());
    bad
}

fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac9329ac4bc9b5;
    let mut crc = 0u64;
    for &byte in data {
        crc ^= u64::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ POLY } else { crc >> 1 };
        }
    }
    crc
}

// ---------------------------------------------------------------------
// The differential run against redis-cell.

/// redis-cell v0.5.0's CL.THROTTLE, as its source reads (src/cell/mod.rs
/// `rate_limit`, src/lib.rs `run`), at the instant `now` (Unix ns) on the
/// stored arrival time `stored`: the reply it gives. Its emission interval
/// is `(period_ns as f64 / count as f64) as i64`, which for periods under
/// 2^53 ns (104 days) is the exact quotient rounded down.
fn cell_model(stored: Option<u64>, now: u64, [burst, count, period, q]: [u64; 4]) -> [i64; 5] {
    let emission = i128::from(period) * 1_000_000_000 / i128::from(count);
    let tolerance = emission * (i128::from(burst) + 1);
    let increment = emission * i128::from(q);
    let now = i128::from(now);
    let tat = stored.map_or(now, i128::from);
    let new_tat = if now > tat { now + increment } else { tat + increment };
    let diff = now - (new_tat - tolerance);
    let never = -1_000_000_000;
    let (limited, ttl, retry) = if diff < 0 {
        (true, tat - now, if increment <= tolerance { -diff } else { never })
    } else {
        (false, new_tat - now, never)
    };
    let next = tolerance - ttl;
    let remaining =
        if next > -emission { ((next / 1000) as f64 / (emission / 1000) as f64) as i64 } else { 0 };
    let seconds = |d: i128| {
        let (whole, nanos) = (d / 1_000_000_000, d % 1_000_000_000);
        let mut s = (whole as f64 + nanos as f64 / 1e9) as i64;
        if nanos / 1_000_000 > 0 {
            s += 1;
        }
        s
    };
    [i64::from(limited), burst as i64 + 1, remaining, seconds(retry), seconds(ttl)]
}

/// Our key's arrival time, read from its DUMP: module data opcode 02 and
/// kind 0, then 02 and the time as an RDB length.
fn our_tat(payload: Option<Vec<u8>>) -> Option<u64> {
    let payload = payload?;
    let at =
        10 + payload[10..].windows(3).position(|w| w[0] == 0x02 && w[1] == 0x00 && w[2] == 0x02)?;
    let rest = &payload[at + 3..];
    let be = |bytes: &[u8]| bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
    Some(match rest[0] >> 6 {
        0 => u64::from(rest[0] & 0x3f),
        1 => u64::from(rest[0] & 0x3f) << 8 | u64::from(rest[1]),
        _ if rest[0] == 0x80 => be(&rest[1..5]),
        _ => be(&rest[1..9]),
    })
}

#[derive(Default, Debug)]
struct Tally {
    calls: u64,
    identical: u64,
    /// Replies a field apart by one, where that field's value changes
    /// between the two calls' instants (each on its own state).
    straddles: [u64; 5],
    /// One admitted and the other refused at the boundary: keys reset.
    decision_straddles: u64,
    /// redis-cell's key expired (a whole-millisecond TTL) before its
    /// arrival time, so it saw a fresh limiter: keys reset after.
    cell_expired_early: u64,
    largest_state_offset_ns: u64,
    unexplained: Vec<String>,
}

struct Sequence {
    params: [u64; 3],
    cell_key: String,
    our_key: String,
    cell_tat: Option<u64>,
    our_tat: Option<u64>,
    /// The widest window since the keys were last reset: how far apart
    /// the two arrival times may be, each set from its own instant.
    widest_window_ns: u64,
}

fn log_uniform(rng: &mut StdRng, low: u64, high: u64) -> u64 {
    let (l, h) = ((low as f64).ln(), (high as f64 + 1.0).ln());
    (rng.gen_range(l..h).exp() as u64).clamp(low, high)
}

fn random_sequence(rng: &mut StdRng, i: usize) -> Sequence {
    let periods = [1, 1, 1, 2, 2, 3, 5, 7, 10, 30, 60, 300, 3600, 86400];
    let period = if rng.gen_bool(0.8) {
        periods[rng.gen_range(0..periods.len())]
    } else {
        rng.gen_range(1..=86400)
    };
    // Emission intervals from 10 ms (1 ms at times) up to the period.
    let fastest = if rng.gen_bool(0.2) { 1000 } else { 100 };
    let count = log_uniform(rng, 1, period * fastest);
    let burst = match rng.gen_range(0..10) {
        0 => 0,
        1 => rng.gen_range(100..1000).min(86400 * 60 / period),
        _ => rng.gen_range(0..25),
    };
    Sequence {
        params: [burst, count, period],
        cell_key: format!("cell:{i}"),
        our_key: format!("ours:{i}"),
        cell_tat: None,
        our_tat: None,
        widest_window_ns: 0,
    }
}

fn random_quantity(rng: &mut StdRng, burst: u64) -> u64 {
    match rng.gen_range(0..20) {
        0 => 0,
        1..=10 => 1,
        11..=15 => rng.gen_range(1..=burst + 1),
        16 | 17 => rng.gen_range(burst + 2..=2 * burst + 5),
        _ => rng.gen_range(0..=3),
    }
}

/// The model over the window [t0, t1] as the ends of its monotone pieces:
/// the decision flips at most once (limited, then admitted), and each field
/// moves one way on either side of the flip; across it, `remaining` can
/// step up and back down (redis-cell divides microseconds truncated), so a
/// reply from just before the flip lies outside the window's two ends.
fn model_pieces(
    stored: Option<u64>,
    t0: u64,
    t1: u64,
    quad: [u64; 4],
) -> Vec<([i64; 5], [i64; 5])> {
    let at = |t: u64| cell_model(stored, t, quad);
    let (first, last) = (at(t0), at(t1));
    if first[0] == last[0] {
        return vec![(first, last)];
    }
    // a decides as t0 does, b (the first instant to) as t1 does.
    let (mut a, mut b) = (t0, t1);
    while b - a > 1 {
        let middle = a + (b - a) / 2;
        if at(middle)[0] == last[0] { b = middle } else { a = middle }
    }
    vec![(first, at(a)), (at(b), last)]
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// One call to each, back to back in a transaction bracketed by TIME;
/// checks the replies and updates the tally. The TIMEs are sent on their
/// own, before and after the transaction: inside one, Valkey answers TIME
/// with the transaction's cached time (both the same microsecond), while
/// redis-cell reads the real clock later, outside that bracket.
fn compare_once(
    con: &mut redis::Connection,
    rng: &mut StdRng,
    seq: &mut Sequence,
    tally: &mut Tally,
) {
    let [burst, count, period] = seq.params;
    let q = random_quantity(rng, burst);
    let args = [burst, count, period, q].map(|n| n.to_string());
    let cell_first = rng.gen_bool(0.5);
    let time =
        |con: &mut redis::Connection| -> Vec<u64> { redis::cmd("TIME").query(con).expect("TIME") };
    let t0 = time(con);
    let mut pipe = redis::pipe();
    pipe.atomic().cmd("EXISTS").arg(&seq.cell_key);
    let (first, second) = if cell_first {
        (("CL.THROTTLE", &seq.cell_key), ("RL.THROTTLE", &seq.our_key))
    } else {
        (("RL.THROTTLE", &seq.our_key), ("CL.THROTTLE", &seq.cell_key))
    };
    pipe.cmd(first.0).arg(first.1).arg(&args);
    pipe.cmd(second.0).arg(second.1).arg(&args);
    pipe.cmd("GET").arg(&seq.cell_key).cmd("DUMP").arg(&seq.our_key);
    #[allow(clippy::type_complexity)]
    let (cell_existed, a, b, cell_after, ours_after): (
        bool,
        Vec<i64>,
        Vec<i64>,
        Option<u64>,
        Option<Vec<u8>>,
    ) = pipe.query(con).expect("the transaction");
    let t1 = time(con);
    let (cell, ours) = if cell_first { (a, b) } else { (b, a) };
    tally.calls += 1;
    let t0 = (t0[0] * 1_000_000 + t0[1]) * 1000;
    let t1 = (t1[0] * 1_000_000 + t1[1] + 1) * 1000;
    let cell_stored = if cell_existed { seq.cell_tat } else { None };
    let early = !cell_existed && seq.cell_tat.is_some_and(|tat| tat > t0);
    let quad = [burst, count, period, q];
    seq.widest_window_ns = seq.widest_window_ns.max(t1 - t0);
    // Ours takes an arrival time passed as a fresh limiter (its key is
    // gone by then, or in its last millisecond).
    let our_stored = seq.our_tat.filter(|&tat| tat > t0);
    let (cell_lo, cell_hi) = (cell_model(cell_stored, t0, quad), cell_model(cell_stored, t1, quad));
    let (ours_lo, ours_hi) = (cell_model(our_stored, t0, quad), cell_model(our_stored, t1, quad));
    let within = |v: i64, lo: i64, hi: i64| (lo.min(hi)..=lo.max(hi)).contains(&v);
    let (cell_pieces, our_pieces) =
        (model_pieces(cell_stored, t0, t1, quad), model_pieces(our_stored, t0, t1, quad));
    let on_pieces = |v: i64, pieces: &[([i64; 5], [i64; 5])], field: usize| {
        pieces.iter().any(|(lo, hi)| within(v, lo[field], hi[field]))
    };
    let context = || {
        format!(
            "params {quad:?}, cell {cell:?} (model {cell_lo:?}..{cell_hi:?}, tat {cell_stored:?}), \
             ours {ours:?} (model {ours_lo:?}..{ours_hi:?}, tat {:?}), window {t0}..{t1}",
            our_stored
        )
    };
    // Each reply is its side's math at some instant of the window.
    for field in 0..5 {
        if !on_pieces(cell[field], &cell_pieces, field) {
            tally
                .unexplained
                .push(format!("redis-cell off its own math, field {field}: {}", context()));
        }
        if !on_pieces(ours[field], &our_pieces, field) {
            tally
                .unexplained
                .push(format!("RL.THROTTLE off the math, field {field}: {}", context()));
        }
    }
    let mut reset = false;
    if early {
        // Whatever the replies, the states part by up to a millisecond.
        tally.cell_expired_early += 1;
        tally.identical += u64::from(cell == ours);
        reset = true;
    } else if cell == ours {
        tally.identical += 1;
    } else if cell[0] != ours[0] {
        // A decision at the boundary: the two instants straddle it.
        let straddles =
            cell_lo[0] != cell_hi[0] || ours_lo[0] != ours_hi[0] || cell_lo[0] != ours_lo[0];
        if straddles {
            tally.decision_straddles += 1;
        } else {
            tally.unexplained.push(format!("decision: {}", context()));
        }
        reset = true;
    } else {
        for field in 0..5 {
            if cell[field] == ours[field] {
                continue;
            }
            let values = [cell_lo[field], cell_hi[field], ours_lo[field], ours_hi[field]];
            let straddles = values.iter().any(|&v| v != values[0]);
            if (cell[field] - ours[field]).abs() == 1 && straddles {
                tally.straddles[field] += 1;
            } else {
                tally.unexplained.push(format!("field {field}: {}", context()));
            }
        }
    }
    seq.cell_tat = cell_after;
    seq.our_tat = our_tat(ours_after);
    // Arrival times ahead of now (a look at a fresh limiter has redis-cell
    // store `now`, and our key outlives its arrival time by under 1 ms).
    if let (Some(c), Some(o)) = (seq.cell_tat, seq.our_tat)
        && !reset
        && c.max(o) > t1
    {
        let offset = c.abs_diff(o);
        tally.largest_state_offset_ns = tally.largest_state_offset_ns.max(offset);
        if offset > seq.widest_window_ns {
            tally.unexplained.push(format!("states {offset} ns apart: {}", context()));
            reset = true;
        }
    }
    if reset {
        let _: i64 = redis::cmd("DEL").arg(&seq.cell_key).arg(&seq.our_key).query(con).unwrap();
        (seq.cell_tat, seq.our_tat, seq.widest_window_ns) = (None, None, 0);
    }
}

#[test]
#[cfg_attr(
    not(cell_module),
    ignore = "DID NOT RUN: needs a redis-cell v0.5.0 build; set CELL_MODULE=/path/to/libredis_cell.so \
              (CELL_MODULE=... make test)"
)]
fn differential_against_redis_cell() {
    let cell = common::cell_module();
    let seed = std::env::var("DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(now_ns);
    let server = Server::start(&["--loadmodule", &cell]);
    let con = &mut server.connect();
    say(&format!(
        "\ndifferential_against_redis_cell: redis-cell build {cell} ({})",
        cell_version(con)
    ));
    let rng = &mut StdRng::seed_from_u64(seed);
    let mut sequences: Vec<Sequence> = (0..60).map(|i| random_sequence(rng, i)).collect();
    let mut tally = Tally::default();
    let started = std::time::Instant::now();
    for _tick in 0..120 {
        for seq in sequences.iter_mut() {
            if rng.gen_bool(0.3) {
                continue;
            }
            // Now and then a burst of calls back to back.
            let calls = if rng.gen_bool(0.15) { rng.gen_range(2..=6) } else { 1 };
            for _ in 0..calls {
                compare_once(con, rng, seq, &mut tally);
            }
        }
        let wait = match rng.gen_range(0..100) {
            0..=69 => rng.gen_range(0..20),
            70..=94 => rng.gen_range(20..150),
            _ => rng.gen_range(400..1100),
        };
        sleep(Duration::from_millis(wait));
    }
    let params: Vec<String> = sequences.iter().map(|s| format!("{:?}", s.params)).collect();
    say(&format!(
        "\ndifferential_against_redis_cell (seed {seed}, {:.1} s; [max_burst, count_per_period, period] of the 60 \
         sequences: {}):\n  {} calls, {} identical replies; one-apart fields where the two instants straddle \
         a boundary: limited {}, limit {}, remaining {}, retry_after {}, reset_after {}; decisions straddling \
         the boundary {}; redis-cell key expired before its arrival time {}; largest state offset {} ns; \
         unexplained {}",
        started.elapsed().as_secs_f64(),
        params.join(" "),
        tally.calls,
        tally.identical,
        tally.straddles[0],
        tally.straddles[1],
        tally.straddles[2],
        tally.straddles[3],
        tally.straddles[4],
        tally.decision_straddles,
        tally.cell_expired_early,
        tally.largest_state_offset_ns,
        tally.unexplained.len()
    ));
    for line in tally.unexplained.iter().take(20) {
        say(&format!("  unexplained: {line}"));
    }
    assert!(tally.unexplained.is_empty(), "{} unexplained differences", tally.unexplained.len());
    // Straddles are rare: the instants are microseconds apart.
    let straddled =
        tally.straddles.iter().sum::<u64>() + tally.decision_straddles + tally.cell_expired_early;
    assert!(straddled * 20 <= tally.calls, "{tally:?}");
    assert!(tally.calls > 2000, "{tally:?}");
}

/// The loaded redis-cell as MODULE LIST names it: "module redis-cell version N".
fn cell_version(con: &mut redis::Connection) -> String {
    let modules: Vec<Vec<redis::Value>> = redis::cmd("MODULE").arg("LIST").query(con).unwrap();
    let field = |module: &[redis::Value], name: &str| -> Option<String> {
        let at = module
            .iter()
            .position(|v| redis::from_redis_value::<String>(v.clone()).is_ok_and(|s| s == name))?;
        module.get(at + 1).and_then(|v| redis::from_redis_value::<String>(v.clone()).ok())
    };
    modules
        .iter()
        .filter_map(|m| Some((field(m, "name")?, field(m, "ver")?)))
        .filter(|(name, _)| name != "ratelimit")
        .map(|(name, version)| format!("module {name} version {version}"))
        .collect::<Vec<_>>()
        .join(", ")
}
