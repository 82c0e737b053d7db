//! RL.MULTI, RL.PEEK and RL.REFUND against real servers, with the numbers
//! worked out by hand from docs/commands.md (RL.MULTI, RL.PEEK, RL.REFUND,
//! and the ranges of "What every command shares").
//!
//! Times are given as T + offset, T = 1700000040, a multiple of 60, so
//! that minute windows start at T. Parameters are chosen so that no key
//! expires on the server's clock while a test looks at it.

mod common;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{
    Server, aof_base, aof_server, dump, error, ints, is_rdb, multi, server_ms, snapshot,
    start_replica, wait_for_aof_rewrite, wait_for_replica,
};

/// T in microseconds.
const T_US: u64 = 1_700_000_040_000_000;
/// 2^53 - 1, the largest quota.
const MAX: i64 = 9_007_199_254_740_991;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NUMKEYS: &str = "ERR numkeys must be an integer from 1 to 1000";
const REPEATED: &str = "ERR a key may appear only once";
const ALGORITHM: &str = "ERR algorithm must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG or CONCURRENCY";
const CAPACITY: &str = "ERR capacity must be an integer from 1 to 9007199254740991";
const RATE: &str =
    "ERR rate must be a decimal number of units per second from 0.000001 to 1000000000000";
const LIMIT: &str = "ERR limit must be an integer from 1 to 9007199254740991";
const WINDOW: &str = "ERR window must be a decimal number of seconds from 0.001 to 1000000000000";
const NOW: &str =
    "ERR now must be * or a decimal Unix time in seconds from 0 to 253402300799.999999";
const COUNT: &str = "ERR n must be an integer from 0 to 9007199254740991";

