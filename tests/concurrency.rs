//! Many clients on one key: the admitted total is exactly what the bucket
//! holds, not one more.

mod common;

use std::sync::Arc;
use std::thread;

use common::{Server, ints};

#[test]
fn eight_clients_admit_exactly_capacity() {
    let server = Arc::new(Server::start(&[]));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let server = Arc::clone(&server);
            thread::spawn(move || {
                let con = &mut server.connect();
                // A fixed `now`: no time passes, so nothing refills.
                (0..300)
                    .map(|_| ints(con, &["RL.TOKENBUCKET", "shared", "1000", "1", "5000", "1"])[0])
                    .sum::<i64>()
            })
        })
        .collect();
    let admitted: i64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(admitted, 1000);
    let con = &mut server.connect();
    assert_eq!(
        ints(con, &["RL.TOKENBUCKET", "shared", "1000", "1", "5000", "0"]),
        [1, 0, 1000, 0, 1_000_000]
    );
}
