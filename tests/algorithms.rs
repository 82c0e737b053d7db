//! RL.LEAKYBUCKET, RL.FIXEDWINDOW, RL.SLIDINGWINDOW and RL.SLIDINGLOG
//! against a real server: worked examples, the fixed window's edge burst,
//! expiry, peeks, types, and the sliding log's size.

mod common;

use common::{Server, dump, error, ints};

fn call(con: &mut redis::Connection, command: &str, key: &str, rest: &[&str]) -> Vec<i64> {
    let mut args = vec![command, key];
    args.extend_from_slice(rest);
    ints(con, &args)
}

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

#[test]
fn leaky_bucket_paces_requests() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let lb = |con: &mut redis::Connection, now: &str| {
        call(con, "RL.LEAKYBUCKET", "q", &["3", "2", now, "1"])
    };
    // 2 per second: each request waits 500 ms more than the one before.
    assert_eq!(lb(con, "1000"), [1, 2, 3, 0, 500, 0]);
    assert_eq!(lb(con, "1000"), [1, 1, 3, 0, 1000, 500]);
    assert_eq!(lb(con, "1000"), [1, 0, 3, 0, 1500, 1000]);
    // The queue is full: one unit must drain first.
    assert_eq!(lb(con, "1000"), [0, 0, 3, 500, 1500, 0]);
    assert_eq!(lb(con, "1000.2"), [0, 0, 3, 300, 1300, 0]);
    assert_eq!(lb(con, "1000.5"), [1, 0, 3, 0, 1500, 1000]);
    // More than the queue holds never fits; a peek reports the wait.
    assert_eq!(
        call(con, "RL.LEAKYBUCKET", "q", &["3", "2", "1000.5", "4"]),
        [0, 0, 3, -1, 1500, 0]
    );
    assert_eq!(
        call(con, "RL.LEAKYBUCKET", "q", &["3", "2", "1001", "0"]),
        [1, 1, 3, 0, 1000, 1000]
    );
    assert_eq!(call(con, "RL.LEAKYBUCKET", "new", &["3", "2", "1000", "0"]), [1, 3, 3, 0, 0, 0]);
    assert!(!exists(con, "new"));
}

#[test]
fn fixed_window_is_epoch_aligned() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let fw = |con: &mut redis::Connection, now: &str, n: &str| {
        call(con, "RL.FIXEDWINDOW", "w", &["3", "60", now, n])
    };
    // 1700000040 is the start of a minute-long window: [..040, ..100).
    assert_eq!(fw(con, "1700000050", "2"), [1, 1, 3, 0, 50_000]);
    assert_eq!(fw(con, "1700000099.5", "1"), [1, 0, 3, 0, 500]);
    assert_eq!(fw(con, "1700000099.75", "1"), [0, 0, 3, 250, 250]);
    assert_eq!(fw(con, "1700000100", "3"), [1, 0, 3, 0, 60_000]);
    assert_eq!(fw(con, "1700000100", "4"), [0, 0, 3, -1, 60_000]);
}

#[test]
fn sliding_window_weighs_the_previous_window() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let sw = |con: &mut redis::Connection, now: &str, n: &str| {
        call(con, "RL.SLIDINGWINDOW", "s", &["10", "10", now, n])
    };
    assert_eq!(sw(con, "1700000005", "8"), [1, 2, 10, 0, 15_000]);
    // 2.5 s into the next window 8 * 0.75 = 6 still count.
    assert_eq!(sw(con, "1700000012.5", "3"), [1, 1, 10, 0, 17_500]);
    assert_eq!(sw(con, "1700000012.5", "2"), [0, 1, 10, 1250, 17_500]);
    assert_eq!(sw(con, "1700000013.75", "2"), [1, 0, 10, 0, 16_250]);
}

#[test]
fn sliding_log_is_exact() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let sl = |con: &mut redis::Connection, now: &str, n: &str| {
        call(con, "RL.SLIDINGLOG", "l", &["3", "10", now, n])
    };
    assert_eq!(sl(con, "1000", "1"), [1, 2, 3, 0, 10_000]);
    assert_eq!(sl(con, "1004", "2"), [1, 0, 3, 0, 10_000]);
    assert_eq!(sl(con, "1009", "1"), [0, 0, 3, 1000, 5000]);
    assert_eq!(sl(con, "1010", "1"), [1, 0, 3, 0, 10_000]);
    // Two more wait for the two units of 1004; three for the one of 1010 too.
    assert_eq!(sl(con, "1010", "2"), [0, 0, 3, 4000, 10_000]);
    assert_eq!(sl(con, "1010", "3"), [0, 0, 3, 10_000, 10_000]);
    assert_eq!(sl(con, "1020", "0"), [1, 3, 3, 0, 0]);
}

/// The seed's weakness of fixed windows: limit units at the end of one
/// window and limit more at the start of the next, 2 ms apart. The sliding
/// window counter and the sliding log admit none of the second burst.
#[test]
fn only_the_fixed_window_lets_a_double_burst_through_an_edge() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    for (command, second_burst) in
        [("RL.FIXEDWINDOW", 10), ("RL.SLIDINGWINDOW", 0), ("RL.SLIDINGLOG", 0)]
    {
        let burst = |con: &mut redis::Connection, now: &str| -> i64 {
            (0..10).map(|_| call(con, command, command, &["10", "1", now, "1"])[0]).sum()
        };
        assert_eq!(burst(con, "1700000000.999"), 10, "{command}");
        assert_eq!(burst(con, "1700000001.001"), second_burst, "{command}");
    }
}