/// T + `ms` milliseconds, as the decimal seconds a call takes.
fn at(ms: u64) -> String {
    let us = T_US + ms * 1000;
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

fn arity(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

fn server() -> (Server, redis::Connection) {
    let server = Server::start(&[]);
    let con = server.connect();
    (server, con)
}

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

fn pttl(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

fn dbsize(con: &mut redis::Connection) -> i64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

/// Runs an RL.MULTI that must fail and returns its error line, as
/// `common::error` does.
fn multi_error(con: &mut redis::Connection, args: &[&str]) -> String {
    match redis::cmd("RL.MULTI").arg(args).query::<redis::Value>(con) {
        Ok(v) => panic!("RL.MULTI {args:?} should fail, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// `RL.REFUND key ALGORITHM a b now n`
fn refund(con: &mut redis::Connection, key: &str, spec: [&str; 3], now: &str, n: &str) -> Vec<i64> {
    ints(con, &["RL.REFUND", key, spec[0], spec[1], spec[2], now, n])
}

/// `RL.PEEK key ALGORITHM a b now n`
fn peek(con: &mut redis::Connection, key: &str, spec: [&str; 3], now: &str, n: &str) -> Vec<i64> {
    ints(con, &["RL.PEEK", key, spec[0], spec[1], spec[2], now, n])
}

/// The single-key command of an algorithm: `RL.` and its name.
fn command_of(algorithm: &str) -> String {
    format!("RL.{algorithm}")
}

/// Runs the single-key command of `spec` on `key`: `RL.<ALGORITHM> key a b now n`.
fn take(con: &mut redis::Connection, key: &str, spec: [&str; 3], now: &str, n: &str) -> Vec<i64> {
    ints(con, &[&command_of(spec[0]), key, spec[1], spec[2], now, n])
}

/// `key`'s expiry lies `reset_ms` after the server's clock at some instant
/// between `before` and `after` (server milliseconds read around the call).
fn assert_expires_after(
    con: &mut redis::Connection,
    key: &str,
    reset_ms: i64,
    (before, after): (i64, i64),
) {
    let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
    assert!(
        (before..=after).contains(&(at - reset_ms)),
        "{key}: expires at {at}, reset {reset_ms}, clock {before}..{after}"
    );
}

// ---------------------------------------------------------------- RL.MULTI

const TB_SLOW: [&str; 3] = ["TOKENBUCKET", "10", "0.1"];
const FW_MINUTE: [&str; 3] = ["FIXEDWINDOW", "5", "60"];
const SL_MINUTE: [&str; 3] = ["SLIDINGLOG", "3", "60"];
const LB_MISSING: [&str; 3] = ["LEAKYBUCKET", "4", "2"];

/// Three limits with state and a missing fourth; at T + 10 s the sliding
/// log is full while the others would each admit.
fn one_limit_full(con: &mut redis::Connection) {
    take(con, "tb", TB_SLOW, &at(0), "4"); // 6 tokens left at T
    take(con, "fw", FW_MINUTE, &at(0), "2"); // 2 of 5 in [T, T + 60)
    take(con, "sl", SL_MINUTE, &at(0), "3"); // 3 of 3 logged at T
}

fn one_limit_full_call() -> Vec<String> {
    let mut args: Vec<String> = ["4", "tb", "fw", "sl", "lb"].map(String::from).to_vec();
    args.push(at(10_000));
    for (spec, n) in [(TB_SLOW, "2"), (FW_MINUTE, "1"), (SL_MINUTE, "1"), (LB_MISSING, "1")] {
        args.extend(spec.iter().map(|s| s.to_string()));
        args.push(n.to_string());
    }
    args
}

#[test]
fn multi_denied_by_one_limit_changes_no_key() {
    let (_server, con) = &mut server();
    one_limit_full(con);
    let keys = ["tb", "fw", "sl", "lb"];
    let before = snapshot(con, &keys);
    let args = one_limit_full_call();
    let (allowed, retry_after_ms, fields) =
        multi(con, &args.iter().map(String::as_str).collect::<Vec<_>>());
    // The log's 3 units of T leave at T + 60 s: 50 s after T + 10 s.
    assert_eq!((allowed, retry_after_ms), (0, 50_000));
    assert_eq!(fields[2], [0, 0, 3, 50_000, 50_000], "the sliding log denies");
    assert_eq!(snapshot(con, &keys), before, "DUMP and PEXPIRETIME of every key");
    assert!(!exists(con, "lb"), "the missing key is not created");
    // The bucket, which alone would admit, was not charged: 6 + 10 s * 0.1.
    assert_eq!(take(con, "tb", TB_SLOW, &at(10_000), "0"), [1, 7, 10, 0, 30_000]);
}

/// docs/commands.md, RL.MULTI: each limit's `remaining` / `reset_after_ms` describe its
/// state after the call, unchanged when the call as a whole was denied;
/// `allowed` says whether that limit alone admits.
#[test]
fn multi_denied_reports_every_limit_unchanged() {
    let (_server, con) = &mut server();
    one_limit_full(con);
    let args = one_limit_full_call();
    let (_, _, fields) = multi(con, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let expected: Vec<Vec<i64>> = vec![
        // 6 + 10 s * 0.1 = 7 tokens, 2 would fit; untaken, 3 tokens (30 s) from full.
        vec![1, 7, 10, 0, 30_000],
        // 2 counted, 1 would fit; the window ends 50 s later.
        vec![1, 3, 5, 0, 50_000],
        vec![0, 0, 3, 50_000, 50_000],
        // An empty queue: 1 would fit; still empty, fresh, no wait.
        vec![1, 4, 4, 0, 0, 0],
    ];
    assert_eq!(fields, expected);
}

#[test]
fn multi_admitted_stores_what_each_single_command_stores() {
    let (_server, con) = &mut server();
    // spec, n taken before, when (T, or T - 30 s: the previous window
    // [T - 60, T) for the sliding window), n in RL.MULTI at T + 15 s
    let limits: [([&str; 3], &str, &str, &str); 5] = [
        (["TOKENBUCKET", "10", "0.1"], "4", "1700000040", "3"),
        (["LEAKYBUCKET", "4", "0.1"], "2", "1700000040", "1"),
        (["FIXEDWINDOW", "5", "60"], "2", "1700000040", "3"),
        (["SLIDINGWINDOW", "10", "60"], "8", "1700000010", "2"),
        (["SLIDINGLOG", "3", "60"], "1", "1700000040", "2"),
    ];
    let mut args: Vec<String> = vec!["5".into()];
    for (spec, n, when, _) in &limits {
        let key = format!("m:{}", spec[0]);
        take(con, &key, *spec, when, n);
        take(con, &format!("s:{}", spec[0]), *spec, when, n);
        args.push(key);
    }
    args.push(at(15_000));
    for (spec, _, _, n) in &limits {
        args.extend(spec.iter().map(|s| s.to_string()));
        args.push(n.to_string());
    }
    let before = server_ms(con);
    let (allowed, retry_after_ms, fields) =
        multi(con, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let after = server_ms(con);
    assert_eq!((allowed, retry_after_ms), (1, 0));
    let expected: Vec<Vec<i64>> = vec![
        // 6 + 1.5 refilled = 7.5, take 3: 4.5 left, 5.5 tokens (55 s) from full.
        vec![1, 4, 10, 0, 55_000],
        // 2 - 1.5 drained = 0.5 queued (a 5 s wait), + 1 = 1.5: 2.5 free, 15 s to drain.
        vec![1, 2, 4, 0, 15_000, 5000],
        // 2 + 3 = 5 of 5; the window ends at T + 60.
        vec![1, 0, 5, 0, 45_000],
        // 8 * (1 - 15/60) = 6, + 2 = 8 of 10; the current 2 slide out at T + 120.
        vec![1, 2, 10, 0, 105_000],
        // 1 + 2 = 3 of 3; the newest leave at T + 75.
        vec![1, 0, 3, 0, 60_000],
    ];
    assert_eq!(fields, expected);
    for ((spec, _, _, n), fields) in limits.iter().zip(&fields) {
        let (multi_key, single_key) = (format!("m:{}", spec[0]), format!("s:{}", spec[0]));
        assert_eq!(&take(con, &single_key, *spec, &at(15_000), n), fields, "{}", spec[0]);
        assert_eq!(dump(con, &multi_key), dump(con, &single_key), "{}", spec[0]);
        assert_expires_after(con, &multi_key, fields[4], (before, after));
    }
}

#[test]
fn multi_retry_after_is_the_largest_wait() {
    let (_server, con) = &mut server();
    take(con, "tb", ["TOKENBUCKET", "10", "1"], &at(0), "10");
    take(con, "fw", ["FIXEDWINDOW", "2", "60"], &at(0), "2");
    take(con, "lb", ["LEAKYBUCKET", "2", "1"], &at(0), "2");
    let now = at(1500);
    let (allowed, retry_after_ms, fields) = multi(
        con,
        &[
            "3",
            "tb",
            "fw",
            "lb",
            &now,
            "TOKENBUCKET",
            "10",
            "1",
            "3",
            "FIXEDWINDOW",
            "2",
            "60",
            "1",
            "LEAKYBUCKET",
            "2",
            "1",
            "2",
        ],
    );
    // The window reopens at T + 60: 58.5 s, longer than the buckets' waits.
    assert_eq!((allowed, retry_after_ms), (0, 58_500));
    let expected: Vec<Vec<i64>> = vec![
        // 1.5 tokens refilled, 3 wanted: 1.5 s more; 8.5 s to full.
        vec![0, 1, 10, 1500, 8500],
        vec![0, 0, 2, 58_500, 58_500],
        // 0.5 still queued: 2 fit after 0.5 s; 0.5 s to empty.
        vec![0, 1, 2, 500, 500, 0],
    ];
    assert_eq!(fields, expected);
}

#[test]
fn multi_retry_after_is_minus_one_when_a_limit_never_admits() {
    let (_server, con) = &mut server();
    take(con, "tb", ["TOKENBUCKET", "2", "1"], &at(0), "2");
    let (allowed, retry_after_ms, fields) = multi(
        con,
        &["2", "tb", "fw", &at(0), "TOKENBUCKET", "2", "1", "1", "FIXEDWINDOW", "5", "60", "6"],
    );
    assert_eq!((allowed, retry_after_ms), (0, -1), "6 never fit a limit of 5");
    // The bucket alone would wait 1 s; the window can never take 6.
    assert_eq!(fields, [vec![0, 0, 2, 1000, 2000], vec![0, 5, 5, -1, 0]]);
    assert!(!exists(con, "fw"));
}

#[test]
fn multi_n_zero_only_looks_at_its_limit() {
    let (_server, con) = &mut server();
    take(con, "full", FW_MINUTE, &at(0), "5");
    let before = snapshot(con, &["full"]);
    let (allowed, retry_after_ms, fields) = multi(
        con,
        &[
            "3",
            "tb",
            "full",
            "sl",
            &at(0),
            "TOKENBUCKET",
            "10",
            "1",
            "3",
            "FIXEDWINDOW",
            "5",
            "60",
            "0",
            "SLIDINGLOG",
            "3",
            "60",
            "0",
        ],
    );
    assert_eq!((allowed, retry_after_ms), (1, 0), "a full limit looked at admits 0");
    // 10 - 3 = 7 tokens, 3 s from full; the full window as it is; the empty log.
    assert_eq!(fields, [vec![1, 7, 10, 0, 3000], vec![1, 0, 5, 0, 60_000], vec![1, 3, 3, 0, 0]]);
    assert_eq!(snapshot(con, &["full"]), before, "the window looked at is unchanged");
    assert!(!exists(con, "sl"), "the log looked at is not created");
    take(con, "single", ["TOKENBUCKET", "10", "1"], &at(0), "3");
    assert_eq!(dump(con, "tb"), dump(con, "single"), "the bucket took its 3");
}

/// Keys `k1` (a token bucket) and `k2` (a fixed window) with state; `k3`
/// missing. Every limit of the calls below would admit.
fn two_limiters(con: &mut redis::Connection) -> Vec<(Option<Vec<u8>>, i64)> {
    take(con, "k1", ["TOKENBUCKET", "10", "0.01"], &at(0), "1");
    take(con, "k2", FW_MINUTE, &at(0), "1");
    snapshot(con, &["k1", "k2", "k3"])
}

#[test]
fn multi_repeated_key_and_wrong_arity_change_nothing() {
    let (_server, con) = &mut server();
    let before = two_limiters(con);
    let now = at(1000);
    let tb = ["TOKENBUCKET", "10", "0.01", "1"];
    let fw = ["FIXEDWINDOW", "5", "60", "1"];
    let call = |head: &[&str], specs: &[&[&str]]| -> Vec<String> {
        let mut args: Vec<String> = head.iter().map(|s| s.to_string()).collect();
        for spec in specs {
            args.extend(spec.iter().map(|s| s.to_string()));
        }
        args
    };
    let cases: Vec<(Vec<String>, String)> = vec![
        (call(&["2", "k1", "k1", &now], &[&tb, &tb]), REPEATED.into()),
        (call(&["3", "k3", "k1", "k3", &now], &[&fw, &tb, &fw]), REPEATED.into()),
        // numkeys larger than the keys given
        (call(&["3", "k1", "k2", &now], &[&tb, &fw]), arity("RL.MULTI")),
        (call(&["9", "k1", "k2", &now], &[&tb, &fw]), arity("RL.MULTI")),
        // numkeys smaller than the keys given
        (call(&["1", "k1", "k2", &now], &[&tb, &fw]), arity("RL.MULTI")),
        // a limit without its n, one argument too many, a limit too few
        (call(&["2", "k1", "k2", &now], &[&tb, &fw[..3]]), arity("RL.MULTI")),
        (call(&["2", "k1", "k2", &now], &[&tb, &fw, &["1"]]), arity("RL.MULTI")),
        (call(&["2", "k1", "k2", &now], &[&tb]), arity("RL.MULTI")),
        (call(&["1", "k1", &now], &[&tb[..3]]), arity("RL.MULTI")),
        // shorter than any RL.MULTI: Redis itself refuses it
        (call(&["1", "k1", &now], &[]), arity("RL.MULTI")),
        (call(&["0", "k1", &now], &[&tb]), NUMKEYS.into()),
        (call(&["-1", "k1", &now], &[&tb]), NUMKEYS.into()),
        (call(&["x", "k1", &now], &[&tb]), NUMKEYS.into()),
        (call(&["0", "k1", "k2", &now], &[&tb, &fw]), NUMKEYS.into()),
    ];
    for (args, message) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(multi_error(con, &args), message, "{args:?}");
    }
    assert_eq!(snapshot(con, &["k1", "k2", "k3"]), before);
    assert_eq!(dbsize(con), 2);
}

/// RL.MULTI takes up to 1000 keys, so one call cannot block the server
/// for long; more are refused before any argument is read.
#[test]
fn multi_takes_at_most_1000_keys() {
    let (_server, con) = &mut server();
    let keys = |count: usize| -> Vec<String> {
        let names = (0..count).map(|i| format!("{{user:1}}:{i}"));
        let specs = (0..count).flat_map(|_| ["FIXEDWINDOW", "5", "60", "1"].map(String::from));
        let now = std::iter::once(at(1000));
        std::iter::once(count.to_string()).chain(names).chain(now).chain(specs).collect()
    };
    let args = keys(1001);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(multi_error(con, &args), NUMKEYS);
    let million = ["1000000", "k1", "1000", "TOKENBUCKET", "10", "1", "1"];
    assert_eq!(multi_error(con, &million), NUMKEYS);
    assert_eq!(dbsize(con), 0);
    let args = keys(1000);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (allowed, retry, fields) = multi(con, &args);
    assert_eq!((allowed, retry, fields.len()), (1, 0, 1000));
    assert!(fields.iter().all(|f| f[..4] == [1, 4, 5, 0]), "{:?}", &fields[..2]);
    assert_eq!(dbsize(con), 1000);
}

#[test]
fn multi_bad_argument_in_the_last_limit_changes_nothing() {
    let (_server, con) = &mut server();
    let before = two_limiters(con);
    let now = at(1000);
    let last = |spec: [&str; 4]| -> Vec<String> {
        let mut args: Vec<String> = ["3", "k1", "k2", "k3", &now].map(String::from).to_vec();
        args.extend(
            ["TOKENBUCKET", "10", "0.01", "1", "FIXEDWINDOW", "5", "60", "1"].map(String::from),
        );
        args.extend(spec.map(String::from));
        args
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (last(["SLIDINGLOG", "0", "60", "1"]), LIMIT),
        (last(["SLIDINGLOG", "9007199254740992", "60", "1"]), LIMIT),
        (last(["SLIDINGWINDOW", "3", "0.0009", "1"]), WINDOW),
        (last(["SLIDINGLOG", "3", "60", "-1"]), COUNT),
        (last(["SLIDINGLOG", "3", "60", "9007199254740992"]), COUNT),
        (last(["LEAKYBUCKET", "0", "1", "1"]), CAPACITY),
        (last(["TOKENBUCKET", "4", "0", "1"]), RATE),
        (last(["GCRA", "4", "1", "1"]), ALGORITHM),
        (last(["", "4", "1", "1"]), ALGORITHM),
    ];
    for (args, message) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(multi_error(con, &args), message, "{args:?}");
    }
    // A bad `now` is named too.
    let args =
        ["2", "k1", "k2", "soon", "TOKENBUCKET", "10", "0.01", "1", "FIXEDWINDOW", "5", "60", "1"];
    assert_eq!(multi_error(con, &args), NOW);
    assert_eq!(snapshot(con, &["k1", "k2", "k3"]), before);
    assert_eq!(dbsize(con), 2);
}

#[test]
fn multi_key_of_another_type_anywhere_changes_nothing() {
    let (_server, con) = &mut server();
    let mut before = two_limiters(con);
    take(con, "log", SL_MINUTE, &at(0), "1");
    let _: () = redis::cmd("SET").arg("str").arg("x").query(con).unwrap();
    let _: () = redis::cmd("RPUSH").arg("list").arg("x").query(con).unwrap();
    before.extend(snapshot(con, &["log", "str", "list"]));
    let keys = ["k1", "k2", "k3", "log", "str", "list"];
    let now = at(1000);
    let tb = ["TOKENBUCKET", "10", "0.01", "1"];
    let fw = ["FIXEDWINDOW", "5", "60", "1"];
    let sl = ["SLIDINGLOG", "3", "60", "1"];
    let call = |names: &[&str], specs: &[[&str; 4]]| -> Vec<String> {
        let mut args = vec![names.len().to_string()];
        args.extend(names.iter().map(|s| s.to_string()));
        args.push(now.clone());
        for spec in specs {
            args.extend(spec.iter().map(|s| s.to_string()));
        }
        args
    };
    let cases = [
        call(&["str", "k1"], &[tb, tb]),
        call(&["k1", "k3", "str"], &[tb, fw, fw]),
        call(&["k1", "k2", "list"], &[tb, fw, sl]),
        // Another algorithm's state: a fixed window read as a bucket, a
        // bucket as a log, a log as a window.
        call(&["k1", "k2"], &[tb, tb]),
        call(&["k2", "k3", "k1"], &[fw, sl, sl]),
        call(&["k1", "log"], &[tb, fw]),
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(multi_error(con, &args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(snapshot(con, &keys), before);
    assert!(!exists(con, "k3"));
}

#[test]
fn multi_eight_clients_admit_what_the_tightest_limit_allows() {
    let server = Arc::new(Server::start(&[]));
    // A fixed `now`: nothing refills or slides. The window's 600 is the tightest.
    let args = [
        "3",
        "{h}:tb",
        "{h}:fw",
        "{h}:sl",
        "1700000040",
        "TOKENBUCKET",
        "1000",
        "1",
        "1",
        "FIXEDWINDOW",
        "600",
        "600",
        "1",
        "SLIDINGLOG",
        "800",
        "600",
        "1",
    ];
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let server = Arc::clone(&server);
            thread::spawn(move || {
                let con = &mut server.connect();
                (0..100).map(|_| multi(con, &args).0).sum::<i64>()
            })
        })
        .collect();
    let admitted: i64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(admitted, 600);
    let con = &mut server.connect();
    let now = "1700000040";
    assert_eq!(peek(con, "{h}:tb", ["TOKENBUCKET", "1000", "1"], now, "0")[1], 400);
    assert_eq!(peek(con, "{h}:fw", ["FIXEDWINDOW", "600", "600"], now, "0")[1], 0);
    assert_eq!(peek(con, "{h}:sl", ["SLIDINGLOG", "800", "600"], now, "0")[1], 200);
}

#[test]
fn multi_respects_acl_key_patterns() {
    let (server, con) = &mut server();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "tenant", "on", ">secret", "~tenant:*", "+rl.multi"])
        .query(con)
        .unwrap();
    let url = format!("redis://tenant:secret@127.0.0.1:{}/", server.port);
    let user = &mut redis::Client::open(url).unwrap().get_connection().unwrap();
    let args = [
        "2",
        "tenant:a",
        "other:b",
        "*",
        "TOKENBUCKET",
        "10",
        "1",
        "1",
        "FIXEDWINDOW",
        "5",
        "60",
        "1",
    ];
    let denied = multi_error(user, &args);
    assert!(denied.starts_with("NOPERM"), "{denied}");
    assert_eq!(dbsize(con), 0);
    let (allowed, _, _) = multi(user, &["1", "tenant:a", "*", "TOKENBUCKET", "10", "1", "1"]);
    assert_eq!(allowed, 1);
}

#[test]
fn peek_and_refund_bad_calls_change_nothing() {
    let (_server, con) = &mut server();
    let before = two_limiters(con);
    let _: () = redis::cmd("SET").arg("str").arg("x").query(con).unwrap();
    let now = at(1000);
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["RL.PEEK", "str", "TOKENBUCKET", "10", "0.01", &now], WRONGTYPE.into()),
        (vec!["RL.REFUND", "str", "TOKENBUCKET", "10", "0.01", &now, "1"], WRONGTYPE.into()),
        // k2 holds a fixed window, k1 a token bucket.
        (vec!["RL.PEEK", "k2", "TOKENBUCKET", "10", "0.01", &now, "1"], WRONGTYPE.into()),
        (vec!["RL.REFUND", "k1", "SLIDINGLOG", "5", "60", &now, "1"], WRONGTYPE.into()),
        (vec!["RL.REFUND", "k1", "TOKENBUCKET", "10", "0.01", &now], arity("RL.REFUND")),
        (vec!["RL.REFUND", "k1", "TOKENBUCKET", "10", "0.01", &now, "1", "1"], arity("RL.REFUND")),
        (vec!["RL.PEEK", "k1", "TOKENBUCKET", "10", "0.01"], arity("RL.PEEK")),
        (vec!["RL.PEEK", "k1", "TOKENBUCKET", "10", "0.01", &now, "1", "1"], arity("RL.PEEK")),
        (vec!["RL.PEEK", "k1", "GCRA", "10", "0.01", &now], ALGORITHM.into()),
        (vec!["RL.REFUND", "k2", "FIXEDWINDOW", "5", "0", &now, "1"], WINDOW.into()),
        (vec!["RL.REFUND", "k2", "FIXEDWINDOW", "5", "60", "-1", "1"], NOW.into()),
        (vec!["RL.REFUND", "k2", "FIXEDWINDOW", "5", "60", &now, "x"], COUNT.into()),
        (vec!["RL.REFUND", "k3", "LEAKYBUCKET", "0", "1", &now, "1"], CAPACITY.into()),
    ];
    for (args, message) in cases {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(error(con, &bytes), message, "{args:?}");
    }
    assert_eq!(snapshot(con, &["k1", "k2", "k3"]), before);
    assert_eq!(dbsize(con), 3);
}

#[test]
fn command_getkeys_lists_every_key() {
    let (_server, con) = &mut server();
    let getkeys = |con: &mut redis::Connection, args: &[&str]| -> Vec<String> {
        redis::cmd("COMMAND").arg("GETKEYS").arg(args).query(con).unwrap()
    };
    let args = [
        "RL.MULTI",
        "3",
        "a",
        "{b}",
        "c",
        "*",
        "TOKENBUCKET",
        "10",
        "1",
        "1",
        "FIXEDWINDOW",
        "5",
        "60",
        "1",
        "SLIDINGLOG",
        "3",
        "60",
        "1",
    ];
    assert_eq!(getkeys(con, &args), ["a", "{b}", "c"]);
    // One limit: one key.
    assert_eq!(getkeys(con, &["RL.MULTI", "1", "a", "*", "TOKENBUCKET", "10", "1", "1"]), ["a"]);
    assert_eq!(getkeys(con, &["RL.PEEK", "p", "TOKENBUCKET", "10", "1", "*"]), ["p"]);
    assert_eq!(getkeys(con, &["RL.REFUND", "r", "TOKENBUCKET", "10", "1", "*", "1"]), ["r"]);
}

const CLUSTER_SPECS: [&str; 8] =
    ["FIXEDWINDOW", "5", "60", "1", "TOKENBUCKET", "1000", "10", "300"];

fn cluster_call<'a>(a: &'a str, b: &'a str) -> Vec<&'a str> {
    [&["2", a, b, "*"][..], &CLUSTER_SPECS[..]].concat()
}

#[test]
fn multi_in_a_cluster_runs_on_the_node_of_its_hash_tag() {
    let nodes = common::start_cluster(3);
    let (rpm, tpm) = ("{user:42}:rpm", "{user:42}:tpm");
    let owner = common::node_serving(&nodes, rpm);
    let (allowed, retry_after_ms, fields) = multi(&mut owner.connect(), &cluster_call(rpm, tpm));
    assert_eq!((allowed, retry_after_ms), (1, 0));
    assert_eq!((fields[0][1], fields[1][1]), (4, 700), "5 - 1 requests, 1000 - 300 tokens");
    assert!(exists(&mut owner.connect(), rpm) && exists(&mut owner.connect(), tpm));
    // Another node sends the client to the owner of both keys' slot.
    for other in nodes.iter().filter(|n| n.port != owner.port) {
        let moved = multi_error(&mut other.connect(), &cluster_call(rpm, tpm));
        let to_owner = format!("127.0.0.1:{}", owner.port);
        assert!(moved.starts_with("MOVED ") && moved.ends_with(&to_owner), "{moved}");
        assert_eq!(dbsize(&mut other.connect()), 0);
    }
}

#[test]
fn multi_in_a_cluster_refuses_keys_of_two_slots() {
    let nodes = common::start_cluster(3);
    let (a, b) = ("user:42:rpm", "user:43:rpm");
    let con = &mut nodes[0].connect();
    let slot = |con: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(con).unwrap()
    };
    assert_ne!(slot(con, a), slot(con, b));
    for node in &nodes {
        let reply = multi_error(&mut node.connect(), &cluster_call(a, b));
        assert!(reply.starts_with("CROSSSLOT"), "{reply}");
        assert_eq!(dbsize(&mut node.connect()), 0);
    }
}

/// The five algorithms, slow enough that nothing expires mid-test, plus a
/// token bucket above 18,446,744 units (its wide encoding).
const ALL_FIVE: [(&str, [&str; 3]); 6] = [
    ("{u}:tb", ["TOKENBUCKET", "30", "0.01"]),
    ("{u}:lb", ["LEAKYBUCKET", "30", "0.01"]),
    ("{u}:fw", ["FIXEDWINDOW", "30", "100000"]),
    ("{u}:sw", ["SLIDINGWINDOW", "30", "100000"]),
    ("{u}:sl", ["SLIDINGLOG", "30", "100000"]),
    ("{u}:wide", ["TOKENBUCKET", "9007199254740991", "10000"]),
];

fn all_five_keys() -> Vec<&'static str> {
    ALL_FIVE.iter().map(|(key, _)| *key).collect()
}

/// RL.MULTI calls on the server's clock over all of ALL_FIVE, in two
/// orders, until the 30s are full: some admitted, some denied; a refund
/// now and then. Returns
/// (admitted, denied).
fn multi_on_server_clock(con: &mut redis::Connection, rounds: usize) -> (usize, usize) {
    let (mut admitted, mut denied) = (0, 0);
    for round in 0..rounds {
        let mut limits: Vec<_> = ALL_FIVE.to_vec();
        if round % 2 == 1 {
            limits.reverse();
        }
        let count = if round % 3 == 2 { 3 } else { limits.len() };
        let mut args = vec![count.to_string()];
        args.extend(limits[..count].iter().map(|(key, _)| key.to_string()));
        args.push("*".into());
        for (i, (_, spec)) in limits[..count].iter().enumerate() {
            args.extend(spec.iter().map(|s| s.to_string()));
            let n = if spec[1].len() > 2 { 1_000_000_000_000 } else { (round + i) % 4 };
            args.push(n.to_string());
        }
        match multi(con, &args.iter().map(String::as_str).collect::<Vec<_>>()).0 {
            1 => admitted += 1,
            _ => denied += 1,
        }
        // Refunds on the server's clock travel the same way.
        if round >= 7 && round % 4 == 3 {
            let (key, spec) = ALL_FIVE[round % ALL_FIVE.len()];
            assert_eq!(refund(con, key, spec, "*", "1")[0], 1);
        }
        if round % 5 == 0 {
            thread::sleep(Duration::from_millis(2));
        }
    }
    (admitted, denied)
}

fn assert_all_present(snap: &[(Option<Vec<u8>>, i64)]) {
    for (payload, at) in snap {
        assert!(payload.is_some() && *at > 0, "{snap:?}");
    }
}

#[test]
fn multi_on_server_clock_replicates_exactly() {
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = start_replica(&primary);
    let (p, r) = (&mut primary.connect(), &mut replica.connect());
    let (admitted, denied) = multi_on_server_clock(p, 40);
    assert!(admitted > 5 && denied > 5, "{admitted} admitted, {denied} denied");
    wait_for_replica(p);
    let keys = all_five_keys();
    let on_primary = snapshot(p, &keys);
    assert_all_present(&on_primary);
    assert_eq!(snapshot(r, &keys), on_primary, "DUMP and PEXPIRETIME on the replica");
}

/// RL.MULTI on the server clock, an AOF rewrite, more of it after the
/// rewrite: the snapshot to come back after a reload.
fn fill_and_rewrite(con: &mut redis::Connection) -> Vec<(Option<Vec<u8>>, i64)> {
    wait_for_aof_rewrite(con); // the one that turning AOF on starts
    multi_on_server_clock(con, 12);
    let _: String = redis::cmd("BGREWRITEAOF").query(con).unwrap();
    wait_for_aof_rewrite(con);
    multi_on_server_clock(con, 12); // into the incremental file
    let snap = snapshot(con, &all_five_keys());
    assert_all_present(&snap);
    snap
}

#[test]
fn multi_on_server_clock_survives_aof_with_rdb_preamble() {
    let mut server = aof_server("yes");
    let before = fill_and_rewrite(&mut server.connect());
    assert!(is_rdb(&aof_base(&server)), "an RDB preamble");
    let con = &mut server.connect();
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(con).unwrap();
    assert_eq!(snapshot(con, &all_five_keys()), before, "after DEBUG LOADAOF");
    server.restart();
    assert_eq!(snapshot(&mut server.connect(), &all_five_keys()), before, "after a restart");
}

#[test]
fn multi_on_server_clock_survives_aof_rewritten_as_commands() {
    let mut server = aof_server("no");
    let before = fill_and_rewrite(&mut server.connect());
    let base = aof_base(&server);
    assert!(base.windows(11).any(|w| w == b"RL.SETSTATE"), "a rewrite as commands");
    let con = &mut server.connect();
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(con).unwrap();
    assert_eq!(snapshot(con, &all_five_keys()), before, "after DEBUG LOADAOF");
    server.restart();
    assert_eq!(snapshot(&mut server.connect(), &all_five_keys()), before, "after a restart");
}

// ----------------------------------------------------------------- RL.PEEK

/// Keys of every algorithm with some state at T, and the specs to call them with.
const PEEKED: [(&str, [&str; 3], &str); 5] = [
    ("p:tb", ["TOKENBUCKET", "10", "0.1"], "7"),
    ("p:lb", ["LEAKYBUCKET", "10", "0.1"], "7"),
    ("p:fw", ["FIXEDWINDOW", "10", "60"], "7"),
    ("p:sw", ["SLIDINGWINDOW", "10", "60"], "7"),
    ("p:sl", ["SLIDINGLOG", "10", "60"], "7"),
];

fn fill_peeked(con: &mut redis::Connection) {
    for (key, spec, n) in PEEKED {
        take(con, key, spec, &at(0), n);
    }
}

/// What RL.PEEK answers equals what the write call answers on a COPY of
/// the key, for several `n` and times; the key itself never changes.
fn assert_peek_equals_write_on_copy(
    peeker: &mut redis::Connection,
    writer: &mut redis::Connection,
) {
    let keys: Vec<&str> = PEEKED.iter().map(|(key, _, _)| *key).collect();
    let before = snapshot(peeker, &keys);
    for (key, spec, _) in PEEKED {
        for now in [at(0), at(5_000), at(30_000)] {
            for n in ["0", "1", "3", "4", "10", "11"] {
                let peeked = peek(peeker, key, spec, &now, n);
                let _: () =
                    redis::cmd("COPY").arg(key).arg("copy").arg("REPLACE").query(writer).unwrap();
                let written = take(writer, "copy", spec, &now, n);
                assert_eq!(peeked, written, "{key} {spec:?} at {now}, n {n}");
            }
        }
    }
    assert_eq!(snapshot(peeker, &keys), before, "peeked keys unchanged");
}

#[test]
fn peek_answers_as_the_write_call_would_and_changes_nothing() {
    let (_server, con) = &mut server();
    fill_peeked(con);
    // Worked out for the token bucket: 3 tokens at T, 3.5 at T + 5 s; 3 fit, 4 do not.
    assert_eq!(peek(con, "p:tb", PEEKED[0].1, &at(5_000), "3"), [1, 0, 10, 0, 95_000]);
    assert_eq!(peek(con, "p:tb", PEEKED[0].1, &at(5_000), "4"), [0, 3, 10, 5000, 65_000]);
    let mut writer = _server.connect();
    assert_peek_equals_write_on_copy(con, &mut writer);
}

#[test]
fn peek_creates_no_key() {
    let (_server, con) = &mut server();
    for (_, spec, _) in PEEKED {
        for n in ["0", "1", "11"] {
            let peeked = peek(con, "missing", spec, &at(0), n);
            assert_eq!(peeked, take(con, "written", spec, &at(0), n), "{spec:?} n {n}");
            let _: () = redis::cmd("DEL").arg("written").query(con).unwrap();
            assert!(!exists(con, "missing"), "{spec:?} n {n}");
        }
    }
    // Default n = 1, as the write call.
    assert_eq!(
        ints(con, &["RL.PEEK", "missing", "TOKENBUCKET", "10", "1", "*"]),
        [1, 9, 10, 0, 1000]
    );
    assert_eq!(dbsize(con), 0);
}

#[test]
fn peek_signals_no_keyspace_event() {
    let server = Server::start(&["--notify-keyspace-events", "KEA"]);
    let con = &mut server.connect();
    fill_peeked(con);
    let mut listener = server.connect();
    let mut pubsub = listener.as_pubsub();
    common::listen_keyevents(&mut pubsub);
    for (key, spec, _) in PEEKED {
        for n in ["0", "1", "3", "11"] {
            peek(con, key, spec, &at(1000), n);
            peek(con, "missing", spec, &at(1000), n);
        }
    }
    let _: () = redis::cmd("SET").arg("sentinel").arg("x").query(con).unwrap();
    let event = common::next_keyevent(&mut pubsub);
    assert_eq!(event, ("__keyevent@0__:set".to_string(), "sentinel".to_string()));
}

#[test]
fn peek_runs_on_a_replica() {
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = start_replica(&primary);
    let (p, r) = (&mut primary.connect(), &mut replica.connect());
    fill_peeked(p);
    wait_for_replica(p);
    // A plain connection, no READONLY: the replica answers like the primary's write would.
    assert_peek_equals_write_on_copy(r, p);
    assert_eq!(peek(r, "missing", PEEKED[2].1, &at(0), "3"), [1, 7, 10, 0, 60_000]);
    assert!(!exists(r, "missing"));
    // Writes are refused there.
    let denied = error(r, &[b"RL.TOKENBUCKET", b"p:tb", b"10", b"0.1", b"1700000040", b"1"]);
    assert!(denied.starts_with("READONLY"), "{denied}");
}

/// On servers with ACL categories for module commands (Redis 7.2+,
/// Valkey) RL.PEEK is in `@read`; on Redis 7.0 a user is granted it by name.
#[test]
fn peek_for_a_read_only_user() {
    let (server, con) = &mut server();
    let info: String = redis::cmd("INFO").arg("server").query(con).unwrap();
    let version = |name: &str| {
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).map(|v| {
            let parts: Vec<u32> = v.trim().split('.').map(|p| p.parse().unwrap_or(0)).collect();
            (parts[0], parts[1])
        })
    };
    let has_categories = version("valkey_version").is_some()
        || version("redis_version").is_some_and(|v| v >= (7, 2));
    let grant = if has_categories { "+@read" } else { "+rl.peek" };
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "reader", "on", ">secret", "~*", grant])
        .query(con)
        .unwrap();
    take(con, "k", ["TOKENBUCKET", "10", "0.1"], &at(0), "4");
    let before = snapshot(con, &["k"]);
    let url = format!("redis://reader:secret@127.0.0.1:{}/", server.port);
    let user = &mut redis::Client::open(url).unwrap().get_connection().unwrap();
    // 6 tokens at T, 6.5 at T + 5 s.
    assert_eq!(
        peek(user, "k", ["TOKENBUCKET", "10", "0.1"], &at(5_000), "1"),
        [1, 5, 10, 0, 45_000]
    );
    for write in [
        &[&b"RL.TOKENBUCKET"[..], b"k", b"10", b"0.1", b"1700000045", b"1"][..],
        &[b"RL.REFUND", b"k", b"TOKENBUCKET", b"10", b"0.1", b"1700000045", b"1"],
        &[b"RL.MULTI", b"1", b"k", b"1700000045", b"TOKENBUCKET", b"10", b"0.1", b"1"],
    ] {
        let denied = error(user, write);
        assert!(denied.starts_with("NOPERM"), "{grant}: {denied}");
    }
    assert_eq!(snapshot(con, &["k"]), before);
}

