//! Many clients on one key: the admitted total is exactly what the
//! algorithm allows, not one more.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
use std::thread;

use common::{Server, ints};

#[test]
fn eight_clients_admit_exactly_the_limit() {
    let server = Arc::new(Server::start(&[]));
    // A fixed `now`: no time passes, so nothing refills, drains or slides.
    for (command, rate_or_window) in [
        ("RL.TOKENBUCKET", "1"),
        ("RL.LEAKYBUCKET", "1"),
        ("RL.FIXEDWINDOW", "60"),
        ("RL.SLIDINGWINDOW", "60"),
        ("RL.SLIDINGLOG", "60"),
        ("RL.ACQUIRE", "60"),
    ] {
        let clients: Vec<_> = (0..8)
            .map(|_| {
                let server = Arc::clone(&server);
                thread::spawn(move || {
                    let con = &mut server.connect();
                    let args = [command, "shared", "1000", rate_or_window, "1700000000", "1"];
                    (0..300).map(|_| ints(con, &args)[0]).sum::<i64>()
                })
            })
            .collect();
        let admitted: i64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
        assert_eq!(admitted, 1000, "{command}");
        let con = &mut server.connect();
        let peek = ints(con, &[command, "shared", "1000", rate_or_window, "1700000000", "0"]);
        assert_eq!(peek[..3], [1, 0, 1000], "{command}");
        let _: () = redis::cmd("DEL").arg("shared").query(con).unwrap();
    }
}

/// Eight clients take and release slots of one key as fast as they can:
/// a client counts itself as holding from the moment RL.ACQUIRE admits it
/// until just before its RL.RELEASE, and never more than `limit` do at
/// once. Every lease id given out while held is unique.
#[test]
fn eight_clients_never_hold_more_than_the_limit() {
    const LIMIT: i64 = 3;
    let server = Arc::new(Server::start(&[]));
    let holding = Arc::new(AtomicI64::new(0));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (server, holding) = (Arc::clone(&server), Arc::clone(&holding));
            thread::spawn(move || {
                let con = &mut server.connect();
                let (mut admitted, mut most) = (0, 0);
                for _ in 0..300 {
                    let reply = ints(con, &["RL.ACQUIRE", "slots", "3", "60", "*", "1"]);
                    if reply[0] == 0 {
                        assert_eq!((reply[1], reply[5]), (0, 0), "{reply:?}");
                        continue;
                    }
                    admitted += 1;
                    let now = holding.fetch_add(1, SeqCst) + 1;
                    most = most.max(now);
                    assert!(now <= LIMIT, "{now} clients hold a slot");
                    holding.fetch_sub(1, SeqCst);
                    let id = reply[5].to_string();
                    assert_eq!(ints(con, &["RL.RELEASE", "slots", &id, "*"])[0], 1, "lease {id}");
                }
                (admitted, most)
            })
        })
        .collect();
    let results: Vec<(i64, i64)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert!(results.iter().map(|r| r.0).sum::<i64>() > 300, "{results:?}");
    let con = &mut server.connect();
    let exists: i64 = redis::cmd("EXISTS").arg("slots").query(con).unwrap();
    assert_eq!(exists, 0, "every lease released: no key");
}

/// Leases taken at one `now` by eight clients: exactly `limit` of them,
/// with the ids 1 to `limit`, each once.
#[test]
fn eight_clients_get_distinct_lease_ids() {
    let server = Arc::new(Server::start(&[]));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let server = Arc::clone(&server);
            thread::spawn(move || {
                let con = &mut server.connect();
                (0..100)
                    .map(|_| ints(con, &["RL.ACQUIRE", "ids", "500", "60", "1700000000", "1"])[5])
                    .filter(|&id| id > 0)
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let ids: Vec<i64> = clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
    assert_eq!(ids.len(), 500);
    assert_eq!(ids.iter().copied().collect::<HashSet<i64>>(), (1..=500).collect());
}
