//! The extremes of every documented range (docs/commands.md, "What every
//! command shares") for the five algorithm commands: 0, 1, the largest and
//! one past it for every number. One past the range is refused with the
//! ERR naming the argument and changes nothing; every accepted extreme
//! gives the reply worked out by hand in the comments, and the states it
//! leaves reach a replica and survive DEBUG RELOAD and both AOF rewrites
//! byte for byte. Then the reproductions of issue 8, items 2 to 6.
//!
//! Units: MAX = 2^53 - 1 units; bucket amounts are kept in pico-units
//! (10^-12), rates in micro-units per second (= pico-units per us), time in
//! microseconds; a reply's milliseconds are rounded up.

mod common;

use common::{
    Server, aof_base, contains, dump, err, ints, is_rdb, snapshot, start_replica,
    wait_for_aof_rewrite,
};

/// 2^53 - 1, the largest capacity, limit and n.
const MAX: &str = "9007199254740991";
const MAX_I: i64 = 9_007_199_254_740_991;
/// 2^53, one past it.
const MAX_PLUS_1: &str = "9007199254740992";
/// The latest `now`: 9999-12-31T23:59:59.999999Z.
const LAST: &str = "253402300799.999999";
/// A time inside the range: 1700000000 s, a multiple of every small window.
const T: &str = "1700000000";
/// The largest window and the longest fill time, 10^12 s; also the largest rate.
const TERA: &str = "1000000000000";
/// The smallest rate.
const MICRO: &str = "0.000001";

const CAPACITY: &str = "ERR capacity must be an integer from 1 to 9007199254740991";
const RATE: &str =
    "ERR rate must be a decimal number of units per second from 0.000001 to 1000000000000";
const FILL_TIME: &str = "ERR capacity / rate must be at most 1000000000000 seconds \
                         (the time to refill or drain the whole bucket)";
const LIMIT: &str = "ERR limit must be an integer from 1 to 9007199254740991";
const WINDOW: &str = "ERR window must be a decimal number of seconds from 0.001 to 1000000000000";
const NOW: &str =
    "ERR now must be * or a decimal Unix time in seconds from 0 to 253402300799.999999";
const COUNT: &str = "ERR n must be an integer from 0 to 9007199254740991";

const BUCKETS: [&str; 2] = ["RL.TOKENBUCKET", "RL.LEAKYBUCKET"];
const WINDOWS: [&str; 3] = ["RL.FIXEDWINDOW", "RL.SLIDINGWINDOW", "RL.SLIDINGLOG"];

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

/// `args` with the argument at `index` (0 = the command) replaced.
fn with(args: &[&'static str], index: usize, value: &'static str) -> Vec<&'static str> {
    let mut args = args.to_vec();
    args[index] = value;
    args
}

/// Each call gets exactly `error`, and neither the existing key `k` nor
/// the missing key `fresh` changes.
fn assert_refused(con: &mut redis::Connection, cases: &[(Vec<&str>, &str)]) {
    for (args, error) in cases {
        let before = snapshot(con, &["k".to_string()]);
        assert_eq!(&err(con, args), error, "{args:?}");
        assert_eq!(snapshot(con, &["k".to_string()]), before, "{args:?} changed k");
        let mut on_fresh = args.clone();
        on_fresh[1] = "fresh";
        assert_eq!(&err(con, &on_fresh), error, "{on_fresh:?}");
        assert!(!exists(con, "fresh"), "{on_fresh:?} created a key");
    }
}

#[test]
fn one_past_each_bucket_range_is_refused_and_changes_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    for command in BUCKETS {
        // k: a bucket with something in it, expiring in 10 s.
        assert_eq!(ints(con, &[command, "k", "10", "1", "*", "5"])[..2], [1, 5]);
        let base = [command, "k", "10", "1", T, "1"];
        let cases = [
            (with(&base, 2, "0"), CAPACITY),
            (with(&base, 2, MAX_PLUS_1), CAPACITY),
            (with(&base, 2, "18446744073709551615"), CAPACITY),
            (with(&base, 3, "0"), RATE),
            // Rounds to 0 at the sixth decimal.
            (with(&base, 3, "0.0000004"), RATE),
            (with(&base, 3, "1000000000000.000001"), RATE),
            // 1000001 units at 10^-6 units/s: 10^12 s + 1 s to fill.
            (vec![command, "k", "1000001", MICRO, T, "1"], FILL_TIME),
            // MAX at 9007.199254 units/s: 1000000000082266527 us > 10^18 us.
            (vec![command, "k", MAX, "9007.199254", T, "1"], FILL_TIME),
            (with(&base, 4, "253402300800"), NOW),
            // Rounds up to 253402300800.000000.
            (with(&base, 4, "253402300799.9999995"), NOW),
            (with(&base, 5, MAX_PLUS_1), COUNT),
            (with(&base, 5, "9223372036854775808"), COUNT),
        ];
        assert_refused(con, &cases);
        let _: () = redis::cmd("DEL").arg("k").query(con).unwrap();
    }
}

#[test]
fn one_past_each_window_range_is_refused_and_changes_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    for command in WINDOWS {
        assert_eq!(ints(con, &[command, "k", "10", "60", "*", "5"])[..2], [1, 5]);
        let base = [command, "k", "10", "60", T, "1"];
        let cases = [
            (with(&base, 2, "0"), LIMIT),
            (with(&base, 2, MAX_PLUS_1), LIMIT),
            (with(&base, 2, "18446744073709551615"), LIMIT),
            (with(&base, 3, "0"), WINDOW),
            (with(&base, 3, "0.000999"), WINDOW),
            (with(&base, 3, "1000000000000.000001"), WINDOW),
            (with(&base, 4, "253402300800"), NOW),
            (with(&base, 4, "253402300799.9999995"), NOW),
            (with(&base, 5, MAX_PLUS_1), COUNT),
            (with(&base, 5, "9223372036854775808"), COUNT),
        ];
        assert_refused(con, &cases);
        let _: () = redis::cmd("DEL").arg("k").query(con).unwrap();
    }
}

const LEASE: &str = "ERR lease must be a decimal number of seconds from 0.001 to 1000000000000";
const LEASE_ID: &str = "ERR lease_id must be an integer from 0 to 9007199254740991";