// --------------------------------------------------------------- RL.REFUND

/// Runs the single-key command on `key` for each (ms after T, n).
fn history(con: &mut redis::Connection, key: &str, spec: [&str; 3], calls: &[(u64, &str)]) {
    let _: () = redis::cmd("DEL").arg(key).query(con).unwrap();
    for &(ms, n) in calls {
        assert_eq!(take(con, key, spec, &at(ms), n)[0], 1, "{key} {spec:?} at {ms} n {n}");
    }
}

/// A refund that leaves state: its reply, and the key's expiry at its reset.
fn assert_refund(
    con: &mut redis::Connection,
    key: &str,
    spec: [&str; 3],
    (ms, n): (u64, &str),
    expected: &[i64],
) {
    let before = server_ms(con);
    let reply = refund(con, key, spec, &at(ms), n);
    let after = server_ms(con);
    assert_eq!(reply, expected, "RL.REFUND {key} {spec:?} at {ms} n {n}");
    assert_expires_after(con, key, reply[4], (before, after));
}

/// A refund that leaves the limiter fresh: the key is gone.
fn assert_refund_deletes(
    con: &mut redis::Connection,
    key: &str,
    spec: [&str; 3],
    (ms, n): (u64, &str),
    expected: &[i64],
) {
    assert_eq!(refund(con, key, spec, &at(ms), n), expected, "RL.REFUND {key} at {ms} n {n}");
    assert_eq!(pttl(con, key), -2, "{key} deleted");
}

