//! RL.ACQUIRE, RL.RELEASE and RL.RENEW on a real server: the sessions of
//! docs/commands.md, reply for reply, and the key's expiry
//! following the last lease on the server's clock.

mod common;

use common::{Server, assert_expires_at_reset, ints, server_ms};

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

/// docs/commands.md, "RL.ACQUIRE, RL.RELEASE, RL.RENEW".
#[test]
fn the_documented_session() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let session: [(&[&str], &[i64]); 9] = [
        (&["RL.ACQUIRE", "db:7", "3", "30", "1000", "2"], &[1, 1, 3, 0, 30000, 1]),
        (&["RL.ACQUIRE", "db:7", "3", "30", "1010", "1"], &[1, 0, 3, 0, 30000, 2]),
        (&["RL.ACQUIRE", "db:7", "3", "30", "1015", "1"], &[0, 0, 3, 15000, 25000, 0]),
        (&["RL.RENEW", "db:7", "1", "30", "1020"], &[1, 3, 30000]),
        (&["RL.RELEASE", "db:7", "2", "1021"], &[1, 2, 29000]),
        (&["RL.ACQUIRE", "db:7", "3", "30", "1021", "1"], &[1, 0, 3, 0, 30000, 3]),
        (&["RL.RELEASE", "db:7", "2", "1022"], &[0, 3, 29000]),
        (&["RL.RELEASE", "db:7", "1", "1022"], &[1, 1, 29000]),
        (&["RL.RELEASE", "db:7", "3", "1022"], &[1, 0, 0]),
    ];
    for (call, reply) in session {
        assert_eq!(ints(con, call), reply, "{call:?}");
    }
    assert!(!exists(con, "db:7"));
}

/// A session of RL.ACQUIRE, RL.RENEW and RL.RELEASE (as the README had it).
#[test]
fn the_readme_session() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let session: [(&[&str], &[i64]); 4] = [
        (&["RL.ACQUIRE", "db:7", "3", "30", "1000", "2"], &[1, 1, 3, 0, 30000, 1]),
        (&["RL.ACQUIRE", "db:7", "3", "30", "1015", "2"], &[0, 1, 3, 15000, 15000, 0]),
        (&["RL.RENEW", "db:7", "1", "30", "1020"], &[1, 2, 30000]),
        (&["RL.RELEASE", "db:7", "1", "1021"], &[1, 0, 0]),
    ];
    for (call, reply) in session {
        assert_eq!(ints(con, call), reply, "{call:?}");
    }
    assert!(!exists(con, "db:7"));
}

/// The key expires when its last lease runs out, on the server's clock,
/// after an acquire and after a renewal; a denied call, a look and a
/// release of nothing leave the expiry alone.
#[test]
fn the_key_lives_while_a_lease_is_held() {
    let server = Server::start(&[]);
    let con = &mut server.connect();
    let reply = assert_expires_at_reset(con, &["RL.ACQUIRE", "k", "2", "100", "*", "1"]);
    assert_eq!(reply[..4], [1, 1, 2, 0]);
    assert_expires_at_reset(con, &["RL.ACQUIRE", "k", "2", "500", "*", "1"]);
    let at = |con: &mut redis::Connection| -> i64 {
        redis::cmd("PEXPIRETIME").arg("k").query(con).unwrap()
    };
    let expires = at(con);
    assert_eq!(ints(con, &["RL.ACQUIRE", "k", "2", "100", "*", "1"])[0], 0);
    assert_eq!(ints(con, &["RL.ACQUIRE", "k", "2", "100", "*", "0"])[0], 1);
    assert_eq!(ints(con, &["RL.RELEASE", "k", "9", "*"])[0], 0);
    assert_eq!(ints(con, &["RL.RENEW", "k", "9", "1", "*"])[0], 0);
    assert_eq!(at(con), expires);
    // Renewing lease 2 for 1000 s moves the expiry to it.
    let before = server_ms(con);
    let renewed = ints(con, &["RL.RENEW", "k", "2", "1000", "*"]);
    let after = server_ms(con);
    assert_eq!(renewed[..2], [1, 2]);
    assert!((before..=after).contains(&(at(con) - renewed[2])), "{renewed:?}");
    // Releasing the longer lease leaves lease 1's end as the expiry.
    let before = server_ms(con);
    let released = ints(con, &["RL.RELEASE", "k", "2", "*"]);
    let after = server_ms(con);
    assert_eq!(released[..2], [1, 1]);
    assert!(released[2] <= 100_000, "{released:?}");
    assert!((before..=after).contains(&(at(con) - released[2])), "{released:?}");
}
