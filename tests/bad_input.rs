//! Every bad call gets an error reply, changes nothing and leaves the
//! server running.

mod common;

use common::{Server, dump, error, ints};

const CAPACITY: &str = "ERR capacity must be an integer from 1 to 9007199254740991";
const RATE: &str =
    "ERR rate must be a decimal number of units per second from 0.000001 to 1000000000000";
const FILL_TIME: &str = "ERR capacity / rate must be at most 1000000000000 seconds (the time to refill or drain the whole bucket)";
const NOW: &str =
    "ERR now must be * or a decimal Unix time in seconds from 0 to 253402300799.999999";
const COUNT: &str = "ERR n must be an integer from 0 to 9007199254740991";
const STATE: &str = "ERR state must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, SLIDINGLOG, THROTTLE or CONCURRENCY, fields that a command could have stored, and optionally PXAT unix_ms";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn arity(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

fn pexpiretime(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap()
}

#[test]
fn bad_token_bucket_calls_change_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // A slow refill: the key must outlive the test unchanged.
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "0.001", "*", "3"])[0], 1);
    let before = (dump(con, "k"), pexpiretime(con, "k"));

    let tb = |rest: &[&'static [u8]]| -> Vec<&'static [u8]> {
        let mut args: Vec<&[u8]> = vec![b"RL.TOKENBUCKET", b"k"];
        args.extend_from_slice(rest);
        args
    };
    let cases: Vec<(Vec<&[u8]>, String)> = vec![
        (tb(&[b"nan", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"inf", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"1e400", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"-1", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"0", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"1.5", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"\xff", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"9007199254740992", b"10000", b"*"]), CAPACITY.into()),
        (tb(&[b"18446744073709551616", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"1000001", b"0.000001", b"*"]), FILL_TIME.into()),
        (tb(&[b"9007199254740991", b"9007.199254", b"*"]), FILL_TIME.into()),
        (tb(&[b"10", b"1000000000000.000001", b"*"]), RATE.into()),
        (tb(&[b"99999999999999999999999", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b" 10", b"1", b"*"]), CAPACITY.into()),
        (tb(&[b"10", b"nan", b"*"]), RATE.into()),
        (tb(&[b"10", b"inf", b"*"]), RATE.into()),
        (tb(&[b"10", b"-inf", b"*"]), RATE.into()),
        (tb(&[b"10", b"1e400", b"*"]), RATE.into()),
        (tb(&[b"10", b"-1", b"*"]), RATE.into()),
        (tb(&[b"10", b"0", b"*"]), RATE.into()),
        (tb(&[b"10", b"", b"*"]), RATE.into()),
        (tb(&[b"10", b"\xc3\x28", b"*"]), RATE.into()),
        (tb(&[b"10", b"0.0000001", b"*"]), RATE.into()),
        (tb(&[b"10", b"99999999999999999999", b"*"]), RATE.into()),
        (tb(&[b"10", b"1", b"nan"]), NOW.into()),
        (tb(&[b"10", b"1", b"inf"]), NOW.into()),
        (tb(&[b"10", b"1", b"-1"]), NOW.into()),
        (tb(&[b"10", b"1", b"1e400"]), NOW.into()),
        (tb(&[b"10", b"1", b""]), NOW.into()),
        (tb(&[b"10", b"1", b"**"]), NOW.into()),
        (tb(&[b"10", b"1", b"\xff\xfe"]), NOW.into()),
        (tb(&[b"10", b"1", b"1700000000,5"]), NOW.into()),
        (tb(&[b"10", b"1", b"253402300800"]), NOW.into()),
        (tb(&[b"10", b"1", b"253402300799.9999995"]), NOW.into()),
        (tb(&[b"10", b"1", b"*", b"1.5"]), COUNT.into()),
        (tb(&[b"10", b"1", b"*", b"-1"]), COUNT.into()),
        (tb(&[b"10", b"1", b"*", b"nan"]), COUNT.into()),
        (tb(&[b"10", b"1", b"*", b""]), COUNT.into()),
        (tb(&[b"10", b"1", b"*", b"18446744073709551616"]), COUNT.into()),
        (tb(&[b"10", b"1", b"*", b"9007199254740992"]), COUNT.into()),
        (tb(&[b"10", b"1", b"*", b"\x80"]), COUNT.into()),
        (tb(&[b"10", b"1"]), arity("RL.TOKENBUCKET")),
        (tb(&[]), arity("RL.TOKENBUCKET")),
        (vec![b"RL.TOKENBUCKET"], arity("RL.TOKENBUCKET")),
        (tb(&[b"10", b"1", b"*", b"1", b"extra"]), arity("RL.TOKENBUCKET")),
    ];
    assert!(cases.len() >= 25);
    for (args, expected) in &cases {
        assert_eq!(&error(con, args), expected, "{args:?}");
        assert_eq!((dump(con, "k"), pexpiretime(con, "k")), before, "{args:?} changed the key");
    }
    // Errors create no key either.
    assert_eq!(error(con, &[b"RL.TOKENBUCKET", b"fresh", b"0", b"1", b"*"]), CAPACITY);
    let exists: i64 = redis::cmd("EXISTS").arg("fresh").query(con).unwrap();
    assert_eq!(exists, 0);
    let pong: String = redis::cmd("PING").query(con).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn keys_of_other_types_are_wrongtype_and_untouched() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let _: () = redis::cmd("SET").arg("string").arg("v").query(con).unwrap();
    let _: () = redis::cmd("RPUSH").arg("list").arg("v").query(con).unwrap();
    let _: () = redis::cmd("HSET").arg("hash").arg("f").arg("v").query(con).unwrap();
    let _: () = redis::cmd("SADD").arg("set").arg("v").query(con).unwrap();
    for key in ["string", "list", "hash", "set"] {
        let before = dump(con, key);
        for n in [&b"1"[..], b"0"] {
            let args: [&[u8]; 6] = [b"RL.TOKENBUCKET", key.as_bytes(), b"10", b"1", b"*", n];
            assert_eq!(error(con, &args), WRONGTYPE, "{key}");
            let args: [&[u8]; 6] = [b"RL.ACQUIRE", key.as_bytes(), b"10", b"1", b"*", n];
            assert_eq!(error(con, &args), WRONGTYPE, "{key}");
        }
        for args in [
            &[&b"RL.RELEASE"[..], key.as_bytes(), b"1", b"*"][..],
            &[b"RL.RENEW", key.as_bytes(), b"1", b"1", b"*"],
        ] {
            assert_eq!(error(con, args), WRONGTYPE, "{key}");
        }
        let args: [&[u8]; 5] = [b"RL.SETSTATE", key.as_bytes(), b"TOKENBUCKET", b"1", b"1"];
        assert_eq!(error(con, &args), WRONGTYPE, "{key}");
        assert_eq!(dump(con, key), before);
    }
}