/// A refund of 0 reports the state and changes nothing; a refund on a
/// missing key reports a fresh limiter and creates nothing.
fn assert_refund_only_looks(
    con: &mut redis::Connection,
    spec: [&str; 3],
    (ms, expected): (u64, &[i64]),
    fresh: &[i64],
) {
    let before = snapshot(con, &["k"]);
    assert_eq!(refund(con, "k", spec, &at(ms), "0"), expected, "n = 0");
    assert_eq!(snapshot(con, &["k"]), before, "n = 0 changes nothing");
    assert_eq!(refund(con, "missing", spec, &at(ms), "3"), fresh, "missing key");
    assert!(!exists(con, "missing"));
}

#[test]
fn refund_token_bucket() {
    let (_server, con) = &mut server();
    let spec = ["TOKENBUCKET", "10", "0.1"];
    let six = [(0, "6")]; // 4 tokens left at T
    history(con, "k", spec, &six);
    // 4 + 5 s * 0.1 + 2 = 6.5: 6 whole, 3.5 tokens (35 s) from full.
    assert_refund(con, "k", spec, (5_000, "2"), &[1, 6, 10, 0, 35_000]);
    history(con, "k", spec, &six);
    // More than was taken: full, fresh.
    assert_refund_deletes(con, "k", spec, (5_000, "100"), &[1, 10, 10, 0, 0]);
    history(con, "k", spec, &six);
    // 4.5 tokens at T + 5 s, 5.5 (55 s) from full.
    assert_refund_only_looks(con, spec, (5_000, &[1, 4, 10, 0, 55_000]), &[1, 10, 10, 0, 0]);
}