#[test]
fn one_past_each_concurrency_range_is_refused_and_changes_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    assert_eq!(ints(con, &["RL.ACQUIRE", "k", "10", "60", "*", "5"])[..2], [1, 5]);
    let base = ["RL.ACQUIRE", "k", "10", "60", T, "1"];
    let release = ["RL.RELEASE", "k", "1", T];
    let renew = ["RL.RENEW", "k", "1", "60", T];
    let cases = [
        (with(&base, 2, "0"), LIMIT),
        (with(&base, 2, MAX_PLUS_1), LIMIT),
        (with(&base, 3, "0"), LEASE),
        (with(&base, 3, "0.000999"), LEASE),
        (with(&base, 3, "1000000000000.000001"), LEASE),
        (with(&base, 4, "253402300800"), NOW),
        (with(&base, 4, "253402300799.9999995"), NOW),
        (with(&base, 5, MAX_PLUS_1), COUNT),
        (with(&release, 2, MAX_PLUS_1), LEASE_ID),
        (with(&release, 3, "253402300800"), NOW),
        (with(&renew, 2, MAX_PLUS_1), LEASE_ID),
        (with(&renew, 3, "0.000999"), LEASE),
        (with(&renew, 3, "1000000000000.000001"), LEASE),
        (with(&renew, 4, "253402300800"), NOW),
    ];
    assert_refused(con, &cases);
}

/// The extremes of the concurrency limit: the most slots, the longest
/// lease, the last `now`, the largest id.
fn concurrency_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let key = |name: &str| format!("{prefix}{name}");
    let acquire = |con: &mut redis::Connection, name: &str, args: [&str; 4]| {
        ints(con, &["RL.ACQUIRE", &key(name), args[0], args[1], args[2], args[3]])
    };
    const LEASE_MS: i64 = 1_000_000_000_000_000;
    assert_eq!(acquire(con, "max", [MAX, TERA, T, MAX]), [1, 0, MAX_I, 0, LEASE_MS, 1]);
    assert_eq!(acquire(con, "max", [MAX, TERA, T, "1"]), [0, 0, MAX_I, LEASE_MS, LEASE_MS, 0]);
    assert_eq!(acquire(con, "max", [MAX, TERA, T, MAX]), [0, 0, MAX_I, LEASE_MS, LEASE_MS, 0]);
    // At the last microsecond, a lease of 10^12 s, renewed there.
    assert_eq!(acquire(con, "last", ["1", TERA, LAST, "1"]), [1, 0, 1, 0, LEASE_MS, 1]);
    let last = key("last");
    assert_eq!(ints(con, &["RL.RENEW", &last, "1", TERA, LAST]), [1, 1, LEASE_MS]);
    assert_eq!(ints(con, &["RL.RELEASE", &last, MAX, LAST]), [0, 1, LEASE_MS]);
    // At time 0, and a time before the last update counts as it.
    assert_eq!(acquire(con, "zero", ["2", TERA, "0", "1"]), [1, 1, 2, 0, LEASE_MS, 1]);
    assert_eq!(
        acquire(con, "zero", ["2", "0.001", T, "1"]),
        [1, 0, 2, 0, LEASE_MS - 1_700_000_000_000, 2]
    );
    assert_eq!(acquire(con, "none", [MAX, TERA, LAST, "0"]), [1, MAX_I, MAX_I, 0, 0, 0]);
    assert!(!exists(con, &key("none")));
    ["max", "last", "zero"].iter().map(|k| key(k)).collect()
}

#[test]
fn concurrency_extremes_reply_exactly() {
    concurrency_extremes(&mut Server::start(&[]).connect(), "");
}

/// The extremes of the token bucket. Returns the keys it leaves, all of
/// them living for hours or more.
fn token_bucket_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let tb = |con: &mut redis::Connection, key: &str, args: [&str; 4]| {
        ints(
            con,
            &["RL.TOKENBUCKET", &format!("{prefix}{key}"), args[0], args[1], args[2], args[3]],
        )
    };
    // Capacity MAX at the largest rate, 10^12 tokens/s = 10^18 pico per us:
    // a full bucket gives all MAX; refilling MAX * 10^12 pico takes
    // ceil(9.007199254740991e27 / 10^21) = 9007200 ms.
    assert_eq!(tb(con, "max", [MAX, TERA, T, MAX]), [1, 0, MAX_I, 0, 9_007_200]);
    // One more token: 10^12 pico at 10^21 pico/ms, 1 ms.
    assert_eq!(tb(con, "max", [MAX, TERA, T, "1"]), [0, 0, MAX_I, 1, 9_007_200]);
    assert_eq!(tb(con, "max", [MAX, TERA, T, "0"]), [1, 0, MAX_I, 0, 9_007_200]);
    // 10^6 tokens at the smallest rate, 10^-6 tokens/s = 1 pico per us: a
    // fill time of exactly 10^12 s. One token is 10^12 us = 10^9 ms.
    assert_eq!(
        tb(con, "fill", ["1000000", MICRO, "0", "1"]),
        [1, 999_999, 1_000_000, 0, 1_000_000_000]
    );
    assert_eq!(
        tb(con, "fill", ["1000000", MICRO, "0", "1000000"]),
        [0, 999_999, 1_000_000, 1_000_000_000, 1_000_000_000]
    );
    assert_eq!(
        tb(con, "fill", ["1000000", MICRO, "0", "1000001"]),
        [0, 999_999, 1_000_000, -1, 1_000_000_000]
    );
    // Capacity MAX at 9007.199255 tokens/s, a fill time just under 10^12 s
    // (999999999971244225 us), at the latest time: after taking
    // 4503599627370495, 4503599627370496 tokens are left (a wide, 24-byte
    // bucket: more than 2^64 pico) and refilling the rest takes
    // ceil(4503599627370495 * 10^12 / 9007199255000) = 499999999985623 ms.
    assert_eq!(
        tb(con, "wide", [MAX, "9007.199255", LAST, "4503599627370495"]),
        [1, 4_503_599_627_370_496, MAX_I, 0, 499_999_999_985_623]
    );
    // Capacity 1 at the latest time; then a call at time 0 counts as no
    // time passed, so the bucket is still empty: 10^9 ms to one token.
    assert_eq!(tb(con, "one", ["1", MICRO, LAST, "1"]), [1, 0, 1, 0, 1_000_000_000]);
    assert_eq!(tb(con, "one", ["1", MICRO, "0", "1"]), [0, 0, 1, 1_000_000_000, 1_000_000_000]);
    // n = 0 on a missing key: a full bucket, nothing stored.
    assert_eq!(tb(con, "none", [MAX, TERA, "0", "0"]), [1, MAX_I, MAX_I, 0, 0]);
    assert!(!exists(con, &format!("{prefix}none")));
    ["max", "fill", "wide", "one"].iter().map(|k| format!("{prefix}{k}")).collect()
}

