//! Real redis-server processes for the integration tests: each on its own
//! free loopback port, in its own temporary directory, with the module
//! loaded, and killed when dropped.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// Every command of the module: the five algorithms' own first.
pub const COMMANDS: [&str; 15] = [
    "RL.TOKENBUCKET",
    "RL.LEAKYBUCKET",
    "RL.FIXEDWINDOW",
    "RL.SLIDINGWINDOW",
    "RL.SLIDINGLOG",
    "RL.MULTI",
    "RL.PEEK",
    "RL.REFUND",
    "RL.THROTTLE",
    "RL.SETSTATE",
    "RL.LOGAPPLY",
    "RL.ACQUIRE",
    "RL.RELEASE",
    "RL.RENEW",
    "RL.LEASEAPPLY",
];

/// The redis-cell build that CELL_MODULE names, for the tests compiled in
/// only when it was set (build.rs): read again at run time, where a path
/// that names no file is a failure, not a skip.
pub fn cell_module() -> String {
    let cell = std::env::var("CELL_MODULE").unwrap_or_default();
    assert!(
        Path::new(&cell).is_file(),
        "CELL_MODULE={cell:?} names no file: the tests against redis-cell cannot run"
    );
    cell
}

pub fn module_path() -> PathBuf {
    let path = std::env::var_os("RATELIMIT_MODULE").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libredis_ratelimit.so")
    });
    assert!(path.exists(), "{} is missing: run `make build` first", path.display());
    path
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: TempDir,
    args: Vec<String>,
}

impl Server {
    /// A server with no persistence unless `args` asks for it.
    pub fn start(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temporary directory");
        let args = args.iter().map(|a| a.to_string()).collect();
        Self::spawn(dir, args)
    }

    fn spawn(dir: TempDir, args: Vec<String>) -> Server {
        let (child, port) = spawn_ready(dir.path(), &args);
        Server { child, port, dir, args }
    }

    pub fn connect(&self) -> redis::Connection {
        connect(self.port).expect("connect to redis-server")
    }

    /// Kills the server (no save on the way out, as in a crash) and starts
    /// it again in the same directory with the same arguments.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.child, self.port) = spawn_ready(self.dir.path(), &self.args);
    }

    pub fn log(&self) -> String {
        log(self.dir.path())
    }
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default()
}

fn spawn_ready(dir: &Path, args: &[String]) -> (Child, u16) {
    spawn_server(
        dir,
        &[&["--loadmodule".to_string(), module_path().display().to_string()][..], args].concat(),
    )
}

/// A redis-server on a free port in `dir`, with `args` after the usual ones.
fn spawn_server(dir: &Path, args: &[String]) -> (Child, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut child =
            Command::new(std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into()))
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--enable-debug-command", "yes", "--daemonize", "no"])
                .arg("--dir")
                .arg(dir)
                .arg("--logfile")
                .arg(dir.join("redis.log"))
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server (is it installed? `make deps`)");
        if wait_ready(&mut child, port) {
            return (child, port);
        }
        // Most likely another process took the port: try another.
        let _ = child.kill();
        let _ = child.wait();
        eprintln!("redis-server did not start on port {port}:\n{}", log(dir));
    }
    panic!("redis-server did not start");
}

fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))?.get_connection()
}

fn wait_ready(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut con) = connect(port) {
            // While loading a dataset the server answers PING with LOADING.
            if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                return true;
            }
        }
        sleep(Duration::from_millis(20));
    }
    false
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A script-mode source (the text of lua/ratelimit.lua) as the Redis
/// Function library the clients load with FUNCTION LOAD: a line naming the
/// library, one naming its function, then the source unchanged. Both are
/// `ratelimit_<v>`, <v> the first 12 hex digits of the source's SHA1 (its
/// EVALSHA sha). Returns that name and the library's text.
pub fn function_library(source: &str) -> (String, String) {
    let digest = sha1_smol::Sha1::from(source).digest().to_string();
    let name = format!("ratelimit_{}", &digest[..12]);
    let text = format!("#!lua name={name}\nlocal RATELIMIT_FUNCTION = '{name}'\n{source}");
    (name, text)
}

/// Runs a command and returns its integer-array reply.
pub fn ints(con: &mut redis::Connection, args: &[&str]) -> Vec<i64> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a command that must fail; returns the error line as Redis sent it.
pub fn error(con: &mut redis::Connection, args: &[&[u8]]) -> String {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("command name"));
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

pub fn dump(con: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(con).expect("DUMP")
}

/// One field of `INFO section`.
pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} not in INFO {section}"))
        .trim()
        .to_string()
}

/// The server's clock in Unix milliseconds.
pub fn server_ms(con: &mut redis::Connection) -> i64 {
    let time: Vec<i64> = redis::cmd("TIME").query(con).unwrap();
    time[0] * 1000 + time[1] / 1000
}