#[test]
fn refund_leaky_bucket() {
    let (_server, con) = &mut server();
    let spec = ["LEAKYBUCKET", "4", "0.1"];
    let three = [(0, "3")]; // 3 queued at T
    history(con, "k", spec, &three);
    // 3 - 0.5 drained - 2 = 0.5 queued: 3.5 free, 5 s to drain, 5 s wait.
    assert_refund(con, "k", spec, (5_000, "2"), &[1, 3, 4, 0, 5000, 5000]);
    history(con, "k", spec, &three);
    assert_refund_deletes(con, "k", spec, (5_000, "9"), &[1, 4, 4, 0, 0, 0]);
    history(con, "k", spec, &three);
    // 2.5 queued at T + 5 s: 1.5 free, 25 s to drain.
    assert_refund_only_looks(
        con,
        spec,
        (5_000, &[1, 1, 4, 0, 25_000, 25_000]),
        &[1, 4, 4, 0, 0, 0],
    );
}

#[test]
fn refund_fixed_window() {
    let (_server, con) = &mut server();
    let spec = ["FIXEDWINDOW", "5", "60"];
    let four = [(10_000, "4")]; // 4 counted in [T, T + 60)
    history(con, "k", spec, &four);
    // 4 - 1 = 3 counted; the window ends 40 s after T + 20 s.
    assert_refund(con, "k", spec, (20_000, "1"), &[1, 2, 5, 0, 40_000]);
    history(con, "k", spec, &four);
    assert_refund_deletes(con, "k", spec, (20_000, "7"), &[1, 5, 5, 0, 0]);
    history(con, "k", spec, &four);
    // In the next window the 4 are gone already: nothing to give back, fresh.
    assert_refund_deletes(con, "k", spec, (61_000, "2"), &[1, 5, 5, 0, 0]);
    history(con, "k", spec, &four);
    assert_refund_only_looks(con, spec, (20_000, &[1, 1, 5, 0, 40_000]), &[1, 5, 5, 0, 0]);
}