fn leaky_bucket_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let lb = |con: &mut redis::Connection, key: &str, args: [&str; 4]| {
        ints(
            con,
            &["RL.LEAKYBUCKET", &format!("{prefix}{key}"), args[0], args[1], args[2], args[3]],
        )
    };
    // Capacity MAX at 10^12 units/s: MAX units queue on an empty queue
    // (delay 0) and drain in ceil(MAX * 10^12 / 10^21) = 9007200 ms; one
    // more waits for 10^12 pico to drain: 1 ms.
    assert_eq!(lb(con, "max", [MAX, TERA, T, MAX]), [1, 0, MAX_I, 0, 9_007_200, 0]);
    assert_eq!(lb(con, "max", [MAX, TERA, T, "1"]), [0, 0, MAX_I, 1, 9_007_200, 0]);
    // 10^6 units at 10^-6 units/s, a drain time of exactly 10^12 s: one
    // unit drains in 10^9 ms, a full queue in 10^15 ms.
    assert_eq!(
        lb(con, "fill", ["1000000", MICRO, "0", "1"]),
        [1, 999_999, 1_000_000, 0, 1_000_000_000, 0]
    );
    assert_eq!(
        lb(con, "fill", ["1000000", MICRO, "0", "999999"]),
        [1, 0, 1_000_000, 0, 1_000_000_000_000_000, 1_000_000_000]
    );
    assert_eq!(
        lb(con, "fill", ["1000000", MICRO, "0", "1"]),
        [0, 0, 1_000_000, 1_000_000_000, 1_000_000_000_000_000, 0]
    );
    // Capacity MAX at 9007.199255 units/s at the latest time: 4503599627370496
    // queued (a wide level), 4503599627370495 free, draining in
    // ceil(4503599627370496 * 10^12 / 9007199255000) = 499999999985623 ms.
    assert_eq!(
        lb(con, "wide", [MAX, "9007.199255", LAST, "4503599627370496"]),
        [1, 4_503_599_627_370_495, MAX_I, 0, 499_999_999_985_623, 0]
    );
    // Capacity 1 at the latest time, then time 0 (no time passed): full.
    assert_eq!(lb(con, "one", ["1", MICRO, LAST, "1"]), [1, 0, 1, 0, 1_000_000_000, 0]);
    assert_eq!(lb(con, "one", ["1", MICRO, "0", "1"]), [0, 0, 1, 1_000_000_000, 1_000_000_000, 0]);
    assert_eq!(lb(con, "none", [MAX, TERA, "0", "0"]), [1, MAX_I, MAX_I, 0, 0, 0]);
    assert!(!exists(con, &format!("{prefix}none")));
    ["max", "fill", "wide", "one"].iter().map(|k| format!("{prefix}{k}")).collect()
}

fn fixed_window_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let fw = |con: &mut redis::Connection, key: &str, args: [&str; 4]| {
        ints(
            con,
            &["RL.FIXEDWINDOW", &format!("{prefix}{key}"), args[0], args[1], args[2], args[3]],
        )
    };
    // Windows of 10^12 s = 10^18 us: T (1.7 * 10^15 us) and LAST
    // (2.534 * 10^17 us) both lie in the first, [0, 10^18 us).
    // From T its end is (10^18 - 1.7 * 10^15) us = 998300000000000 ms.
    assert_eq!(fw(con, "max", [MAX, TERA, T, MAX]), [1, 0, MAX_I, 0, 998_300_000_000_000]);
    assert_eq!(
        fw(con, "max", [MAX, TERA, T, "1"]),
        [0, 0, MAX_I, 998_300_000_000_000, 998_300_000_000_000]
    );
    assert_eq!(fw(con, "max", [MAX, TERA, T, "0"]), [1, 0, MAX_I, 0, 998_300_000_000_000]);
    // From LAST: ceil((10^18 - 253402300799999999) / 1000) = 746597699200001 ms.
    assert_eq!(fw(con, "last", ["1", TERA, LAST, "1"]), [1, 0, 1, 0, 746_597_699_200_001]);
    assert_eq!(
        fw(con, "last", ["1", TERA, "0", "1"]),
        [0, 0, 1, 746_597_699_200_001, 746_597_699_200_001]
    );
    // From time 0: the whole window, 10^15 ms.
    assert_eq!(fw(con, "zero", ["1", TERA, "0", "1"]), [1, 0, 1, 0, 1_000_000_000_000_000]);
    assert_eq!(fw(con, "none", [MAX, TERA, LAST, "0"]), [1, MAX_I, MAX_I, 0, 0]);
    assert!(!exists(con, &format!("{prefix}none")));
    ["max", "last", "zero"].iter().map(|k| format!("{prefix}{k}")).collect()
}

fn sliding_window_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let sw = |con: &mut redis::Connection, key: &str, args: [&str; 4]| {
        ints(
            con,
            &["RL.SLIDINGWINDOW", &format!("{prefix}{key}"), args[0], args[1], args[2], args[3]],
        )
    };
    // A full current window slides out at the end of the next one:
    // (2 * 10^18 - 1.7 * 10^15) us = 1998300000000000 ms.
    assert_eq!(sw(con, "max", [MAX, TERA, T, MAX]), [1, 0, MAX_I, 0, 1_998_300_000_000_000]);
    // One more fits once MAX * (1 - e / w) <= MAX - 1 in the next window:
    // e = ceil(10^18 / MAX) = 112 us into it, so the wait is
    // 998300000000000000 + 112 us, rounded up to 998300000000001 ms.
    assert_eq!(
        sw(con, "max", [MAX, TERA, T, "1"]),
        [0, 0, MAX_I, 998_300_000_000_001, 1_998_300_000_000_000]
    );
    // From LAST: ceil((2 * 10^18 - 253402300799999999) / 1000).
    assert_eq!(sw(con, "last", ["1", TERA, LAST, "1"]), [1, 0, 1, 0, 1_746_597_699_200_001]);
    // From 0: two whole windows; one more unit fits only when the first
    // window's unit has slid out entirely, at 2 * 10^18 us.
    assert_eq!(sw(con, "zero", ["1", TERA, "0", "1"]), [1, 0, 1, 0, 2_000_000_000_000_000]);
    assert_eq!(
        sw(con, "zero", ["1", TERA, "0", "1"]),
        [0, 0, 1, 2_000_000_000_000_000, 2_000_000_000_000_000]
    );
    assert_eq!(sw(con, "none", [MAX, TERA, LAST, "0"]), [1, MAX_I, MAX_I, 0, 0]);
    assert!(!exists(con, &format!("{prefix}none")));
    ["max", "last", "zero"].iter().map(|k| format!("{prefix}{k}")).collect()
}