#[test]
fn expiry_is_reset_after_ms_for_every_command() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    for (command, args) in [
        ("RL.LEAKYBUCKET", ["10", "0.5", "*", "3"]),
        ("RL.FIXEDWINDOW", ["10", "30", "*", "3"]),
        ("RL.SLIDINGWINDOW", ["10", "30", "*", "3"]),
        ("RL.SLIDINGLOG", ["10", "30", "*", "3"]),
    ] {
        let mut full = vec![command, command];
        full.extend_from_slice(&args);
        assert_eq!(common::assert_expires_at_reset(con, &full)[0], 1);
    }
}

#[test]
fn peeks_create_nothing_and_change_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    for command in ["RL.LEAKYBUCKET", "RL.FIXEDWINDOW", "RL.SLIDINGWINDOW", "RL.SLIDINGLOG"] {
        // Slow enough that no key expires while the test looks at it.
        let slow = if command == "RL.LEAKYBUCKET" { "0.001" } else { "100000" };
        let fresh = call(con, command, "fresh", &["5", slow, "1000", "0"]);
        assert_eq!(fresh[..5], [1, 5, 5, 0, 0], "{command}");
        assert!(!exists(con, "fresh"), "{command}");
        call(con, command, command, &["5", slow, "1000", "2"]);
        let before = dump(con, command);
        assert_eq!(call(con, command, command, &["5", slow, "1000.5", "0"])[0], 1);
        assert_eq!(dump(con, command), before, "{command}");
    }
}

#[test]
fn each_kind_is_its_own_type() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let commands =
        ["RL.TOKENBUCKET", "RL.LEAKYBUCKET", "RL.FIXEDWINDOW", "RL.SLIDINGWINDOW", "RL.SLIDINGLOG"];
    for command in commands {
        let slow = if command.ends_with("BUCKET") { "0.001" } else { "100000" };
        call(con, command, command, &["5", slow, "*", "1"]);
        let kind: String = redis::cmd("TYPE").arg(command).query(con).unwrap();
        assert_eq!(kind, "ratelimit");
        let payload = dump(con, command).unwrap();
        let copy = format!("{command}:copy");
        let _: () = redis::cmd("RESTORE").arg(&copy).arg(0).arg(&payload).query(con).unwrap();
        assert_eq!(dump(con, &copy), Some(payload));
    }
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    let _: () = redis::cmd("SET").arg("string").arg("1").query(con).unwrap();
    for command in commands {
        for key in commands.iter().filter(|&&k| k != command).chain(&["string"]) {
            let before = dump(con, key);
            let args: [&[u8]; 6] = [command.as_bytes(), key.as_bytes(), b"5", b"10", b"*", b"1"];
            assert_eq!(error(con, &args), wrongtype, "{command} on {key}");
            assert_eq!(dump(con, key), before);
        }
    }
}

#[test]
fn sliding_log_stores_under_eight_bytes_per_unit() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // 1000 units over 59 s of a 60 s window, one call each.
    let mut pipe = redis::pipe();
    for i in 0..1000u64 {
        let now = format!("{}.{:03}", 1_700_000_000 + i * 59 / 1000, i * 59 % 1000);
        pipe.cmd("RL.SLIDINGLOG").arg(&["log", "1000", "60", &now, "1"]).ignore();
    }
    let _: () = pipe.query(con).unwrap();
    let last = call(con, "RL.SLIDINGLOG", "log", &["1000", "60", "1700000059", "0"]);
    assert_eq!(last[..2], [1, 0]);
    let bytes: i64 = redis::cmd("MEMORY").arg("USAGE").arg("log").query(con).unwrap();
    assert!(bytes <= 8000, "MEMORY USAGE {bytes} for 1000 units");
    // The token bucket costs its 16 bytes of state.
    call(con, "RL.TOKENBUCKET", "tb", &["10", "1", "*", "1"]);
    let small: i64 = redis::cmd("MEMORY").arg("USAGE").arg("tb").query(con).unwrap();
    let control: i64 = {
        let _: () = redis::cmd("SET").arg("tb").arg("x").query(con).unwrap();
        redis::cmd("MEMORY").arg("USAGE").arg("tb").query(con).unwrap()
    };
    assert!(small <= control + 16, "token bucket {small} bytes, a short string {control}");
    // Above 18,446,744 tokens the bucket's state is 32 bytes, 16 more (docs/commands.md).
    for (key, capacity) in [("narrow", "18446744"), ("wide00", "18446746")] {
        call(con, "RL.TOKENBUCKET", key, &[capacity, "1", "*", "1"]);
    }
    let usage = |con: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("MEMORY").arg("USAGE").arg(key).query(con).unwrap()
    };
    assert_eq!(usage(con, "wide00") - usage(con, "narrow"), 16);
}