/// Runs a limiter call and checks that its key expires `reset_after_ms`
/// after the server's clock at the call: PEXPIRETIME - reset_after_ms lies
/// between the clock read just before and just after. Returns the reply.
pub fn assert_expires_at_reset(con: &mut redis::Connection, args: &[&str]) -> Vec<i64> {
    let before = server_ms(con);
    let reply = ints(con, args);
    let after = server_ms(con);
    let at: i64 = redis::cmd("PEXPIRETIME").arg(args[1]).query(con).unwrap();
    let reset = reply[4];
    assert!(reset > 0, "{args:?}: {reply:?}");
    assert!(
        (before..=after).contains(&(at - reset)),
        "{args:?}: expires at {at}, reset {reset}, clock {before}..{after}"
    );
    reply
}

/// DUMP and PEXPIRETIME of each key: what a test compares to say that
/// nothing changed, or that two servers hold the same.
pub fn snapshot<K: AsRef<str>>(
    con: &mut redis::Connection,
    keys: &[K],
) -> Vec<(Option<Vec<u8>>, i64)> {
    keys.iter()
        .map(|key| {
            let at: i64 = redis::cmd("PEXPIRETIME").arg(key.as_ref()).query(con).unwrap();
            (dump(con, key.as_ref()), at)
        })
        .collect()
}

/// Runs an RL.MULTI and splits its reply: `(allowed, retry_after_ms,
/// [fields of each limit])`.
pub fn multi(con: &mut redis::Connection, args: &[&str]) -> (i64, i64, Vec<Vec<i64>>) {
    let reply: Vec<redis::Value> = redis::cmd("RL.MULTI")
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("RL.MULTI {args:?}: {e}"));
    let int = |v: &redis::Value| match v {
        redis::Value::Int(i) => *i,
        other => panic!("RL.MULTI {args:?}: {other:?} is not an integer"),
    };
    let fields = reply[2..]
        .iter()
        .map(|limit| match limit {
            redis::Value::Array(fields) => fields.iter().map(int).collect(),
            other => panic!("RL.MULTI {args:?}: {other:?} is not an array"),
        })
        .collect();
    (int(&reply[0]), int(&reply[1]), fields)
}

/// A replica of `primary`, its link up.
pub fn start_replica(primary: &Server) -> Server {
    let replica = Server::start(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let con = &mut replica.connect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(con, "replication", "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "the replica did not sync:\n{}", replica.log());
        sleep(Duration::from_millis(20));
    }
    replica
}

/// Waits until the replicas of the server behind `con` acknowledged all
/// writes so far.
pub fn wait_for_replica(con: &mut redis::Connection) {
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(con).unwrap();
    assert_eq!(acked, 1, "the replica acknowledged");
}

/// Waits until no AOF rewrite is running or scheduled.
pub fn wait_for_aof_rewrite(con: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(con, "persistence", "aof_rewrite_in_progress") != "0"
        || info_field(con, "persistence", "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "BGREWRITEAOF did not finish");
        sleep(Duration::from_millis(20));
    }
}

/// A cluster of `count` primaries with the module and no replicas, made
/// with `redis-cli --cluster create`, its state ok on every node.
pub fn start_cluster(count: usize) -> Vec<Server> {
    cluster_of(count, true)
}

/// A cluster as `start_cluster` makes, of servers without the module
/// (script mode's servers).
pub fn start_cluster_without_module(count: usize) -> Vec<Server> {
    cluster_of(count, false)
}

fn cluster_of(count: usize, with_module: bool) -> Vec<Server> {
    let args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"];
    let args = [&args[..], &["--cluster-config-file", "nodes.conf"]].concat();
    let nodes: Vec<Server> = (0..count)
        .map(|_| if with_module { Server::start(&args) } else { start_without_module(&args) })
        .collect();
    let mut create = vec!["--cluster".to_string(), "create".to_string()];
    create.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
    let out = Command::new("redis-cli").args(&create).output().expect("redis-cli");
    assert!(out.status.success(), "redis-cli {create:?}: {}", String::from_utf8_lossy(&out.stderr));
    for node in &nodes {
        let con = &mut node.connect();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info: String = redis::cmd("CLUSTER").arg("INFO").query(con).unwrap();
            if info.lines().any(|l| l.trim() == "cluster_state:ok") {
                break;
            }
            assert!(Instant::now() < deadline, "cluster_state is not ok");
            sleep(Duration::from_millis(50));
        }
    }
    nodes
}