#[test]
fn bad_setstate_calls_change_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // A slow refill: the key must outlive the test unchanged.
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "k", "10", "0.001", "*", "3"])[0], 1);
    let before = (dump(con, "k"), pexpiretime(con, "k"));
    let cases: Vec<(Vec<&[u8]>, String)> = vec![
        (vec![b"RL.SETSTATE", b"k", b"LEAKY", b"1", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"-1", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"1", b"x"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"1", b"1", b"EX", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"1", b"1", b"PXAT", b"-5"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"1", b"1", b"PXAT"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"SLIDINGLOG", b"5", b"1", b"4", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"SLIDINGLOG", b"5", b"0"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"SLIDINGLOG", b"5"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET"], STATE.into()),
        // Beyond what a command could store: more than 2^53 - 1 tokens,
        // a time after 9999, an empty queue or window, a log summing past
        // 2^53 - 1, an expiry past i64.
        (
            vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"9007199254740991000000000001", b"1"],
            STATE.into(),
        ),
        (vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"1", b"253402300800000000"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"LEAKYBUCKET", b"0", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"FIXEDWINDOW", b"1", b"0"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"FIXEDWINDOW", b"1", b"9007199254740992"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"SLIDINGWINDOW", b"1", b"0", b"0"], STATE.into()),
        (
            vec![b"RL.SETSTATE", b"k", b"SLIDINGLOG", b"5", b"9007199254740991", b"6", b"1"],
            STATE.into(),
        ),
        (
            vec![b"RL.SETSTATE", b"k", b"SLIDINGLOG", b"5", b"18446744073709551615", b"6", b"1"],
            STATE.into(),
        ),
        (
            vec![b"RL.SETSTATE", b"k", b"TOKENBUCKET", b"1", b"1", b"PXAT", b"9223372036854775808"],
            STATE.into(),
        ),
        // Leases: none, one that ran out by last_us, ids not ascending or
        // not below next_id, no slot, an id past 2^53 - 1.
        (vec![b"RL.SETSTATE", b"k", b"CONCURRENCY", b"5", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"CONCURRENCY", b"5", b"2", b"1", b"5", b"1"], STATE.into()),
        (
            vec![
                b"RL.SETSTATE",
                b"k",
                b"CONCURRENCY",
                b"5",
                b"3",
                b"2",
                b"9",
                b"1",
                b"1",
                b"9",
                b"1",
            ],
            STATE.into(),
        ),
        (vec![b"RL.SETSTATE", b"k", b"CONCURRENCY", b"5", b"1", b"1", b"9", b"1"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"CONCURRENCY", b"5", b"2", b"1", b"9", b"0"], STATE.into()),
        (vec![b"RL.SETSTATE", b"k", b"CONCURRENCY", b"5", b"2", b"1", b"9"], STATE.into()),
        (
            vec![
                b"RL.SETSTATE",
                b"k",
                b"CONCURRENCY",
                b"5",
                b"9007199254740993",
                b"9007199254740992",
                b"9",
                b"1",
            ],
            STATE.into(),
        ),
        (vec![b"RL.SETSTATE", b"k"], arity("RL.SETSTATE")),
    ];
    for (args, expected) in &cases {
        assert_eq!(&error(con, args), expected, "{args:?}");
        assert_eq!((dump(con, "k"), pexpiretime(con, "k")), before, "{args:?} changed the key");
    }
}