fn sliding_log_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let sl = |con: &mut redis::Connection, key: &str, args: [&str; 4]| {
        ints(con, &["RL.SLIDINGLOG", &format!("{prefix}{key}"), args[0], args[1], args[2], args[3]])
    };
    // A unit logged now leaves the window in 10^12 s = 10^15 ms.
    assert_eq!(sl(con, "max", [MAX, TERA, T, MAX]), [1, 0, MAX_I, 0, 1_000_000_000_000_000]);
    assert_eq!(
        sl(con, "max", [MAX, TERA, T, "1"]),
        [0, 0, MAX_I, 1_000_000_000_000_000, 1_000_000_000_000_000]
    );
    // Three runs spanning the whole range of time: 1 unit at 1 us, MAX - 2
    // at T, 1 at LAST; then the log is full until the run at 1 us leaves,
    // 10^18 us later: ceil((10^18 + 1 - 253402300799999999) / 1000) ms
    // after LAST. (A unit at 0 is the subject of its own test below.)
    assert_eq!(
        sl(con, "runs", [MAX, TERA, MICRO, "1"]),
        [1, MAX_I - 1, MAX_I, 0, 1_000_000_000_000_000]
    );
    assert_eq!(
        sl(con, "runs", [MAX, TERA, T, "9007199254740989"]),
        [1, 1, MAX_I, 0, 1_000_000_000_000_000]
    );
    assert_eq!(sl(con, "runs", [MAX, TERA, LAST, "1"]), [1, 0, MAX_I, 0, 1_000_000_000_000_000]);
    assert_eq!(
        sl(con, "runs", [MAX, TERA, LAST, "1"]),
        [0, 0, MAX_I, 746_597_699_200_001, 1_000_000_000_000_000]
    );
    // Limit 1 at time 0.
    assert_eq!(sl(con, "zero", ["1", TERA, "0", "1"]), [1, 0, 1, 0, 1_000_000_000_000_000]);
    assert_eq!(sl(con, "none", [MAX, TERA, LAST, "0"]), [1, MAX_I, MAX_I, 0, 0]);
    assert!(!exists(con, &format!("{prefix}none")));
    // An empty log, as only RL.SETSTATE makes one, expiring in 3000 AD.
    let _: () = redis::cmd("RL.SETSTATE")
        .arg(&[format!("{prefix}empty").as_str(), "SLIDINGLOG", "PXAT", "32503680000000"])
        .query(con)
        .unwrap();
    ["max", "runs", "zero", "empty"].iter().map(|k| format!("{prefix}{k}")).collect()
}

const STATE: &str = "ERR state must be TOKENBUCKET, LEAKYBUCKET, FIXEDWINDOW, SLIDINGWINDOW, \
                     SLIDINGLOG, THROTTLE or CONCURRENCY, fields that a command could have stored, and \
                     optionally PXAT unix_ms";
/// MAX units in pico-units, the fullest bucket.
const MAX_PICO: &str = "9007199254740991000000000000";
const MAX_PICO_PLUS_1: &str = "9007199254740991000000000001";
/// LAST and one past it, in microseconds.
const LAST_US: &str = "253402300799999999";
const LAST_US_PLUS_1: &str = "253402300800000000";
/// The year 3000, in Unix milliseconds.
const Y3000_MS: &str = "32503680000000";

/// The RL.SETSTATE states at the edges of what a command can store, each
/// expiring in the year 3000.
fn setstate_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let states: [(&str, &[&str]); 11] = [
        ("tb0", &["TOKENBUCKET", "0", "0"]),
        ("tbmax", &["TOKENBUCKET", MAX_PICO, LAST_US]),
        ("lb1", &["LEAKYBUCKET", "1", "0"]),
        ("lbmax", &["LEAKYBUCKET", MAX_PICO, LAST_US]),
        ("fw", &["FIXEDWINDOW", LAST_US, MAX]),
        ("sw1", &["SLIDINGWINDOW", "0", "0", "1"]),
        ("swmax", &["SLIDINGWINDOW", LAST_US, MAX, MAX]),
        ("sl", &["SLIDINGLOG", "1", "1", LAST_US, "9007199254740990"]),
        ("slmax", &["SLIDINGLOG", LAST_US, MAX]),
        // The largest id, at LAST, running out 10^12 s later; the most slots.
        ("ccmax", &["CONCURRENCY", LAST_US, MAX_PLUS_1, MAX, "1253402300799999999", "1"]),
        ("ccall", &["CONCURRENCY", "0", "2", "1", "1000000000000000000", MAX]),
    ];
    let mut keys = Vec::new();
    for (key, fields) in states {
        let key = format!("{prefix}{key}");
        let _: () = redis::cmd("RL.SETSTATE")
            .arg(&key)
            .arg(fields)
            .arg(&["PXAT", Y3000_MS])
            .query(con)
            .unwrap_or_else(|e| panic!("{fields:?}: {e}"));
        keys.push(key);
    }
    keys
}

