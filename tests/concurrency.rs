//! Many clients on one key: the admitted total is exactly what the
//! algorithm allows, not one more.

mod common;

use std::sync::Arc;
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