/// An expiry in the year 3000.
const FAR: &str = "32503680000000";
const LOG_CHANGE: &str = "ERR change must be APPEND cutoff_us at_us n or REMOVE cutoff_us n, then PXAT unix_ms, leaving a log that a command could have stored";

#[test]
fn bad_logapply_calls_change_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // A log of 2 units at 5 s and 1 at 6 s (Unix microseconds), 3 in all.
    let log = ["RL.SETSTATE", "k", "SLIDINGLOG", "5000000", "2", "6000000", "1", "PXAT", FAR];
    let _: () = redis::cmd(log[0]).arg(&log[1..]).query(con).unwrap();
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "tb", "10", "0.001", "*", "3"])[0], 1);
    let _: () = redis::cmd("SET").arg("string").arg("v").query(con).unwrap();
    let cases: Vec<(&[&str], String)> = vec![
        (&["ADD", "0", "6000000", "1", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "x", "6000000", "1", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "-1", "6000000", "1", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "0", "6000000.5", "1", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "0", "6000000", "1", "EX", "100"], LOG_CHANGE.into()),
        (&["APPEND", "0", "6000000", "1", "PXAT", "-5"], LOG_CHANGE.into()),
        (&["APPEND", "0", "6000000", "1", "PXAT", "9223372036854775808"], LOG_CHANGE.into()),
        (&["APPEND", "0", "6000000", "1", "PXAT", FAR, "1"], LOG_CHANGE.into()),
        (&["APPEND", "0", "1", "PXAT", FAR], LOG_CHANGE.into()),
        (&["REMOVE", "0", "6000000", "1", "PXAT", FAR], LOG_CHANGE.into()),
        // What no command could have logged: before the newest run that
        // stays, no unit, past 2^53 - 1 units in all, after 9999.
        (&["APPEND", "0", "5999999", "1", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "0", "6000000", "0", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "0", "6000000", "9007199254740989", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "0", "253402300800000000", "1", "PXAT", FAR], LOG_CHANGE.into()),
        (&["APPEND", "0"], arity("RL.LOGAPPLY")),
    ];
    let state = |con: &mut redis::Connection| {
        ["k", "tb", "string"].map(|key| (dump(con, key), pexpiretime(con, key)))
    };
    let before = state(con);
    for (change, expected) in &cases {
        let args: Vec<&[u8]> =
            ["RL.LOGAPPLY", "k"].iter().chain(*change).map(|a| a.as_bytes()).collect();
        assert_eq!(&error(con, &args), expected, "{args:?}");
        assert_eq!(state(con), before, "{args:?} changed a key");
    }
    // Keys of another kind, or of another type, are left alone.
    for key in ["tb", "string"] {
        for change in
            [&["APPEND", "0", "6000000", "1", "PXAT", FAR][..], &["REMOVE", "0", "1", "PXAT", FAR]]
        {
            let args: Vec<&[u8]> =
                ["RL.LOGAPPLY", key].iter().chain(change).map(|a| a.as_bytes()).collect();
            assert_eq!(error(con, &args), WRONGTYPE, "{args:?}");
        }
    }
    assert_eq!(state(con), before);
}

