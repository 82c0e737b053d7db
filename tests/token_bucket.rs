//! RL.TOKENBUCKET's replies, expiry, type and routing, against a real server.

mod common;

use common::{Server, dump, ints};

fn tb(con: &mut redis::Connection, key: &str, rest: &[&str]) -> Vec<i64> {
    let mut args = vec!["RL.TOKENBUCKET", key];
    args.extend_from_slice(rest);
    ints(con, &args)
}

#[test]
fn worked_example_drain_and_refill() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // capacity 10, 1 token/s: a fresh key is full, one is taken.
    assert_eq!(tb(con, "k", &["10", "1", "1000", "1"]), [1, 9, 10, 0, 1000]);
    // n left out means 1.
    assert_eq!(tb(con, "k", &["10", "1", "1000"]), [1, 8, 10, 0, 2000]);
    // Drain the rest at the same instant.
    assert_eq!(tb(con, "k", &["10", "1", "1000", "8"]), [1, 0, 10, 0, 10000]);
    // A drained bucket: denied, one token is a second away.
    assert_eq!(tb(con, "k", &["10", "1", "1000", "1"]), [0, 0, 10, 1000, 10000]);
    assert_eq!(tb(con, "k", &["10", "1", "1000.25", "1"]), [0, 0, 10, 750, 9750]);
    // 2.5 s later 2.5 tokens are back: one is taken, 1.5 stay.
    assert_eq!(tb(con, "k", &["10", "1", "1002.5", "1"]), [1, 1, 10, 0, 8500]);
    assert_eq!(tb(con, "k", &["10", "1", "1002.5", "2"]), [0, 1, 10, 500, 8500]);
}

#[test]
fn more_than_capacity_is_never_admitted() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    assert_eq!(tb(con, "k", &["5", "1", "1000", "6"]), [0, 5, 5, -1, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(con).unwrap();
    assert_eq!(exists, 0, "a denied call creates nothing");
}

#[test]
fn peek_on_fresh_key_creates_nothing() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    assert_eq!(tb(con, "k", &["7", "2", "1000", "0"]), [1, 7, 7, 0, 0]);
    assert_eq!(tb(con, "k", &["7", "2", "*", "0"]), [1, 7, 7, 0, 0]);
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(con).unwrap();
    assert_eq!(exists, 0);
    // A peek on a used key reports the refilled state and changes nothing.
    tb(con, "k", &["7", "2", "1000", "4"]);
    let before = dump(con, "k");
    assert_eq!(tb(con, "k", &["7", "2", "1001", "0"]), [1, 5, 7, 0, 1000]);
    assert_eq!(dump(con, "k"), before);
}

#[test]
fn backwards_now_counts_as_no_time() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    assert_eq!(tb(con, "k", &["10", "1", "1000", "5"]), [1, 5, 10, 0, 5000]);
    assert_eq!(tb(con, "k", &["10", "1", "990", "1"]), [1, 4, 10, 0, 6000]);
    // The key's clock stayed at 1000: one second later one token is back.
    assert_eq!(tb(con, "k", &["10", "1", "1001", "0"]), [1, 5, 10, 0, 5000]);
}

#[test]
fn shrunk_capacity_clamps_stored_tokens() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    assert_eq!(tb(con, "k", &["10", "1", "1000", "1"]), [1, 9, 10, 0, 1000]);
    assert_eq!(tb(con, "k", &["3", "1", "1000", "1"]), [1, 2, 3, 0, 1000]);
    // Growing it again does not bring back the clamped tokens.
    assert_eq!(tb(con, "k", &["10", "1", "1000", "0"]), [1, 2, 10, 0, 8000]);
}

#[test]
fn fractional_rate_and_microsecond_time() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // 0.5 tokens/s: a token every 2 s.
    assert_eq!(tb(con, "k", &["2", "0.5", "1700000000.000001", "2"]), [1, 0, 2, 0, 4000]);
    assert_eq!(tb(con, "k", &["2", "0.5", "1700000001.999999", "1"]), [0, 0, 2, 1, 2001]);
    assert_eq!(tb(con, "k", &["2", "0.5", "1700000002.000001", "1"]), [1, 0, 2, 0, 4000]);
}

#[test]
fn expiry_is_reset_after_ms() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    for args in [
        ["RL.TOKENBUCKET", "a", "10", "1", "1000", "1"],
        ["RL.TOKENBUCKET", "b", "100", "0.01", "*", "30"],
        ["RL.TOKENBUCKET", "c", "3", "1000", "*", "3"],
    ] {
        common::assert_expires_at_reset(con, &args);
    }
    let reply =
        common::assert_expires_at_reset(con, &["RL.TOKENBUCKET", "a", "10", "1", "1000", "2"]);
    assert_eq!(reply, [1, 7, 10, 0, 3000]);
}