/// The node of `nodes` that serves `key`'s slot.
pub fn node_serving<'a>(nodes: &'a [Server], key: &str) -> &'a Server {
    let con = &mut nodes[0].connect();
    let slot: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(con).unwrap();
    let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER").arg("SLOTS").query(con).unwrap();
    for range in ranges {
        let (start, end): (i64, i64) = (
            redis::from_redis_value(range[0].clone()).unwrap(),
            redis::from_redis_value(range[1].clone()).unwrap(),
        );
        if (start..=end).contains(&slot) {
            let primary: Vec<redis::Value> = redis::from_redis_value(range[2].clone()).unwrap();
            let port: i64 = redis::from_redis_value(primary[1].clone()).unwrap();
            return nodes
                .iter()
                .find(|n| i64::from(n.port) == port)
                .expect("a node of the cluster");
        }
    }
    panic!("no node serves slot {slot}");
}

/// Runs a command that must fail; returns the error line as Redis sent it.
pub fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    error(con, &args)
}

/// A server without the module (to `MODULE LOAD` it), with `args` after
/// the usual ones. `restart` would load the module: not for these.
pub fn start_without_module(args: &[&str]) -> Server {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.extend(["--enable-module-command", "yes"].map(String::from));
    let (child, port) = spawn_server(dir.path(), &args);
    Server { child, port, dir, args: Vec::new() }
}

/// The base file of the server's AOF (Redis 7 keeps it in several parts).
pub fn aof_base(server: &Server) -> Vec<u8> {
    let base = std::fs::read_dir(server.dir.path().join("appendonlydir"))
        .expect("appendonlydir")
        .map(|entry| entry.expect("a directory entry").path())
        .find(|path| path.to_string_lossy().contains(".base."))
        .expect("an AOF base file");
    std::fs::read(base).expect("the AOF base file")
}

/// Subscribes `pubsub` to every keyspace event of database 0; each read
/// waits up to 5 s.
pub fn listen_keyevents(pubsub: &mut redis::PubSub) {
    pubsub.psubscribe("__keyevent@0__:*").expect("PSUBSCRIBE");
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).expect("a read timeout");
}

/// The next keyspace event: its channel and its key.
pub fn next_keyevent(pubsub: &mut redis::PubSub) -> (String, String) {
    let message = pubsub.get_message().expect("a keyspace event");
    (message.get_channel_name().to_string(), message.get_payload().expect("a key name"))
}

/// The AOF files whose names contain `kind` (".base.", ".incr."), joined.
pub fn aof_files(server: &Server, kind: &str) -> Vec<u8> {
    std::fs::read_dir(server.dir.path().join("appendonlydir"))
        .expect("appendonlydir")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.to_string_lossy().contains(kind))
        .flat_map(|path| std::fs::read(path).expect("an AOF file"))
        .collect()
}

/// The commands of the AOF's incremental files, each as its arguments
/// (module arguments hold no CR LF, so the RESP splits on it).
pub fn aof_commands(server: &Server) -> Vec<Vec<String>> {
    resp_commands(&aof_files(server, ".incr."))
}

/// The commands of an AOF's text, each as its arguments.
pub fn resp_commands(bytes: &[u8]) -> Vec<Vec<String>> {
    let text = std::str::from_utf8(bytes).expect("text commands");
    let mut lines = text.split("\r\n");
    let mut commands = Vec::new();
    while let Some(header) = lines.next().filter(|line| !line.is_empty()) {
        let count: usize = header.strip_prefix('*').and_then(|n| n.parse().ok()).expect(header);
        let args = (0..count).map(|_| lines.nth(1).expect("an argument").to_string()).collect();
        commands.push(args);
    }
    commands
}

/// Whether `bytes` begin as an RDB file: Redis writes `REDIS`, Valkey 9
/// `VALKEY`.
pub fn is_rdb(bytes: &[u8]) -> bool {
    bytes.starts_with(b"REDIS") || bytes.starts_with(b"VALKEY")
}

/// A server with the AOF on, each write synced, with or without the RDB
/// preamble in its rewrites (`preamble` "yes" or "no").
pub fn aof_server(preamble: &str) -> Server {
    Server::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        preamble,
    ])
}

/// Whether `needle` occurs in `haystack` (a command name in an AOF file).
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// The largest limit: a sliding log that no call is ever denied by.
pub const MAX_UNITS: &str = "9007199254740991";

/// `count` calls of `command` (its arguments before `now`), pipelined, one
/// a microsecond from 1700000000 s: a long sliding log in about a second.
pub fn one_a_microsecond(con: &mut redis::Connection, command: &[&str], count: u64) {
    let mut pipe = redis::pipe();
    for i in 0..count {
        let now = format!("{}.{:06}", 1_700_000_000 + i / 1_000_000, i % 1_000_000);
        pipe.cmd(command[0]).arg(&command[1..]).arg(now).ignore();
    }
    let () = pipe.query(con).unwrap();
}