const LIMIT: &str = "ERR limit must be an integer from 1 to 9007199254740991";
const WINDOW: &str = "ERR window must be a decimal number of seconds from 0.001 to 1000000000000";
const LEASE: &str = "ERR lease must be a decimal number of seconds from 0.001 to 1000000000000";
const LEASE_ID: &str = "ERR lease_id must be an integer from 0 to 9007199254740991";
const LEASE_CHANGE: &str = "ERR change must be ACQUIRE at_us id expires_us n, RELEASE at_us id or RENEW at_us id expires_us, then optionally PXAT unix_ms, one that a command could have made";

/// RL.RELEASE, RL.RENEW and RL.LEASEAPPLY: bad arguments, leases that are
/// not held, changes no command could make, keys of another kind.
#[test]
fn bad_lease_calls_change_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // Lease 1 (2 slots) until 1100 s, lease 2 (1 slot) until 1050 s.
    assert_eq!(ints(con, &["RL.ACQUIRE", "c", "5", "100", "1000", "2"]), [1, 3, 5, 0, 100_000, 1]);
    assert_eq!(ints(con, &["RL.ACQUIRE", "c", "5", "50", "1000", "1"]), [1, 2, 5, 0, 100_000, 2]);
    let _: () = redis::cmd("PEXPIREAT").arg("c").arg(FAR).query(con).unwrap();
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "tb", "10", "0.001", "*", "3"])[0], 1);
    let _: () = redis::cmd("SET").arg("string").arg("v").query(con).unwrap();
    let state = |con: &mut redis::Connection| {
        ["c", "tb", "string"].map(|key| (dump(con, key), pexpiretime(con, key)))
    };
    let before = state(con);
    let mut cases: Vec<(Vec<&str>, String)> = vec![];
    for id in ["-1", "x", "", "1.5", "9007199254740992"] {
        cases.push((vec!["RL.RELEASE", "c", id, "1000"], LEASE_ID.into()));
        cases.push((vec!["RL.RENEW", "c", id, "10", "1000"], LEASE_ID.into()));
    }
    for lease in ["0", "0.0009", "-1", "nan", "1000000000000.000001", ""] {
        cases.push((vec!["RL.RENEW", "c", "1", lease, "1000"], LEASE.into()));
        cases.push((vec!["RL.ACQUIRE", "c", "5", lease, "1000"], LEASE.into()));
    }
    for now in ["-1", "nan", "253402300800", "**"] {
        cases.push((vec!["RL.RELEASE", "c", "1", now], NOW.into()));
        cases.push((vec!["RL.RENEW", "c", "1", "10", now], NOW.into()));
    }
    cases.push((vec!["RL.RELEASE", "c", "1"], arity("RL.RELEASE")));
    cases.push((vec!["RL.RELEASE", "c", "1", "1000", "1"], arity("RL.RELEASE")));
    cases.push((vec!["RL.RENEW", "c", "1", "1000"], arity("RL.RENEW")));
    cases.push((vec!["RL.RENEW", "c", "1", "10", "1000", "1"], arity("RL.RENEW")));
    cases.push((
        vec!["RL.REFUND", "c", "CONCURRENCY", "5", "100", "1000", "1"],
        "ERR a concurrency limit takes no refund: release its lease with RL.RELEASE".into(),
    ));
    let far = FAR;
    for change in [
        // Malformed.
        &["FREE", "1000000000", "1"][..],
        &["RELEASE", "1000000000", "1", "2"],
        &["RELEASE", "1000000000", "1", "PXAT"],
        &["RELEASE", "1000000000", "1", "PXAT", "-5"],
        &["RENEW", "1000000000", "1"],
        &["ACQUIRE", "1000000000", "3", "1200000000"],
        &["ACQUIRE", "x", "3", "1200000000", "1"],
        // No command could make them: an id not held, or not above the
        // held ones; no slot; an end not after the change's time, or past
        // the longest lease; more than 2^53 - 1 slots; a time after 9999.
        &["RELEASE", "1000000000", "3"],
        &["RELEASE", "1060000000", "2"],
        &["RENEW", "1000000000", "3", "1200000000"],
        &["RENEW", "1000000000", "1", "1000000000"],
        &["ACQUIRE", "1000000000", "2", "1200000000", "1"],
        &["ACQUIRE", "1000000000", "3", "1200000000", "0"],
        &["ACQUIRE", "1000000000", "3", "999999999", "1"],
        &["ACQUIRE", "1000000000", "3", "1000000001000000001", "1"],
        &["ACQUIRE", "1000000000", "3", "1200000000", "9007199254740989"],
        &["ACQUIRE", "253402300800000000", "3", "253402300900000000", "1", "PXAT", far],
    ] {
        cases.push(([&["RL.LEASEAPPLY", "c"][..], change].concat(), LEASE_CHANGE.into()));
    }
    cases.push((vec!["RL.LEASEAPPLY", "c", "RELEASE"], arity("RL.LEASEAPPLY")));
    for key in ["tb", "string"] {
        cases.push((vec!["RL.RELEASE", key, "1", "1000"], WRONGTYPE.into()));
        cases.push((vec!["RL.RENEW", key, "1", "10", "1000"], WRONGTYPE.into()));
        cases.push((vec!["RL.ACQUIRE", key, "5", "10", "1000"], WRONGTYPE.into()));
        cases.push((vec!["RL.PEEK", key, "CONCURRENCY", "5", "10", "1000"], WRONGTYPE.into()));
        cases.push((vec!["RL.LEASEAPPLY", key, "ACQUIRE", "1", "1", "9", "1"], WRONGTYPE.into()));
    }
    // A concurrency key is no other algorithm's.
    cases.push((vec!["RL.TOKENBUCKET", "c", "10", "1", "1000"], WRONGTYPE.into()));
    cases.push((vec!["RL.LOGAPPLY", "c", "REMOVE", "0", "1", "PXAT", FAR], WRONGTYPE.into()));
    for (args, expected) in &cases {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(&error(con, &bytes), expected, "{args:?}");
        assert_eq!(state(con), before, "{args:?} changed a key");
    }
    // Releasing or renewing what is not held answers, and changes nothing.
    assert_eq!(ints(con, &["RL.RELEASE", "c", "0", "1000"]), [0, 3, 100_000]);
    assert_eq!(ints(con, &["RL.RENEW", "c", "9", "10", "1000"]), [0, 3, 100_000]);
    assert_eq!(ints(con, &["RL.RELEASE", "missing", "1", "1000"]), [0, 0, 0]);
    assert_eq!(state(con), before);
    let exists: i64 = redis::cmd("EXISTS").arg("missing").query(con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn bad_calls_of_the_other_commands_change_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let bucket: [(&[u8], &[u8]); 6] = [
        (b"0", CAPACITY.as_bytes()),
        (b"nan", CAPACITY.as_bytes()),
        (b"9007199254740992", CAPACITY.as_bytes()),
        (b"-1", CAPACITY.as_bytes()),
        (b"", CAPACITY.as_bytes()),
        (b"\xff", CAPACITY.as_bytes()),
    ];
    let window_limits: [(&[u8], &[u8]); 6] = [
        (b"0", LIMIT.as_bytes()),
        (b"nan", LIMIT.as_bytes()),
        (b"9007199254740992", LIMIT.as_bytes()),
        (b"-1", LIMIT.as_bytes()),
        (b"1.5", LIMIT.as_bytes()),
        (b"\xff", LIMIT.as_bytes()),
    ];
    for command in
        ["RL.LEAKYBUCKET", "RL.FIXEDWINDOW", "RL.SLIDINGWINDOW", "RL.SLIDINGLOG", "RL.ACQUIRE"]
    {
        let key = command.as_bytes();
        let is_bucket = command == "RL.LEAKYBUCKET";
        let good_second: &[u8] = if is_bucket { b"1" } else { b"10" };
        // Slow enough that the key outlives the test unchanged.
        let slow = if is_bucket { "0.001" } else { "100000" };
        assert_eq!(ints(con, &[command, command, "10", slow, "*", "3"])[0], 1);
        let before = (dump(con, command), pexpiretime(con, command));
        let mut cases: Vec<(Vec<&[u8]>, String)> = Vec::new();
        let firsts = if is_bucket { &bucket } else { &window_limits };
        for (first, message) in firsts {
            let message = String::from_utf8(message.to_vec()).unwrap();
            cases.push((vec![key, key, first, good_second, b"*"], message));
        }
        let seconds: [&[u8]; 8] = [b"nan", b"inf", b"0", b"-1", b"", b"1e3", b"\xff", b"1e400"];
        for second in seconds {
            let message = match command {
                "RL.LEAKYBUCKET" => RATE,
                "RL.ACQUIRE" => LEASE,
                _ => WINDOW,
            };
            cases.push((vec![key, key, b"10", second, b"*"], message.into()));
        }
        if !is_bucket {
            let message = if command == "RL.ACQUIRE" { LEASE } else { WINDOW };
            cases.push((vec![key, key, b"10", b"0.0009", b"*"], message.into()));
            cases.push((vec![key, key, b"10", b"1000000000000.000001", b"*"], message.into()));
        } else {
            cases.push((vec![key, key, b"10", b"1000000000000.000001", b"*"], RATE.into()));
            cases.push((vec![key, key, b"1000001", b"0.000001", b"*"], FILL_TIME.into()));
        }
        for now in [&b"nan"[..], b"-1", b"inf", b"", b"**", b"\xfe", b"253402300800"] {
            cases.push((vec![key, key, b"10", good_second, now], NOW.into()));
        }
        for n in [&b"-1"[..], b"1.5", b"", b"nan", b"9007199254740992", b"18446744073709551616"] {
            cases.push((vec![key, key, b"10", good_second, b"*", n], COUNT.into()));
        }
        cases.push((vec![key, key, b"10", good_second], arity(command)));
        cases.push((vec![key, key], arity(command)));
        cases.push((vec![key], arity(command)));
        cases.push((vec![key, key, b"10", good_second, b"*", b"1", b"x"], arity(command)));
        for (args, expected) in &cases {
            assert_eq!(&error(con, args), expected, "{args:?}");
            let now = (dump(con, command), pexpiretime(con, command));
            assert_eq!(now, before, "{args:?} changed the key");
        }
    }
    let pong: String = redis::cmd("PING").query(con).unwrap();
    assert_eq!(pong, "PONG");
}