#[test]
fn server_time_refills_between_calls() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // 1000 tokens/s: after a 50 ms pause the bucket of 5 is full again.
    assert_eq!(tb(con, "k", &["5", "1000", "*", "5"]), [1, 0, 5, 0, 5]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(tb(con, "k", &["5", "1000", "*", "0"]), [1, 5, 5, 0, 0]);
}

#[test]
fn type_dump_restore_and_wrongtype() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    tb(con, "k", &["10", "1", "1000", "3"]);
    let kind: String = redis::cmd("TYPE").arg("k").query(con).unwrap();
    assert_eq!(kind, "ratelimit");
    let payload = dump(con, "k").expect("a dump");
    let _: () = redis::cmd("RESTORE").arg("copy").arg(0).arg(&payload).query(con).unwrap();
    assert_eq!(dump(con, "copy"), Some(payload));
    assert_eq!(tb(con, "copy", &["10", "1", "1000", "0"]), [1, 7, 10, 0, 3000]);
    let _: () = redis::cmd("COPY").arg("k").arg("copy2").query(con).unwrap();
    assert_eq!(tb(con, "copy2", &["10", "1", "1000", "0"]), [1, 7, 10, 0, 3000]);

    let _: () = redis::cmd("SET").arg("s").arg("1").query(con).unwrap();
    let err = common::error(con, &[b"RL.TOKENBUCKET", b"s", b"10", b"1", b"1000"]);
    assert_eq!(err, "WRONGTYPE Operation against a key holding the wrong kind of value");
    let value: String = redis::cmd("GET").arg("s").query(con).unwrap();
    assert_eq!(value, "1");
}

#[test]
fn command_getkeys_names_the_key() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg(&["RL.TOKENBUCKET", "k", "5", "1", "1", "1"])
        .query(con)
        .unwrap();
    assert_eq!(keys, ["k"]);
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg(&["RL.SETSTATE", "k", "TOKENBUCKET", "0", "0"])
        .query(con)
        .unwrap();
    assert_eq!(keys, ["k"]);
}

#[test]
fn setstate_writes_a_state_and_its_expiry() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    // 2.5 tokens (in pico-tokens) at t = 1000 s, expiring in an hour.
    let now_ms: i64 = {
        let t: Vec<i64> = redis::cmd("TIME").query(con).unwrap();
        t[0] * 1000 + t[1] / 1000
    };
    let at = (now_ms + 3_600_000).to_string();
    let args = ["k", "TOKENBUCKET", "2500000000000", "1000000000", "PXAT", &at];
    let ok: String = redis::cmd("RL.SETSTATE").arg(&args).query(con).unwrap();
    assert_eq!(ok, "OK");
    let pexpiretime: i64 = redis::cmd("PEXPIRETIME").arg("k").query(con).unwrap();
    assert_eq!(pexpiretime.to_string(), at);
    assert_eq!(tb(con, "k", &["10", "1", "1000", "0"]), [1, 2, 10, 0, 7500]);
    // Without PXAT the key does not expire.
    let _: String =
        redis::cmd("RL.SETSTATE").arg(&["k", "tokenbucket", "0", "1000000000"]).query(con).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg("k").query(con).unwrap();
    assert_eq!(pttl, -1);
}

#[test]
fn watch_sees_writes_but_not_peeks_or_denials() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    tb(con, "k", &["2", "1", "1000", "2"]);
    // A peek and a denied call change nothing, so a WATCHed transaction runs.
    let _: () = redis::cmd("WATCH").arg("k").query(con).unwrap();
    tb(con, "k", &["2", "1", "1000", "0"]);
    tb(con, "k", &["2", "1", "1000", "1"]);
    let ran: Option<Vec<String>> = redis::pipe().atomic().cmd("PING").query(con).unwrap();
    assert_eq!(ran, Some(vec!["PONG".to_string()]));
    // An admitted call is a write: the transaction is aborted.
    let _: () = redis::cmd("WATCH").arg("k").query(con).unwrap();
    tb(con, "k", &["2", "1", "1001", "1"]);
    let ran: Option<Vec<String>> = redis::pipe().atomic().cmd("PING").query(con).unwrap();
    assert_eq!(ran, None);
}