#[test]
fn setstate_takes_the_extremes_of_what_commands_store() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let keys = setstate_extremes(con, "");
    // A full bucket of MAX at LAST: a call at 0 counts as at LAST and takes
    // all of it; refilling at 10^12 units/s takes 9007200 ms.
    assert_eq!(
        ints(con, &["RL.TOKENBUCKET", "tbmax", MAX, TERA, "0", MAX]),
        [1, 0, MAX_I, 0, 9_007_200]
    );
    // A queue of MAX at LAST is full, draining in 9007200 ms.
    assert_eq!(
        ints(con, &["RL.LEAKYBUCKET", "lbmax", MAX, TERA, "0", "0"]),
        [1, 0, MAX_I, 0, 9_007_200, 9_007_200]
    );
    // A log of MAX units: 1 at 1 us, MAX - 1 at LAST; at LAST with a 10^12 s
    // window all count, and a unit fits when the one at 1 us leaves: at
    // 10^18 + 1 us, ceil((10^18 + 1 - 253402300799999999) / 1000) ms after
    // LAST. (A unit at 0: see sliding_log_counts_a_unit_logged_at_time_zero.)
    assert_eq!(
        ints(con, &["RL.SLIDINGLOG", "sl", MAX, TERA, LAST, "1"]),
        [0, 0, MAX_I, 746_597_699_200_001, 1_000_000_000_000_000]
    );
    // Every id given: a slot is free, but no lease until the last one runs
    // out (then ids start again at 1).
    assert_eq!(
        ints(con, &["RL.ACQUIRE", "ccmax", MAX, "1", LAST, "1"]),
        [0, MAX_I - 1, MAX_I, 1_000_000_000_000_000, 1_000_000_000_000_000, 0]
    );
    assert_eq!(
        ints(con, &["RL.ACQUIRE", "ccall", MAX, "1", "0", "1"])[..4],
        [0, 0, MAX_I, 1_000_000_000_000_000]
    );
    assert_eq!(keys.len(), 11);
}

#[test]
fn setstate_refuses_one_past_what_commands_store() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let cases: [&[&str]; 17] = [
        &["TOKENBUCKET", MAX_PICO_PLUS_1, "0"],
        &["TOKENBUCKET", "0", LAST_US_PLUS_1],
        // An empty queue is no key.
        &["LEAKYBUCKET", "0", "0"],
        &["LEAKYBUCKET", MAX_PICO_PLUS_1, "0"],
        &["FIXEDWINDOW", "0", "0"],
        &["FIXEDWINDOW", "0", MAX_PLUS_1],
        &["FIXEDWINDOW", LAST_US_PLUS_1, "1"],
        &["SLIDINGWINDOW", "0", "0", "0"],
        &["SLIDINGWINDOW", "0", MAX_PLUS_1, "0"],
        &["SLIDINGWINDOW", "0", "0", MAX_PLUS_1],
        // Runs adding up past MAX (item 2), a run of 0, time backwards.
        &["SLIDINGLOG", "0", MAX, "1", "1"],
        &["SLIDINGLOG", "0", "0"],
        &["SLIDINGLOG", "2", "1", "1", "1"],
        // An id past MAX, a lease past 10^12 s, slots past MAX, past LAST.
        &["CONCURRENCY", "0", "9007199254740993", MAX_PLUS_1, "1", "1"],
        &["CONCURRENCY", "0", "2", "1", "1000000000000000001", "1"],
        &["CONCURRENCY", "0", "2", "1", "1", MAX_PLUS_1],
        &["CONCURRENCY", LAST_US_PLUS_1, "2", "1", "1253402300800000000", "1"],
    ];
    for fields in cases {
        let mut args = vec!["RL.SETSTATE", "k"];
        args.extend(fields);
        assert_eq!(err(con, &args), STATE, "{args:?}");
        assert!(!exists(con, "k"), "{args:?}");
    }
    let log_past_last = ["RL.SETSTATE", "k", "SLIDINGLOG", LAST_US_PLUS_1, "1"];
    assert_eq!(err(con, &log_past_last), STATE);
    let wide_log = ["RL.SETSTATE", "k", "SLIDINGLOG", "0", "18446744073709551615", "1", "1"];
    assert_eq!(err(con, &wide_log), STATE);
    assert!(!exists(con, "k"));
}

/// RL.LOGAPPLY (a sliding log's change as replicas receive it) takes a
/// change up to what a command could log, 2^53 - 1 units at the last
/// microsecond of 9999, and leaves the log RL.SETSTATE would write.
#[test]
fn logapply_takes_changes_up_to_the_extremes() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let far = "32503680000000";
    let apply = |con: &mut redis::Connection, key: &str, change: &[&str]| -> String {
        redis::cmd("RL.LOGAPPLY").arg(key).arg(change).query(con).unwrap()
    };
    let peek = |con: &mut redis::Connection, limit: &str, now: &str| {
        ints(con, &["RL.PEEK", "l", "SLIDINGLOG", limit, "10", now, "0"])
    };
    // 2 units at 5 s: 3 of 5 left, the newest leaving at 15 s.
    assert_eq!(apply(con, "l", &["APPEND", "0", "5000000", "2", "PXAT", far]), "OK");
    assert_eq!(peek(con, "5", "5.5"), [1, 3, 5, 0, 9500]);
    let expire: i64 = redis::cmd("PEXPIRETIME").arg("l").query(con).unwrap();
    assert_eq!(expire, 32_503_680_000_000);
    // The cutoff drops them first, so MAX more fit; one more would not.
    assert_eq!(apply(con, "l", &["APPEND", "5000001", "6000000", MAX, "PXAT", far]), "OK");
    assert_eq!(peek(con, MAX, "6"), [1, 0, MAX_I, 0, 10_000]);
    let one_more = ["RL.LOGAPPLY", "l", "APPEND", "0", "6000000", "1", "PXAT", far];
    assert_eq!(err(con, &one_more), LOG_CHANGE);
    assert_eq!(peek(con, MAX, "6"), [1, 0, MAX_I, 0, 10_000]);
    // At the last microsecond, once the cutoff has dropped the MAX units.
    let last = ["APPEND", "6000001", "253402300799999999", MAX, "PXAT", far];
    assert_eq!(apply(con, "l", &last), "OK");
    let past = ["RL.LOGAPPLY", "x", "APPEND", "0", LAST_US_PLUS_1, "1", "PXAT", far];
    assert_eq!(err(con, &past), LOG_CHANGE);
    assert!(!exists(con, "x"));
    // A refund's change: the newest unit goes.
    assert_eq!(apply(con, "l", &["REMOVE", "0", "1", "PXAT", far]), "OK");
    let same = ["SLIDINGLOG", "253402300799999999", "9007199254740990", "PXAT", far];
    let _: () = redis::cmd("RL.SETSTATE").arg("m").arg(&same).query(con).unwrap();
    assert_eq!(dump(con, "l"), dump(con, "m"));
    // Nothing to give back on a missing key: no key is made.
    assert_eq!(apply(con, "none", &["REMOVE", "0", "1", "PXAT", far]), "OK");
    assert!(!exists(con, "none"));
}