#[test]
fn refund_sliding_window() {
    let (_server, con) = &mut server();
    let spec = ["SLIDINGWINDOW", "10", "60"];
    let both = [(30_000, "8"), (75_000, "2")]; // previous 8, current 2 at T + 75 s
    history(con, "k", spec, &both);
    // 3 back: current 2 -> 0, previous 8 -> 7; 7 * 45/60 = 5.25 weigh: 4
    // remain; only the previous counts, so fresh at T + 120.
    assert_refund(con, "k", spec, (75_000, "3"), &[1, 4, 10, 0, 45_000]);
    history(con, "k", spec, &[(30_000, "8")]);
    // The window rolled: the 8 are the previous count, 8 - 3 = 5 weigh 3.75.
    assert_refund(con, "k", spec, (75_000, "3"), &[1, 6, 10, 0, 45_000]);
    history(con, "k", spec, &both);
    assert_refund_deletes(con, "k", spec, (75_000, "10"), &[1, 10, 10, 0, 0]);
    history(con, "k", spec, &[(30_000, "8")]);
    // Two windows later nothing counts any more.
    assert_refund_deletes(con, "k", spec, (125_000, "1"), &[1, 10, 10, 0, 0]);
    history(con, "k", spec, &both);
    // 8 * 0.75 + 2 = 8 weigh; the current 2 slide out at T + 180.
    assert_refund_only_looks(con, spec, (75_000, &[1, 2, 10, 0, 105_000]), &[1, 10, 10, 0, 0]);
}

