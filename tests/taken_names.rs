//! The module loads when one of its command names is taken: by the server
//! (a Valkey with its own RL.THROTTLE would take it; here the server's GET
//! renamed with `rename-command` takes it, which works on every server) or
//! by a module loaded first (redis-cell takes CL.THROTTLE, when the module
//! is given the argument `CL.THROTTLE`: run against a real redis-cell build
//! only when CELL_MODULE names one, else reported as not run). That
//! command is skipped with a warning naming it; the rest register, with
//! their docs.

mod common;

use common::{error, ints, module_path, start_without_module};

/// MODULE LOAD of the module with `args`, on a server started with
/// `server_args`; the server and a connection.
fn load(server_args: &[&str], args: &[&str]) -> (common::Server, redis::Connection) {
    let server = start_without_module(server_args);
    let mut con = server.connect();
    let path = module_path();
    let _: () = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(path.to_str().unwrap())
        .arg(args)
        .query(&mut con)
        .unwrap_or_else(|e| panic!("MODULE LOAD {args:?}: {e}\n{}", server.log()));
    (server, con)
}

/// The module is loaded and answers every command but `taken`.
fn others_answer(con: &mut redis::Connection, taken: &str) {
    let modules: redis::Value = redis::cmd("MODULE").arg("LIST").query(con).unwrap();
    assert!(format!("{modules:?}").contains("ratelimit"), "{modules:?}");
    let now = "1700000000";
    assert_eq!(ints(con, &["RL.TOKENBUCKET", "tb", "10", "1", now, "1"]), [1, 9, 10, 0, 1000]);
    assert_eq!(ints(con, &["RL.ACQUIRE", "cc", "2", "30", now, "1"]), [1, 1, 2, 0, 30_000, 1]);
    if taken != "RL.THROTTLE" {
        assert_eq!(ints(con, &["RL.THROTTLE", "th", "15", "30", "60"]), [0, 16, 15, -1, 2]);
    }
    // The other commands have their docs.
    let docs: redis::Value = redis::cmd("COMMAND").arg("DOCS").arg("RL.MULTI").query(con).unwrap();
    assert!(format!("{docs:?}").contains("all of them admit"), "{docs:?}");
}

fn warned(server: &common::Server, name: &str) {
    let expected = format!(
        "ratelimit: {name} is taken (by the server or a module loaded before): skipped; \
         the module's other commands are registered"
    );
    assert!(server.log().contains(&expected), "no warning naming {name}:\n{}", server.log());
}

#[test]
fn a_name_the_server_has_is_skipped_and_the_rest_register() {
    let (server, mut con) = load(&["--rename-command", "GET", "RL.THROTTLE"], &[]);
    warned(&server, "RL.THROTTLE");
    others_answer(&mut con, "RL.THROTTLE");
    // The name is still the server's command (GET), not the module's.
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let got: String = redis::cmd("RL.THROTTLE").arg("k").query(&mut con).unwrap();
    assert_eq!(got, "v");
    let taken = error(&mut con, &[b"RL.THROTTLE", b"k", b"15", b"30", b"60"]);
    assert!(taken.contains("wrong number of arguments"), "{taken}");
}

#[test]
fn cl_throttle_taken_is_skipped_and_rl_throttle_registers() {
    let (server, mut con) = load(&["--rename-command", "GET", "CL.THROTTLE"], &["CL.THROTTLE"]);
    warned(&server, "CL.THROTTLE");
    others_answer(&mut con, "CL.THROTTLE");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let got: String = redis::cmd("CL.THROTTLE").arg("k").query(&mut con).unwrap();
    assert_eq!(got, "v");
}

#[test]
#[cfg_attr(
    not(cell_module),
    ignore = "DID NOT RUN: needs a redis-cell v0.5.0 build; set CELL_MODULE=/path/to/libredis_cell.so \
              (CELL_MODULE=... make test)"
)]
fn redis_cell_loaded_first_keeps_cl_throttle() {
    let cell = common::cell_module();
    let (server, mut con) = load(&["--loadmodule", &cell], &["CL.THROTTLE"]);
    warned(&server, "CL.THROTTLE");
    others_answer(&mut con, "CL.THROTTLE");
    // CL.THROTTLE is redis-cell's: its state is a plain string, ours our type.
    assert_eq!(ints(&mut con, &["CL.THROTTLE", "cell", "15", "30", "60"]), [0, 16, 15, -1, 2]);
    let kind: String = redis::cmd("TYPE").arg("cell").query(&mut con).unwrap();
    assert_eq!(kind, "string");
    let kind: String = redis::cmd("TYPE").arg("th").query(&mut con).unwrap();
    assert_eq!(kind, "ratelimit");
}