const LOG_CHANGE: &str = "ERR change must be APPEND cutoff_us at_us n or REMOVE cutoff_us n, \
                          then PXAT unix_ms, leaving a log that a command could have stored";

/// Every extreme state, under keys starting with `prefix`.
fn all_extremes(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let mut keys = token_bucket_extremes(con, &format!("{prefix}tb:"));
    keys.extend(leaky_bucket_extremes(con, &format!("{prefix}lb:")));
    keys.extend(fixed_window_extremes(con, &format!("{prefix}fw:")));
    keys.extend(sliding_window_extremes(con, &format!("{prefix}sw:")));
    keys.extend(sliding_log_extremes(con, &format!("{prefix}sl:")));
    keys.extend(setstate_extremes(con, &format!("{prefix}set:")));
    keys.extend(concurrency_extremes(con, &format!("{prefix}cc:")));
    keys
}

#[test]
fn token_bucket_extremes_reply_exactly() {
    token_bucket_extremes(&mut Server::start(&[]).connect(), "");
}

#[test]
fn leaky_bucket_extremes_reply_exactly() {
    leaky_bucket_extremes(&mut Server::start(&[]).connect(), "");
}

#[test]
fn fixed_window_extremes_reply_exactly() {
    fixed_window_extremes(&mut Server::start(&[]).connect(), "");
}

#[test]
fn sliding_window_extremes_reply_exactly() {
    sliding_window_extremes(&mut Server::start(&[]).connect(), "");
}

#[test]
fn sliding_log_extremes_reply_exactly() {
    sliding_log_extremes(&mut Server::start(&[]).connect(), "");
}

/// The shortest spans: a rate of 10^12 units/s, a window of 1 ms. Their
/// keys live for a millisecond, too short to compare anywhere else.
#[test]
fn shortest_spans_reply_exactly() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // One token at 10^12 tokens/s refills in 10^-12 s: rounded up, 1 ms.
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "tb", "1", TERA, T, "1"]), [1, 0, 1, 0, 1]);
    assert_eq!(ints(con, &["RL.LEAKYBUCKET", "lb", "1", TERA, T, "1"]), [1, 0, 1, 0, 1, 0]);
    // Capacity MAX at 9007.199255 units/s (just under 10^12 s to fill): one
    // token is 10^12 pico at 9007199255 pico/us, 112 us: 1 ms.
    assert_eq!(
        ints(con, &["RL.TOKENBUCKET", "tbw", MAX, "9007.199255", T, "1"]),
        [1, MAX_I - 1, MAX_I, 0, 1]
    );
    // Windows of 1 ms: at LAST, 1 us before the window's end, still 1 ms;
    // at 0, the whole window.
    for command in WINDOWS {
        let reset = if command == "RL.SLIDINGWINDOW" { 2 } else { 1 };
        let key = format!("{command}:0");
        assert_eq!(
            ints(con, &[command, &key, "1", "0.001", "0", "1"]),
            [1, 0, 1, 0, reset],
            "{command}"
        );
    }
    assert_eq!(ints(con, &["RL.FIXEDWINDOW", "fw", "1", "0.001", LAST, "1"]), [1, 0, 1, 0, 1]);
    // The next window starts 1 us later; the unit slides out of it 1 ms after.
    assert_eq!(ints(con, &["RL.SLIDINGWINDOW", "sw", "1", "0.001", LAST, "1"]), [1, 0, 1, 0, 2]);
    // The unit leaves the log 1 ms after LAST.
    assert_eq!(ints(con, &["RL.SLIDINGLOG", "sl", "1", "0.001", LAST, "1"]), [1, 0, 1, 0, 1]);
}

fn assert_same(keys: &[String], a: &mut redis::Connection, b: &mut redis::Connection, what: &str) {
    let (on_a, on_b) = (snapshot(a, keys), snapshot(b, keys));
    for ((key, (dump, at)), other) in keys.iter().zip(&on_a).zip(&on_b) {
        assert!(dump.is_some() && *at > 0, "{what}: {key} is missing or never expires");
        assert_eq!(&(dump.clone(), *at), other, "{what}: {key}");
    }
}

#[test]
fn extreme_states_reach_a_replica_by_full_sync_and_by_propagation() {
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let p = &mut primary.connect();
    // Made before the replica exists: they go in the full sync's RDB.
    let mut keys = all_extremes(p, "before:");
    let replica = start_replica(&primary);
    let r = &mut replica.connect();
    // Made afterwards: they go as propagated commands.
    keys.extend(all_extremes(p, "after:"));
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(p).unwrap();
    assert_eq!(acked, 1);
    assert_same(&keys, p, r, "replica");
}

#[test]
fn extreme_states_survive_debug_reload() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let keys = all_extremes(con, "");
    let before = snapshot(con, &keys);
    let _: String = redis::cmd("DEBUG").arg("RELOAD").query(con).unwrap();
    assert_eq!(snapshot(con, &keys), before);
}

/// Turns the AOF on and waits for its first rewrite.
fn enable_aof(con: &mut redis::Connection, preamble: &str) {
    let _: () =
        redis::cmd("CONFIG").arg(&["SET", "aof-use-rdb-preamble", preamble]).query(con).unwrap();
    let _: () = redis::cmd("CONFIG").arg(&["SET", "appendonly", "yes"]).query(con).unwrap();
    wait_for_aof_rewrite(con);
}

/// BGREWRITEAOF, then DEBUG LOADAOF: the dataset as the rewritten AOF has it.
fn rewrite_and_load_aof(con: &mut redis::Connection) {
    let _: String = redis::cmd("BGREWRITEAOF").query(con).unwrap();
    wait_for_aof_rewrite(con);
    let _: String = redis::cmd("DEBUG").arg("LOADAOF").query(con).unwrap();
}

/// The base file of the AOF (Redis 7's appendonlydir): binary RDB with the
/// preamble, commands without.
#[test]
fn extreme_states_survive_an_aof_rewrite_with_the_rdb_preamble() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    enable_aof(con, "yes");
    let keys = all_extremes(con, "");
    let before = snapshot(con, &keys);
    rewrite_and_load_aof(con);
    assert!(is_rdb(&aof_base(&server)), "an RDB preamble");
    assert_eq!(snapshot(con, &keys), before);
}