#[test]
fn refund_sliding_log() {
    let (_server, con) = &mut server();
    let spec = ["SLIDINGLOG", "3", "60"];
    let three = [(0, "1"), (10_000, "2")]; // 1 at T, 2 at T + 10 s
    history(con, "k", spec, &three);
    // The newest goes: 1 at T and 1 at T + 10 s left; fresh at T + 70.
    assert_refund(con, "k", spec, (20_000, "1"), &[1, 1, 3, 0, 50_000]);
    history(con, "k", spec, &three);
    // Both of T + 10 s go: the unit of T is the newest left, fresh at T + 60.
    assert_refund(con, "k", spec, (20_000, "2"), &[1, 2, 3, 0, 40_000]);
    history(con, "k", spec, &three);
    // At T + 65 s the unit of T left the window: of the 2 still in, 1 goes.
    assert_refund(con, "k", spec, (65_000, "1"), &[1, 2, 3, 0, 5000]);
    history(con, "k", spec, &three);
    assert_refund_deletes(con, "k", spec, (20_000, "5"), &[1, 3, 3, 0, 0]);
    history(con, "k", spec, &three);
    assert_refund_only_looks(con, spec, (20_000, &[1, 0, 3, 0, 50_000]), &[1, 3, 3, 0, 0]);
}