#[test]
fn extreme_states_survive_an_aof_rewrite_without_the_rdb_preamble() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    enable_aof(con, "no");
    let keys = all_extremes(con, "");
    let before = snapshot(con, &keys);
    rewrite_and_load_aof(con);
    assert!(contains(&aof_base(&server), b"RL.SETSTATE"), "rewritten as commands");
    assert_eq!(snapshot(con, &keys), before);
}

// Issue 8's reproductions. Before aabe3b3 (at debc773) every number was
// parsed as a u64 or a saturated i64 and nothing capped it at 2^53 - 1.
// Checked by building debc773 and running these tests against it with
// RATELIMIT_MODULE: each of the six below fails there.

/// Item 2: at limit u64::MAX a sliding log's saturating counts disagreed
/// with its runs and made the RDB unloadable. Such a limit is refused now
/// (before: admitted); at the largest limit the log is full, denies one
/// more, and loads back from DEBUG RELOAD and from a restart.
#[test]
fn sliding_log_at_the_largest_limit_is_full_and_loads_back() {
    let mut server = Server::start(&[]);
    let con = &mut server.connect();
    let u64_max = "18446744073709551615";
    assert_eq!(err(con, &["RL.SLIDINGLOG", "k", u64_max, "10", "1000", u64_max]), LIMIT);
    assert!(!exists(con, "k"));
    // MAX units at 1000 s fill the 10 s window; one more must wait for them
    // to leave at 1010 s: 9000 ms after 1001 s.
    assert_eq!(
        ints(con, &["RL.SLIDINGLOG", "k", MAX, "10", "1000", MAX]),
        [1, 0, MAX_I, 0, 10_000]
    );
    assert_eq!(
        ints(con, &["RL.SLIDINGLOG", "k", MAX, "10", "1001", "1"]),
        [0, 0, MAX_I, 9000, 9000]
    );
    // At 1010.5 s they have left: one more unit is a new log of one.
    assert_eq!(
        ints(con, &["RL.SLIDINGLOG", "j", MAX, "10", "1000", MAX]),
        [1, 0, MAX_I, 0, 10_000]
    );
    assert_eq!(
        ints(con, &["RL.SLIDINGLOG", "j", MAX, "10", "1010.5", "1"]),
        [1, MAX_I - 1, MAX_I, 0, 10_000]
    );
    let keys = ["k".to_string(), "j".to_string()];
    let before: Vec<_> = keys.iter().map(|k| dump(con, k).unwrap()).collect();
    let _: String = redis::cmd("DEBUG").arg("RELOAD").query(con).unwrap();
    let reloaded: Vec<_> = keys.iter().map(|k| dump(con, k).unwrap()).collect();
    assert_eq!(reloaded, before);
    let _: String = redis::cmd("SAVE").query(con).unwrap();
    server.restart();
    let con = &mut server.connect();
    let restarted: Vec<_> = keys.iter().map(|k| dump(con, k).unwrap()).collect();
    assert_eq!(restarted, before, "{}", server.log());
}

/// Item 3: at limit u64::MAX a fixed window admitted a unit past its
/// limit. At the largest limit now, a full window denies, and says for how
/// long (never 0); an admitted call's reset is never 0 and its key lives.
#[test]
fn fixed_window_at_the_largest_limit_never_admits_past_it() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let u64_max = "18446744073709551615";
    assert_eq!(err(con, &["RL.FIXEDWINDOW", "f", u64_max, "1", "1000", u64_max]), LIMIT);
    assert_eq!(ints(con, &["RL.FIXEDWINDOW", "f", MAX, "1", "1000", MAX]), [1, 0, MAX_I, 0, 1000]);
    // Half-way through the window: 500 ms to its end, for both.
    assert_eq!(
        ints(con, &["RL.FIXEDWINDOW", "f", MAX, "1", "1000.5", "1"]),
        [0, 0, MAX_I, 500, 500]
    );
    // 1 us before the end: still 1 ms, rounded up, not 0.
    assert_eq!(
        ints(con, &["RL.FIXEDWINDOW", "f", MAX, "1", "1000.999999", "1"]),
        [0, 0, MAX_I, 1, 1]
    );
    // An admitted call half-way through its window: the key lives for the
    // 500 ms the reply says (PTTL 1 to 500 by the time it is read).
    assert_eq!(ints(con, &["RL.FIXEDWINDOW", "h", MAX, "1", "1000.5", MAX]), [1, 0, MAX_I, 0, 500]);
    let pttl: i64 = redis::cmd("PTTL").arg("h").query(con).unwrap();
    assert!((1..=500).contains(&pttl), "{pttl}");
    // An admitted call 1 us before its window ends: reset 1 ms, not 0, and
    // the key (read in the same transaction, on the transaction's clock)
    // exists with an expiry. (Its PTTL, read on the live clock, can be 0
    // there: measured 2 times in 3000.)
    let (reply, expire_at): (Vec<i64>, i64) = redis::pipe()
        .atomic()
        .cmd("RL.FIXEDWINDOW")
        .arg(&["g", MAX, "1", "1000.999999", MAX])
        .cmd("PEXPIRETIME")
        .arg("g")
        .query(con)
        .unwrap();
    assert_eq!(reply, [1, 0, MAX_I, 0, 1]);
    assert!(expire_at > 0, "{expire_at}");
}