#[test]
fn refund_replicates_exactly_and_deletes_on_the_replica() {
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = start_replica(&primary);
    let (p, r) = (&mut primary.connect(), &mut replica.connect());
    let limits = [
        ("r:tb", ["TOKENBUCKET", "30", "0.01"]),
        ("r:lb", ["LEAKYBUCKET", "30", "0.01"]),
        ("r:fw", ["FIXEDWINDOW", "30", "100000"]),
        ("r:sw", ["SLIDINGWINDOW", "30", "100000"]),
        ("r:sl", ["SLIDINGLOG", "30", "100000"]),
    ];
    let keys: Vec<&str> = limits.iter().map(|(key, _)| *key).collect();
    for (key, spec) in limits {
        for n in ["5", "3", "4"] {
            take(p, key, spec, "*", n);
            thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(refund(p, key, spec, "*", "4")[1], 30 - 8, "{key}: 12 taken, 4 back");
    }
    wait_for_replica(p);
    let on_primary = snapshot(p, &keys);
    assert_all_present(&on_primary);
    assert_eq!(snapshot(r, &keys), on_primary, "DUMP and PEXPIRETIME after the refunds");
    for (key, spec) in limits {
        assert_eq!(refund(p, key, spec, "*", "100")[1], 30, "{key}: all back");
    }
    wait_for_replica(p);
    for key in keys {
        assert!(!exists(p, key) && !exists(r, key), "{key} deleted on both");
    }
}

// ------------------------------------------------------------ Large quotas

const M: &str = "9007199254740991";
const ABOVE: &str = "9007199254740992";

#[test]
fn the_largest_quota_is_exact_for_every_algorithm() {
    let (_server, con) = &mut server();
    // (spec, the call taking 2^53 - 1 (ms after T), its reply, then n = 1
    // on the same key, its reply, and n = 1 on a fresh key at T)
    #[allow(clippy::type_complexity)]
    let cases: [([&str; 3], u64, Vec<i64>, u64, Vec<i64>, Vec<i64>); 5] = [
        // (2^53 - 1) / 10000 per s = 900719925474.0991 s; one token 0.1 ms.
        (
            ["TOKENBUCKET", M, "10000"],
            0,
            vec![1, 0, MAX, 0, 900_719_925_474_100],
            0,
            vec![0, 0, MAX, 1, 900_719_925_474_100],
            vec![1, MAX - 1, MAX, 0, 1],
        ),
        (
            ["LEAKYBUCKET", M, "10000"],
            0,
            vec![1, 0, MAX, 0, 900_719_925_474_100, 0],
            0,
            vec![0, 0, MAX, 1, 900_719_925_474_100, 0],
            vec![1, MAX - 1, MAX, 0, 1, 0],
        ),
        // The window [T, T + 60) is full until its end.
        (
            ["FIXEDWINDOW", M, "60"],
            15_000,
            vec![1, 0, MAX, 0, 45_000],
            30_000,
            vec![0, 0, MAX, 30_000, 30_000],
            vec![1, MAX - 1, MAX, 0, 60_000],
        ),
        // At T + 60 the previous window weighs fully; 1 fits once its weight
        // drops by 1 / (2^53 - 1): after 1 µs, 1 ms rounded up.
        (
            ["SLIDINGWINDOW", M, "60"],
            30_000,
            vec![1, 0, MAX, 0, 90_000],
            60_000,
            vec![0, 0, MAX, 1, 60_000],
            vec![1, MAX - 1, MAX, 0, 120_000],
        ),
        (
            ["SLIDINGLOG", M, "60"],
            0,
            vec![1, 0, MAX, 0, 60_000],
            10_000,
            vec![0, 0, MAX, 50_000, 50_000],
            vec![1, MAX - 1, MAX, 0, 60_000],
        ),
    ];
    for (spec, first_ms, first, next_ms, next, fresh) in cases {
        assert_eq!(take(con, "all", spec, &at(first_ms), M), first, "{spec:?} n = 2^53 - 1");
        assert_eq!(take(con, "all", spec, &at(next_ms), "1"), next, "{spec:?} then n = 1");
        assert_eq!(take(con, "one", spec, &at(0), "1"), fresh, "{spec:?} n = 1");
        // Through RL.MULTI, RL.PEEK and RL.REFUND the same numbers.
        let _: () = redis::cmd("DEL").arg(&["all", "one"]).query(con).unwrap();
        let (allowed, _, fields) =
            multi(con, &["1", "all", &at(first_ms), spec[0], spec[1], spec[2], M]);
        assert_eq!((allowed, &fields[0]), (1, &first), "{spec:?} RL.MULTI");
        assert_eq!(peek(con, "all", spec, &at(next_ms), "1"), next, "{spec:?} RL.PEEK");
        assert_eq!(refund(con, "all", spec, &at(next_ms), M)[..3], [1, MAX, MAX], "{spec:?}");
        assert!(!exists(con, "all"), "{spec:?}: all given back, fresh");
    }
    // One token back into the full-and-emptied largest bucket: 2^53 - 2
    // tokens (900719925474.099 s) from full.
    take(con, "tb", ["TOKENBUCKET", M, "10000"], &at(0), M);
    assert_eq!(
        refund(con, "tb", ["TOKENBUCKET", M, "10000"], &at(0), "1"),
        [1, 1, MAX, 0, 900_719_925_474_099]
    );
}

#[test]
fn a_quota_of_2_pow_53_is_refused_naming_the_argument() {
    let (_server, con) = &mut server();
    for (command, rate_or_window, size_error) in [
        ("RL.TOKENBUCKET", "10000", CAPACITY),
        ("RL.LEAKYBUCKET", "10000", CAPACITY),
        ("RL.FIXEDWINDOW", "60", LIMIT),
        ("RL.SLIDINGWINDOW", "60", LIMIT),
        ("RL.SLIDINGLOG", "60", LIMIT),
    ] {
        let algorithm = &command[3..];
        for size in [ABOVE, "18446744073709551616", "99999999999999999999999"] {
            let single = [command, "k", size, rate_or_window, "1700000040", "1"];
            assert_eq!(error(con, &single.map(str::as_bytes)), size_error, "{single:?}");
            let multi_args =
                ["RL.MULTI", "1", "k", "1700000040", algorithm, size, rate_or_window, "1"];
            assert_eq!(error(con, &multi_args.map(str::as_bytes)), size_error);
            let peek_args = ["RL.PEEK", "k", algorithm, size, rate_or_window, "1700000040", "1"];
            assert_eq!(error(con, &peek_args.map(str::as_bytes)), size_error);
            let refund_args =
                ["RL.REFUND", "k", algorithm, size, rate_or_window, "1700000040", "1"];
            assert_eq!(error(con, &refund_args.map(str::as_bytes)), size_error);
        }
        let single = [command, "k", M, rate_or_window, "1700000040", ABOVE];
        assert_eq!(error(con, &single.map(str::as_bytes)), COUNT, "{single:?}");
        let multi_args = ["RL.MULTI", "1", "k", "1700000040", algorithm, M, rate_or_window, ABOVE];
        assert_eq!(error(con, &multi_args.map(str::as_bytes)), COUNT);
        let peek_args = ["RL.PEEK", "k", algorithm, M, rate_or_window, "1700000040", ABOVE];
        assert_eq!(error(con, &peek_args.map(str::as_bytes)), COUNT);
        let refund_args = ["RL.REFUND", "k", algorithm, M, rate_or_window, "1700000040", ABOVE];
        assert_eq!(error(con, &refund_args.map(str::as_bytes)), COUNT);
    }
    assert_eq!(dbsize(con), 0);
}

// ------------------------------------------------------------ CONCURRENCY

/// Two per 10 s AND two at once: RL.MULTI takes a lease only with the
/// request's token, its sub-reply carries the id, and a denied call takes
/// neither; RL.PEEK answers as RL.ACQUIRE would, with no lease id.
#[test]
fn multi_and_peek_with_a_concurrency_limit() {
    let (_server, con) = &mut server();
    let keys = ["{u}:rate", "{u}:slots"];
    let call = |con: &mut redis::Connection, now: &str| {
        multi(
            con,
            &["2", keys[0], keys[1], now, "TOKENBUCKET", "2", "0.1", "1"]
                .into_iter()
                .chain(["CONCURRENCY", "2", "30", "1"])
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        call(con, &at(0)),
        (1, 0, vec![vec![1, 1, 2, 0, 10_000], vec![1, 1, 2, 0, 30_000, 1]])
    );
    assert_eq!(
        call(con, &at(1000)),
        (1, 0, vec![vec![1, 0, 2, 0, 19_000], vec![1, 0, 2, 0, 30_000, 2]])
    );
    // Both full: the bucket has a token in 8 s, a slot comes back in 28 s.
    let before = snapshot(con, &keys);
    assert_eq!(
        call(con, &at(2000)),
        (0, 28_000, vec![vec![0, 0, 2, 8000, 18_000], vec![0, 0, 2, 28_000, 29_000, 0]])
    );
    assert_eq!(snapshot(con, &keys), before);
    assert_eq!(ints(con, &["RL.RELEASE", keys[1], "1", &at(2000)]), [1, 1, 29_000]);
    // A slot is free but no token: no lease is taken, and the slot's
    // fields are those of a look.
    let before = snapshot(con, &keys);
    assert_eq!(
        call(con, &at(3000)),
        (0, 7000, vec![vec![0, 0, 2, 7000, 17_000], vec![1, 1, 2, 0, 28_000, 0]])
    );
    assert_eq!(snapshot(con, &keys), before);
    // Ids go on while a lease is held.
    assert_eq!(
        call(con, &at(10_000)),
        (1, 0, vec![vec![1, 0, 2, 0, 20_000], vec![1, 0, 2, 0, 30_000, 3]])
    );
    let slots = ["CONCURRENCY", "2", "30"];
    let before = snapshot(con, &keys);
    assert_eq!(peek(con, keys[1], slots, &at(10_000), "1"), [0, 0, 2, 21_000, 30_000, 0]);
    assert_eq!(peek(con, keys[1], slots, &at(10_000), "0"), [1, 0, 2, 0, 30_000, 0]);
    assert_eq!(peek(con, keys[1], slots, &at(10_000), "3"), [0, 0, 2, -1, 30_000, 0]);
    assert_eq!(peek(con, "none", slots, &at(10_000), "1"), [1, 1, 2, 0, 30_000, 0]);
    assert_eq!(snapshot(con, &keys), before);
    assert!(!exists(con, "none"));
    // A concurrency limit gives slots back by lease, not by refund.
    assert_eq!(
        error(
            con,
            &["RL.REFUND", keys[1], "CONCURRENCY", "2", "30", &at(10_000), "1"].map(str::as_bytes)
        ),
        "ERR a concurrency limit takes no refund: release its lease with RL.RELEASE"
    );
    assert_eq!(snapshot(con, &keys), before);
}

/// RL.MULTI's lease on the server clock reaches a replica as the same
/// lease: the same id, expiry and key expiry.
#[test]
fn multi_with_a_concurrency_limit_replicates_exactly() {
    let primary = Server::start(&[]);
    let replica = start_replica(&primary);
    let p = &mut primary.connect();
    let keys = ["{t}:rate", "{t}:slots"];
    for _ in 0..5 {
        let (allowed, _, fields) = multi(
            p,
            &[
                "2",
                keys[0],
                keys[1],
                "*",
                "FIXEDWINDOW",
                "10",
                "60",
                "1",
                "CONCURRENCY",
                "3",
                "60",
                "1",
            ],
        );
        assert_eq!(allowed, i64::from(fields[1][5] > 0));
    }
    assert_eq!(ints(p, &["RL.RELEASE", keys[1], "2", "*"])[0], 1);
    assert_eq!(ints(p, &["RL.RENEW", keys[1], "3", "120", "*"])[0], 1);
    wait_for_replica(p);
    let on_primary = snapshot(p, &keys);
    assert!(on_primary.iter().all(|(dump, at)| dump.is_some() && *at > 0));
    assert_eq!(snapshot(&mut replica.connect(), &keys), on_primary);
}