/// Item 3 for the sliding window: at limit and window u64::MAX it admitted
/// 2 * MAX + 1 units; both are refused now (before: admitted). At the
/// largest limit a full previous window counts in full at the start of the
/// next; half-way through, half of it still counts.
#[test]
fn sliding_window_at_the_largest_limit_never_admits_past_it() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let u64_max = "18446744073709551615";
    assert_eq!(err(con, &["RL.SLIDINGWINDOW", "s", u64_max, u64_max, "1000", u64_max]), LIMIT);
    assert_eq!(err(con, &["RL.SLIDINGWINDOW", "s", MAX, u64_max, "1000", MAX]), WINDOW);
    assert!(!exists(con, "s"));
    let sw = |con: &mut redis::Connection, now: &str, n: &str| {
        ints(con, &["RL.SLIDINGWINDOW", "s", MAX, "1", now, n])
    };
    assert_eq!(sw(con, "1000", MAX), [1, 0, MAX_I, 0, 2000]);
    // At 1001 s: MAX * (1 - 0) + 1 > MAX. One unit fits once
    // MAX * (1 - e) <= MAX - 1: e = ceil(10^6 / MAX) = 1 us, 1 ms. Only the
    // previous window counts now: it slides out at 1002 s, 1000 ms away.
    assert_eq!(sw(con, "1001", "1"), [0, 0, MAX_I, 1, 1000]);
    // At 1001.5 s: floor(MAX / 2) = 4503599627370495 fit, and then nothing;
    // the current window's units then slide out at 1003 s, 1500 ms away.
    assert_eq!(sw(con, "1001.5", "4503599627370495"), [1, 0, MAX_I, 0, 1500]);
    // One more fits when the previous window's weight drops by 1 / MAX: 1 us.
    assert_eq!(sw(con, "1001.5", "1"), [0, 0, MAX_I, 1, 1500]);
}

/// Item 4: n = 2^63 was propagated as a saturated long long (2^63 - 1)
/// and the replica diverged; it is refused now (before: admitted at limit
/// u64::MAX). The largest n reaches the replica unchanged.
#[test]
fn the_largest_n_reaches_a_replica_unchanged() {
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = start_replica(&primary);
    let (p, r) = (&mut primary.connect(), &mut replica.connect());
    let n = "9223372036854775808";
    assert_eq!(err(p, &["RL.SLIDINGLOG", "h", MAX, "3600", "*", n]), COUNT);
    assert_eq!(err(p, &["RL.SLIDINGLOG", "h", "18446744073709551615", "3600", "*", n]), LIMIT);
    let keys: Vec<String> = ["h", "t", "l", "f", "s"].iter().map(|k| k.to_string()).collect();
    assert_eq!(ints(p, &["RL.SLIDINGLOG", "h", MAX, "3600", "*", MAX])[..4], [1, 0, MAX_I, 0]);
    assert_eq!(ints(p, &["RL.TOKENBUCKET", "t", MAX, TERA, "*", MAX])[..4], [1, 0, MAX_I, 0]);
    assert_eq!(ints(p, &["RL.LEAKYBUCKET", "l", MAX, TERA, "*", MAX])[..4], [1, 0, MAX_I, 0]);
    assert_eq!(ints(p, &["RL.FIXEDWINDOW", "f", MAX, "3600", "*", MAX])[..4], [1, 0, MAX_I, 0]);
    assert_eq!(ints(p, &["RL.SLIDINGWINDOW", "s", MAX, "3600", "*", MAX])[..4], [1, 0, MAX_I, 0]);
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(p).unwrap();
    assert_eq!(acked, 1);
    assert_same(&keys, p, r, "replica");
}

/// Item 5: an empty sliding log was rewritten as `RL.SETSTATE e SLIDINGLOG`
/// with no fields, which the AOF load refused (wrong arity): the key was
/// lost. It comes back now.
#[test]
fn an_empty_sliding_log_survives_an_aof_rewrite_without_the_preamble() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    enable_aof(con, "no");
    let _: () = redis::cmd("RL.SETSTATE")
        .arg(&["e", "SLIDINGLOG", "PXAT", "99999999999999"])
        .query(con)
        .unwrap();
    let keys = ["e".to_string()];
    let before = snapshot(con, &keys);
    assert_eq!(before[0].1, 99_999_999_999_999);
    rewrite_and_load_aof(con);
    assert_eq!(snapshot(con, &keys), before, "{}", server.log());
}

/// Item 6: a trimmed sliding log kept the memory of its longest past. Now
/// after 100,000 calls 5 us apart and one call 5 s later, the key takes
/// exactly what a key of the same name length holding that one call
/// takes. (Before: 241154 bytes, until a DEBUG RELOAD.)
#[test]
fn a_trimmed_sliding_log_gives_its_memory_back() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let mut pipe = redis::pipe();
    for i in 0..100_000 {
        let now = format!("1700000000.{:06}", i * 5);
        pipe.cmd("RL.SLIDINGLOG").arg(&["big", "100000", "1", &now, "1"]).ignore();
    }
    let _: () = pipe.query(con).unwrap();
    let usage = |con: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("MEMORY").arg("USAGE").arg(key).query(con).unwrap()
    };
    // 100,000 runs of 2 bytes (a delta of 5, a count of 1).
    assert!(usage(con, "big") > 200_000, "{}", usage(con, "big"));
    // 5 s after the last call: every earlier unit has left the 1 s window.
    let later = "1700000005.499995";
    assert_eq!(
        ints(con, &["RL.SLIDINGLOG", "big", "100000", "1", later, "1"]),
        [1, 99_999, 100_000, 0, 1000]
    );
    assert_eq!(
        ints(con, &["RL.SLIDINGLOG", "one", "100000", "1", later, "1"]),
        [1, 99_999, 100_000, 0, 1000]
    );
    let (big, one) = (usage(con, "big"), usage(con, "one"));
    assert_eq!(big, one);
    assert!(big < 300, "{big}");
}

/// A unit logged at time 0 counts while 0 > t - window, that is for every
/// t below the window (docs/commands.md, RL.SLIDINGLOG: a unit taken at
/// time s counts while s > t - window). So a limit of 1 at time 0 admits one unit, not two.
#[test]
fn sliding_log_counts_a_unit_logged_at_time_zero() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let sl = |con: &mut redis::Connection, now: &str| {
        ints(con, &["RL.SLIDINGLOG", "z", "1", "10", now, "1"])
    };
    assert_eq!(sl(con, "0"), [1, 0, 1, 0, 10_000]);
    // Full until the unit of 0 leaves at 10 s.
    assert_eq!(sl(con, "0"), [0, 0, 1, 10_000, 10_000]);
    assert_eq!(sl(con, "4"), [0, 0, 1, 6000, 6000]);
    assert_eq!(sl(con, "10"), [1, 0, 1, 0, 10_000]);
    // The same for a log written by RL.SETSTATE: one unit at 0, seen at 5 s.
    let _: () = redis::cmd("RL.SETSTATE").arg(&["y", "SLIDINGLOG", "0", "1"]).query(con).unwrap();
    assert_eq!(ints(con, &["RL.SLIDINGLOG", "y", "1", "10", "5", "1"]), [0, 0, 1, 5000, 5000]);
}
