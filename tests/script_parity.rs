//! Script mode against the module: lua/ratelimit.lua on a server without
//! the module answers every call as the module does on another server.
//!
//! - Random sequences on given times (every algorithm, concurrency limits
//!   with RL.RELEASE and RL.RENEW of held, run-out and unknown leases,
//!   RL.MULTI of mixed algorithms, RL.PEEK, RL.REFUND, n = 0, parameters and times at both
//!   ends of their ranges and just past them, times going backwards,
//!   fractional microseconds): identical replies, errors included, at least
//!   10,000 calls per algorithm. Each key's sequence runs in one MULTI/EXEC
//!   on each server, so that no key expires halfway on one server and not
//!   on the other (the servers' clocks are not the calls' clocks).
//! - The server's clock (`*`): exactly, where the answer cannot depend on
//!   the instant (a clock behind the key's last update counts as no time);
//!   elsewhere with the tolerance that the two calls' instants allow, below.
//! - Expiry: after every call that writes (an admitted take of n > 0, a
//!   refund of n > 0 on an existing key), on each server, the key expires
//!   `reset_after_ms` after the server's clock at the call (or is gone when
//!   that is 0), and a call that does not write leaves the expiry as it was.
//! - Bad input: the module's error for each, and nothing changes.
//! - A 3-primary cluster without the module, the script routed by key.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use redis::Value;

use common::{Server, node_serving, start_cluster_without_module, start_without_module};

const SCRIPT: &str = include_str!("../lua/ratelimit.lua");
const MAX_UNITS: u64 = (1 << 53) - 1;
const MAX_TIME_US: u64 = 253_402_300_799_999_999;
const SECOND: u64 = 1_000_000;

const ALGORITHMS: [&str; 6] =
    ["TOKENBUCKET", "LEAKYBUCKET", "FIXEDWINDOW", "SLIDINGWINDOW", "SLIDINGLOG", "CONCURRENCY"];

/// The command that takes from a limit of `algorithm` on its own key.
fn take_command(algorithm: &str) -> String {
    if algorithm == "CONCURRENCY" { "RL.ACQUIRE".into() } else { format!("RL.{algorithm}") }
}

/// How script mode is called: `EVALSHA <sha1>` or `FCALL ratelimit_<v>`,
/// either followed by numkeys, the keys, the command's name and its
/// arguments.
#[derive(Clone, Debug)]
struct Form {
    command: &'static str,
    target: String,
}

/// Loads the script with SCRIPT LOAD: its EVALSHA form.
fn evalsha(con: &mut redis::Connection) -> Form {
    let sha = redis::cmd("SCRIPT").arg("LOAD").arg(SCRIPT).query(con).expect("SCRIPT LOAD");
    Form { command: "EVALSHA", target: sha }
}

/// Loads the script as a function library with FUNCTION LOAD: its FCALL
/// form.
fn fcall(con: &mut redis::Connection) -> Form {
    let (name, library) = common::function_library(SCRIPT);
    let loaded: String =
        redis::cmd("FUNCTION").arg("LOAD").arg(library).query(con).expect("FUNCTION LOAD");
    assert_eq!(loaded, name);
    Form { command: "FCALL", target: name }
}

/// Loads the script on a server in one form.
type Load = fn(&mut redis::Connection) -> Form;

/// The tests below that take a `Load` run once through each form.
macro_rules! through_both_forms {
    ($($test:ident),* $(,)?) => {
        mod through_fcall {
            $(#[test]
            fn $test() {
                super::$test(super::fcall)
            })*
        }
        mod through_evalsha {
            $(#[test]
            fn $test() {
                super::$test(super::evalsha)
            })*
        }
    };
}

through_both_forms!(
    random_sequences_on_given_times_agree_exactly,
    the_server_clock_behind_the_keys_agrees_exactly,
    the_server_clock_agrees_within_the_time_between_the_calls,
    bad_input_gets_the_module_errors_and_changes_nothing,
    stored_values_that_script_mode_did_not_write_are_refused,
    a_cluster_without_the_module_agrees_with_the_module,
    replies_past_2_53_are_refused_and_change_nothing,
    random_arguments_get_the_module_replies,
    concurrency_at_the_ends_of_its_ranges_agrees_exactly,
    long_logs_and_lease_sets_then_short_ones_agree_exactly,
    lease_sets_are_read_from_the_stored_value,
    values_in_the_next_layout_agree_with_the_module,
);

/// A server with the module and one without, the script loaded there in
/// the form `load` gives.
struct Modes {
    module: Server,
    script: Server,
    form: Form,
}

fn modes(load: Load) -> Modes {
    let module = Server::start(&[]);
    let script = start_without_module(&[]);
    let form = load(&mut script.connect());
    Modes { module, script, form }
}

/// The module call `call` as script mode calls it: EVALSHA or FCALL, the
/// keys, then the command's name and its arguments without the keys.
fn as_script(form: &Form, call: &[String]) -> Vec<String> {
    let name = call[0].to_uppercase();
    let (keys, rest): (Vec<String>, Vec<String>) = if name == "RL.MULTI" {
        let count: usize = call[1].parse().unwrap_or(0).min(call.len() - 2);
        (call[2..2 + count].to_vec(), call[2 + count..].to_vec())
    } else {
        (call[1..2].to_vec(), call[2..].to_vec())
    };
    let mut out = vec![form.command.to_string(), form.target.clone(), keys.len().to_string()];
    out.extend(keys);
    out.push(call[0].clone());
    out.extend(rest);
    out
}

/// A reply as text: integers, nested arrays, and errors as Redis sent them.
fn show(value: &Value) -> String {
    match value {
        Value::Int(i) => i.to_string(),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", "))
        }
        Value::ServerError(e) => format!("{} {}", e.code(), e.details().unwrap_or("")),
        Value::Nil => "nil".into(),
        Value::BulkString(bytes) => format!("\"{}\"", String::from_utf8_lossy(bytes)),
        other => format!("{other:?}"),
    }
}

fn client_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970").as_micros() as u64
}

// --- Calls ---------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Take,
    Peek,
    Refund,
    Multi,
    Release,
    Renew,
}

/// A call, with what the expiry check needs: its keys and each key's `n`.
#[derive(Clone, Debug)]
struct Call {
    op: Op,
    args: Vec<String>,
    keys: Vec<String>,
    counts: Vec<String>,
}

#[derive(Clone)]
struct Limit {
    algorithm: &'static str,
    a: String,
    b: String,
}

fn is_bucket(algorithm: &str) -> bool {
    algorithm.ends_with("BUCKET")
}

/// Parameters, mostly valid, at both ends of their ranges and in between.
fn random_limit(rng: &mut StdRng, algorithm: &'static str) -> Limit {
    let size: u64 = match rng.gen_range(0..20) {
        0..=2 => 1,
        3..=8 => rng.gen_range(2..=20),
        9..=12 => rng.gen_range(21..=100_000),
        13 => rng.gen_range(100_001..=1_000_000_000),
        14 => MAX_UNITS,
        15 => rng.gen_range(1..=MAX_UNITS),
        16 => 18_446_744 + rng.gen_range(0..3),
        _ => rng.gen_range(1..=10),
    };
    let b = if is_bucket(algorithm) {
        // capacity / rate at most 10^12 s: a rate of at least capacity / 10^6
        // micro-units per second.
        let least = size.div_ceil(1_000_000).max(1);
        let micros: u64 = match rng.gen_range(0..12) {
            0 => least,
            1 => 1_000_000_000_000_000_000,
            2 => rng.gen_range(least..=least.saturating_mul(1000)),
            3..=6 => rng.gen_range(1..=10_000u64) * 1000,
            7 => rng.gen_range(least.max(1)..=1_000_000_000_000_000_000),
            _ => rng.gen_range(least..=least * 10 + 500_000),
        };
        decimal(micros.max(least), rng)
    } else {
        let micros: u64 = match rng.gen_range(0..12) {
            0 => 1000,
            1 => 1_000_000_000_000_000_000,
            2..=5 => rng.gen_range(1..=60u64) * SECOND,
            6..=8 => rng.gen_range(1000..=10 * SECOND),
            9 => rng.gen_range(1000..=1_000_000_000_000_000_000),
            _ => rng.gen_range(1..=1000u64) * 1000,
        };
        decimal(micros, rng)
    };
    Limit { algorithm, a: size.to_string(), b }
}

/// Microseconds as decimal seconds, in the spellings the parser takes:
/// trailing zeros or not, a leading dot, a trailing dot, and at times a
/// seventh decimal or more (rounded half up by both modes).
fn decimal(us: u64, rng: &mut StdRng) -> String {
    let (whole, fraction) = (us / SECOND, us % SECOND);
    match rng.gen_range(0..12) {
        0 if fraction == 0 => format!("{whole}."),
        1 if whole == 0 => format!(".{fraction:06}"),
        2 => {
            // One microsecond less and a seventh decimal: rounds to `us`
            // at 5 and above.
            let less = us.saturating_sub(1);
            let digit = rng.gen_range(0..10);
            format!("{}.{:06}{digit}{}", less / SECOND, less % SECOND, rng.gen_range(0..100))
        }
        3 if fraction == 0 => whole.to_string(),
        4 => format!("00{whole}.{fraction:06}"),
        _ => {
            let text = format!("{whole}.{fraction:06}");
            text.trim_end_matches('0').to_string()
        }
    }
}

/// A bad value for argument position `what` (0: a, 1: b, 2: now, 3: n).
fn bad_value(rng: &mut StdRng, what: usize, algorithm: &str) -> String {
    let bad = match what {
        0 => ["0", "9007199254740992", "-1", "1.5", "nan", "", " 1", "18446744073709551616"]
            .choose(rng)
            .unwrap()
            .to_string(),
        1 if is_bucket(algorithm) => {
            ["0", "0.0000004", "1000000000000.000001", "-1", "1e3", "inf", "", "."]
                .choose(rng)
                .unwrap()
                .to_string()
        }
        1 => ["0.0009", "1000000000000.000001", "0", "-1", "1e3", "nan", "1..2"]
            .choose(rng)
            .unwrap()
            .to_string(),
        2 => ["253402300800", "253402300799.9999995", "-1", "**", "1,5", "", "1e9"]
            .choose(rng)
            .unwrap()
            .to_string(),
        _ => ["9007199254740992", "-1", "1.0", "", "x", "18446744073709551616"]
            .choose(rng)
            .unwrap()
            .to_string(),
    };
    bad
}

/// A lease id: mostly the small ones a key gives out (held, run out,
/// released or never given), at times 0 or the largest.
fn random_lease_id(rng: &mut StdRng) -> String {
    match rng.gen_range(0..20) {
        0 => "0".into(),
        1 => MAX_UNITS.to_string(),
        2 => rng.gen_range(1..=MAX_UNITS).to_string(),
        _ => rng.gen_range(1..=6u64).to_string(),
    }
}

fn random_count(rng: &mut StdRng, size: &str) -> String {
    let size: u64 = size.parse().unwrap_or(1);
    match rng.gen_range(0..40) {
        0..=3 => "0".into(),
        4..=17 => "1".into(),
        18..=29 => rng.gen_range(0..=size.min(1_000_000_000_000)).to_string(),
        30..=31 => size.to_string(),
        32..=33 => (size + 1).to_string(),
        34 => MAX_UNITS.to_string(),
        35 => rng.gen_range(0..=MAX_UNITS).to_string(),
        _ => rng.gen_range(1..=size.min(5)).to_string(),
    }
}

/// A characteristic time of a limit, in microseconds: its window, or the
/// time to refill its whole bucket.
fn span_us(limit: &Limit) -> u64 {
    let micros = |text: &str| -> u128 {
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let whole: u128 = whole.parse().unwrap_or(0);
        let digits: String = fraction.chars().chain("000000".chars()).take(6).collect();
        whole * 1_000_000 + digits.parse::<u128>().unwrap_or(0)
    };
    let b = micros(&limit.b).max(1);
    let span = if is_bucket(limit.algorithm) {
        u128::from(limit.a.parse::<u64>().unwrap_or(1)) * 1_000_000_000_000 / b
    } else {
        b
    };
    span.min(u128::from(MAX_TIME_US)) as u64
}

/// One key's random sequence of calls, given times only, with up to two
/// more keys (of their own algorithms) that RL.MULTI calls combine with it.
fn random_sequence(
    rng: &mut StdRng,
    tag: &str,
    algorithm: &'static str,
    length: usize,
) -> Vec<Call> {
    let mut keys = vec![(format!("{{{tag}}}:main"), random_limit(rng, algorithm))];
    for side in 0..rng.gen_range(0..=2) {
        let other = ALGORITHMS.choose(rng).unwrap();
        keys.push((format!("{{{tag}}}:side{side}"), random_limit(rng, other)));
    }
    let mut now: u64 = match rng.gen_range(0..10) {
        0..=3 => 1_700_000_000 * SECOND + rng.gen_range(0..1_000_000_000 * SECOND),
        4..=5 => rng.gen_range(0..1000 * SECOND),
        6..=7 => MAX_TIME_US - rng.gen_range(0..1000 * SECOND),
        _ => rng.gen_range(0..=MAX_TIME_US),
    };
    let mut calls = Vec::with_capacity(length);
    for _ in 0..length {
        // Parameters change now and then (a shrunk capacity, a new window).
        if rng.gen_range(0..20) == 0 {
            let index = rng.gen_range(0..keys.len());
            keys[index].1 = random_limit(rng, keys[index].1.algorithm);
        }
        let span = span_us(&keys[0].1).max(1000);
        let gap: i128 = match rng.gen_range(0..20) {
            0..=5 => 0,
            6..=9 => rng.gen_range(0..=1000),
            10..=13 => rng.gen_range(0..=span.min(u64::MAX / 4) / 8 + 1).into(),
            14..=16 => rng.gen_range(0..=span.saturating_mul(2)).into(),
            17 => rng.gen_range(0..=MAX_TIME_US / 4).into(),
            _ => -i128::from(rng.gen_range(0..=span.min(100 * SECOND))),
        };
        now = (i128::from(now) + gap).clamp(0, i128::from(MAX_TIME_US)) as u64;
        let now_text = match rng.gen_range(0..200) {
            0 => bad_value(rng, 2, ""),
            1 => MAX_TIME_US.to_string().split_at(12).0.to_string() + ".999999",
            _ => decimal(now, rng),
        };
        calls.push(random_call(rng, &keys, now_text, true, false));
    }
    calls
}

/// A take, peek, refund or RL.MULTI on the sequence's keys at `now`, and
/// on a concurrency key a release or a renewal; one call in fifty has a
/// bad argument, and one in a hundred names another algorithm than the key
/// holds. `refunds`: refunds and releases too (calls that can delete a
/// key).
/// `slow`: counts from 0 to 3 and never another algorithm than the key's
/// (whose parameters, a window taken for a rate, would expire the key
/// within milliseconds).
fn random_call(
    rng: &mut StdRng,
    keys: &[(String, Limit)],
    now: String,
    refunds: bool,
    slow: bool,
) -> Call {
    let op = match rng.gen_range(0..20) {
        0..=10 => Op::Take,
        11..=12 => Op::Peek,
        13..=15 if refunds => Op::Refund,
        13..=15 => Op::Take,
        _ => Op::Multi,
    };
    let mut chosen: Vec<&(String, Limit)> = if op == Op::Multi {
        let mut all: Vec<_> = keys.iter().collect();
        all.shuffle(rng);
        all.truncate(rng.gen_range(1..=keys.len()));
        all
    } else {
        vec![&keys[0]]
    };
    if op != Op::Multi && keys.len() > 1 && rng.gen_range(0..4) == 0 {
        chosen = vec![keys.choose(rng).unwrap()];
    }
    let mut specs: Vec<(String, Limit, String)> = chosen
        .iter()
        .map(|(key, limit)| {
            let mut limit = limit.clone();
            if !slow && rng.gen_range(0..100) == 0 {
                limit.algorithm = ALGORITHMS.choose(rng).unwrap();
            }
            let n =
                if slow { rng.gen_range(0..4).to_string() } else { random_count(rng, &limit.a) };
            (key.clone(), limit, n)
        })
        .collect();
    let op = match rng.gen_range(0..10) {
        _ if op != Op::Take || specs[0].1.algorithm != "CONCURRENCY" => op,
        0..=2 if refunds => Op::Release,
        3..=4 => Op::Renew,
        _ => Op::Take,
    };
    let mut id = random_lease_id(rng);
    let mut now = now;
    if rng.gen_range(0..50) == 0 {
        let what = rng.gen_range(0..4);
        let spec = &mut specs[0];
        match what {
            0 => spec.1.a = bad_value(rng, 0, spec.1.algorithm),
            1 => spec.1.b = bad_value(rng, 1, spec.1.algorithm),
            2 => now = bad_value(rng, 2, ""),
            _ => spec.2 = bad_value(rng, 3, ""),
        }
        if what == 0 {
            id = ["-1", "x", "", "1.5", "9007199254740992"].choose(rng).unwrap().to_string();
        }
    }
    let keys: Vec<String> = specs.iter().map(|s| s.0.clone()).collect();
    let counts: Vec<String> = specs.iter().map(|s| s.2.clone()).collect();
    let (key, limit, n) = &specs[0];
    let args: Vec<String> = match op {
        Op::Take => {
            let mut args = vec![
                take_command(limit.algorithm),
                key.clone(),
                limit.a.clone(),
                limit.b.clone(),
                now,
            ];
            // n left out means 1.
            if !(n == "1" && rng.gen_range(0..3) == 0) {
                args.push(n.clone());
            }
            args
        }
        Op::Peek => {
            let mut args = vec![
                "RL.PEEK".into(),
                key.clone(),
                limit.algorithm.to_lowercase(),
                limit.a.clone(),
                limit.b.clone(),
                now,
            ];
            if !(n == "1" && rng.gen_range(0..3) == 0) {
                args.push(n.clone());
            }
            args
        }
        Op::Release => vec!["RL.RELEASE".into(), key.clone(), id, now],
        Op::Renew => vec!["RL.RENEW".into(), key.clone(), id, limit.b.clone(), now],
        Op::Refund => vec![
            "RL.REFUND".into(),
            key.clone(),
            limit.algorithm.into(),
            limit.a.clone(),
            limit.b.clone(),
            now,
            n.clone(),
        ],
        Op::Multi => {
            let mut args = vec!["RL.MULTI".into(), specs.len().to_string()];
            args.extend(keys.iter().cloned());
            args.push(now);
            for (_, limit, n) in &specs {
                args.extend([
                    limit.algorithm.to_string(),
                    limit.a.clone(),
                    limit.b.clone(),
                    n.clone(),
                ]);
            }
            args
        }
    };
    // Command names in any case, as both modes take them.
    let mut args = args;
    if rng.gen_range(0..10) == 0 {
        args[0] = args[0].to_lowercase();
    }
    let counts = if op == Op::Take && args.len() == 5 { vec!["1".into()] } else { counts };
    let counts = if op == Op::Peek { vec!["0".into()] } else { counts };
    Call { op, args, keys, counts }
}

// --- Running and comparing ------------------------------------------------

/// What one server answered to one call: the reply and each key's
/// PEXPIRETIME after it.
struct Answer {
    reply: Value,
    expiry: Vec<i64>,
}

/// Runs `calls` on `con` (as script calls when `form` is given), each
/// followed by PEXPIRETIME of its keys; in one MULTI/EXEC when `atomic`.
/// Returns the answers and the client's clock before and after, in ms.
fn run(
    con: &mut redis::Connection,
    form: Option<&Form>,
    calls: &[Call],
    atomic: bool,
) -> (Vec<Answer>, (i64, i64)) {
    let mut pipe = redis::pipe();
    if atomic {
        pipe.atomic();
    }
    pipe.ignore_errors();
    for call in calls {
        let args = match form {
            Some(form) => as_script(form, &call.args),
            None => call.args.clone(),
        };
        pipe.cmd(&args[0]).arg(&args[1..]);
        for key in &call.keys {
            pipe.cmd("PEXPIRETIME").arg(key);
        }
    }
    let before = client_us() / 1000;
    let replies: Vec<Value> = pipe.query(con).expect("the pipeline");
    let after = client_us().div_ceil(1000);
    let mut replies = replies.into_iter();
    let answers = calls
        .iter()
        .map(|call| {
            let reply = replies.next().expect("a reply");
            let expiry = call
                .keys
                .iter()
                .map(|_| match replies.next() {
                    Some(Value::Int(at)) => at,
                    other => panic!("PEXPIRETIME: {other:?}"),
                })
                .collect();
            Answer { reply, expiry }
        })
        .collect();
    (answers, (before as i64, after as i64))
}

fn int(value: &Value) -> i64 {
    match value {
        Value::Int(i) => *i,
        other => panic!("{other:?} is not an integer"),
    }
}

fn array(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) => items,
        other => panic!("{other:?} is not an array"),
    }
}

/// For each key of the call, the `reset_after_ms` it was written with, or
/// `None` when the contract says the call leaves it alone.
fn writes(call: &Call, reply: &Value, existed: &[bool]) -> Vec<Option<i64>> {
    let none = vec![None; call.keys.len()];
    if matches!(reply, Value::ServerError(_)) {
        return none;
    }
    let counted = |i: usize| call.counts[i] != "0";
    match call.op {
        Op::Peek => none,
        Op::Take => {
            let fields = array(reply);
            vec![(int(&fields[0]) == 1 && counted(0)).then(|| int(&fields[4]))]
        }
        Op::Refund => {
            let fields = array(reply);
            vec![(existed[0] && counted(0)).then(|| int(&fields[4]))]
        }
        // `[released or renewed, held, reset_after_ms]`
        Op::Release | Op::Renew => {
            let fields = array(reply);
            vec![(int(&fields[0]) == 1).then(|| int(&fields[2]))]
        }
        Op::Multi => {
            let reply = array(reply);
            let allowed = int(&reply[0]) == 1;
            (0..call.keys.len())
                .map(|i| (allowed && counted(i)).then(|| int(&array(&reply[2 + i])[4])))
                .collect()
        }
    }
}

/// Checks every call's effect on the keys' expiry on one server: a write
/// expires `reset_after_ms` after the server's clock at the call, which
/// lies within `clock` (ms), or deletes the key when that is 0; anything
/// else leaves the expiry as it was. `expiry` holds each key's PEXPIRETIME
/// so far (-2: missing) and is brought up to date.
fn check_expiry(
    mode: &str,
    calls: &[Call],
    answers: &[Answer],
    clock: (i64, i64),
    expiry: &mut std::collections::HashMap<String, i64>,
) {
    for (call, answer) in calls.iter().zip(answers) {
        let existed: Vec<bool> =
            call.keys.iter().map(|k| *expiry.get(k).unwrap_or(&-2) != -2).collect();
        let written = writes(call, &answer.reply, &existed);
        for ((key, at), reset) in call.keys.iter().zip(&answer.expiry).zip(written) {
            let previous = *expiry.get(key).unwrap_or(&-2);
            match reset {
                Some(0) => assert_eq!(*at, -2, "{mode}: {call:?} left its key"),
                Some(reset) => assert!(
                    (clock.0..=clock.1).contains(&(at - reset)),
                    "{mode}: {call:?} -> {}: expires at {at}, not {reset} ms after a time in {clock:?}",
                    show(&answer.reply)
                ),
                None => {
                    assert_eq!(
                        *at,
                        previous,
                        "{mode}: {call:?} -> {} changed the expiry",
                        show(&answer.reply)
                    )
                }
            }
            expiry.insert(key.clone(), *at);
        }
    }
}

/// Script mode's refusal of a reply Lua cannot return exactly.
const REPLY_RANGE: &str = "ERR rate is too slow for the queue this key holds: a reply would pass 9007199254740991 ms, beyond what script mode returns exactly (the module returns it); nothing was changed";

/// Whether a reply holds an integer that Lua cannot return exactly.
fn past_2_53(value: &Value) -> bool {
    match value {
        Value::Int(i) => i.unsigned_abs() > MAX_UNITS,
        Value::Array(items) => items.iter().any(past_2_53),
        _ => false,
    }
}

/// Runs the calls on both servers in one transaction each and compares
/// every reply exactly; checks both servers' expiries. Where the module
/// replies with an integer past 2^53 (a leaky bucket's long queue under a
/// shrunk capacity at a slow rate) script mode must refuse with
/// REPLY_RANGE; a refund there changes the module's key but not the
/// script's, so the sequence is compared up to that call. Returns the
/// module's replies to the calls compared.
fn compare_exactly(
    module: &mut redis::Connection,
    script: &mut redis::Connection,
    form: &Form,
    calls: &[Call],
) -> Vec<Value> {
    let (ours, module_clock) = run(module, None, calls, true);
    let (theirs, script_clock) = run(script, Some(form), calls, true);
    let mut compared = calls.len();
    // A key that may have expired before a call, on either server, ends
    // the comparison there: its expiry is on the server's clock, which
    // runs on while the calls run (each script call in a transaction
    // reads the clock anew), so one server may see the key and the other
    // not. Keys whose reset is a few milliseconds (windows of 0.001 s)
    // end their sequences early.
    let deadline = module_clock.1.max(script_clock.1) + 1;
    let mut expiry = std::collections::HashMap::<&str, i64>::new();
    for (i, ((call, m), s)) in calls.iter().zip(&ours).zip(&theirs).enumerate() {
        let at_risk = call
            .keys
            .iter()
            .any(|key| expiry.get(key.as_str()).is_some_and(|&at| at != -2 && at <= deadline));
        if at_risk {
            compared = i;
            break;
        }
        for (key, (&a, &b)) in call.keys.iter().zip(m.expiry.iter().zip(&s.expiry)) {
            let earliest = if a == -2 {
                b
            } else if b == -2 {
                a
            } else {
                a.min(b)
            };
            expiry.insert(key, earliest);
        }
        let wide = past_2_53(&m.reply);
        let expected = if wide { REPLY_RANGE.to_string() } else { show(&m.reply) };
        assert_eq!(
            show(&s.reply),
            expected,
            "call {i} of the sequence {:#?}\nscript mode differs from the module on {:?}",
            &calls[..=i].iter().map(|c| c.args.join(" ")).collect::<Vec<_>>(),
            call.args
        );
        if wide {
            compared = i;
            break;
        }
    }
    let calls = &calls[..compared];
    check_expiry("module", calls, &ours[..compared], module_clock, &mut Default::default());
    check_expiry("script", calls, &theirs[..compared], script_clock, &mut Default::default());
    ours.into_iter().take(compared).map(|answer| answer.reply).collect()
}

fn algorithm_of(call: &Call) -> Vec<String> {
    match call.op {
        Op::Take if call.args[0].eq_ignore_ascii_case("RL.ACQUIRE") => vec!["CONCURRENCY".into()],
        Op::Take => vec![call.args[0][3..].to_uppercase()],
        Op::Release | Op::Renew => vec!["CONCURRENCY".into()],
        Op::Peek | Op::Refund => vec![call.args[2].to_uppercase()],
        Op::Multi => {
            let count = call.keys.len();
            (0..count).map(|i| call.args[3 + count + 4 * i].to_uppercase()).collect()
        }
    }
}

fn random_sequences_on_given_times_agree_exactly(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let mut rng = StdRng::seed_from_u64(0x5c41f7);
    let mut per_algorithm = std::collections::HashMap::<String, usize>::new();
    // What the concurrency calls did: leases taken (and with an id past
    // 1), acquires denied, releases and renewals of held leases and of
    // others.
    let mut leases = std::collections::BTreeMap::<&str, usize>::new();
    let mut total = 0;
    for (index, algorithm) in ALGORITHMS.iter().cycle().take(ALGORITHMS.len() * 600).enumerate() {
        let calls = random_sequence(&mut rng, &format!("s{index}"), algorithm, 25);
        let replies = compare_exactly(module, script, &modes.form, &calls);
        for (call, reply) in calls.iter().zip(&replies) {
            for name in algorithm_of(call) {
                *per_algorithm.entry(name).or_default() += 1;
            }
            let Value::Array(fields) = reply else { continue };
            let what = match (call.op, fields.as_slice()) {
                (Op::Take, [Value::Int(1), .., Value::Int(id)])
                    if call.args[0].eq_ignore_ascii_case("RL.ACQUIRE") =>
                {
                    if *id > 1 {
                        "acquired, id > 1"
                    } else if *id == 1 {
                        "acquired, id 1"
                    } else {
                        "looked"
                    }
                }
                (Op::Take, [Value::Int(0), ..])
                    if call.args[0].eq_ignore_ascii_case("RL.ACQUIRE") =>
                {
                    "denied"
                }
                (Op::Release, [Value::Int(done), ..]) => {
                    if *done == 1 {
                        "released"
                    } else {
                        "release of no lease"
                    }
                }
                (Op::Renew, [Value::Int(done), ..]) => {
                    if *done == 1 {
                        "renewed"
                    } else {
                        "renewal of no lease"
                    }
                }
                _ => continue,
            };
            *leases.entry(what).or_default() += 1;
        }
        total += replies.len();
    }
    eprintln!("calls compared per algorithm: {per_algorithm:?} ({total} calls in all)");
    eprintln!("concurrency: {leases:?}");
    for algorithm in ALGORITHMS {
        assert!(per_algorithm[algorithm] >= 10_000, "{algorithm}: {per_algorithm:?}");
    }
    for what in [
        "acquired, id 1",
        "acquired, id > 1",
        "looked",
        "denied",
        "released",
        "release of no lease",
        "renewed",
        "renewal of no lease",
    ] {
        assert!(leases.get(what).copied().unwrap_or(0) >= 100, "{what}: {leases:?}");
    }
}

/// The function form, as the clients load it: the library and its one
/// function are named for the version, a library of another version loads
/// beside it under its own name, and random sequences of every command,
/// called through either, agree with the module exactly.
#[test]
fn the_function_library_agrees_with_the_module() {
    let modes = modes(fcall);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let (other_name, other_library) = common::function_library(&format!("{SCRIPT}-- v2\n"));
    assert_ne!(other_name, modes.form.target);
    let loaded: String =
        redis::cmd("FUNCTION").arg("LOAD").arg(&other_library).query(script).unwrap();
    assert_eq!(loaded, other_name);
    let mut listed = functions(script);
    listed.sort();
    let mut expected = vec![
        (modes.form.target.clone(), vec![modes.form.target.clone()]),
        (other_name.clone(), vec![other_name.clone()]),
    ];
    expected.sort();
    assert_eq!(listed, expected);
    let other = Form { command: "FCALL", target: other_name };
    let mut rng = StdRng::seed_from_u64(0xf0ca11);
    let mut compared = 0;
    for (index, algorithm) in ALGORITHMS.iter().cycle().take(ALGORITHMS.len() * 20).enumerate() {
        let calls = random_sequence(&mut rng, &format!("f{index}"), algorithm, 25);
        let form = if index % 2 == 0 { &modes.form } else { &other };
        compared += compare_exactly(module, script, form, &calls).len();
    }
    assert!(compared >= 2000, "{compared} calls compared");
}

/// The exact product the script computes in doubles (muldiv in its shared
/// helpers: floor((a * b + plus) / c) and the remainder, for a and b below
/// 2^53, through Dekker's split products when a * b passes 2^53), against
/// u128 arithmetic: 200,000 cases, half of them with a * b within a few
/// units of a multiple of c, where the quotient of the rounded product is
/// off by one. The helper is called inside the script, through a library
/// made of the file's parts and a function of the test's own.
#[test]
fn exact_products_in_doubles_agree_with_u128() {
    let parts = SCRIPT.split("\nif redis.register_function").next().expect("the parts");
    let library = format!(
        "#!lua name=muldiv_check\n{parts}\n{}",
        r#"redis.register_function('muldiv_check', function(keys, args)
            local out = {}
            part('base')
            for i = 1, #args, 4 do
                wide = false
                local q, r = muldiv(tonumber(args[i]), tonumber(args[i + 1]), tonumber(args[i + 2]), tonumber(args[i + 3]))
                out[#out + 1] = to_text(q) .. ' ' .. to_text(r)
            end
            return out
        end)"#
    );
    let server = start_without_module(&[]);
    let con = &mut server.connect();
    let _: String =
        redis::cmd("FUNCTION").arg("LOAD").arg(library).query(con).expect("FUNCTION LOAD");
    let mut rng = StdRng::seed_from_u64(0xd3c4e5);
    // A number below 2^bits, bits from 1 to `most`: every magnitude.
    let below = |rng: &mut StdRng, most: u32| {
        let bits = rng.gen_range(1..=most);
        rng.gen_range(0..1u64 << bits)
    };
    let (mut near, mut past) = (0, 0);
    for _ in 0..200 {
        let mut cases = Vec::new();
        for i in 0..1000 {
            let c = 1 + below(&mut rng, 52);
            let a = 1 + below(&mut rng, 52);
            let plus = if i % 3 == 0 { below(&mut rng, 30) } else { 0 };
            let b = if i % 2 == 0 {
                // a * b close to q * c.
                let q = 1 + below(&mut rng, 52);
                let b =
                    (u128::from(q) * u128::from(c) / u128::from(a)) as i128 + rng.gen_range(-2..=2);
                near += 1;
                b.clamp(0, (1 << 53) - 1) as u64
            } else {
                below(&mut rng, 53)
            };
            past += usize::from(u128::from(a) * u128::from(b) >= 1 << 53);
            cases.push([a, b, c, plus]);
        }
        let args: Vec<String> = cases.iter().flatten().map(u64::to_string).collect();
        let got: Vec<String> =
            redis::cmd("FCALL").arg("muldiv_check").arg(0).arg(&args).query(con).unwrap();
        for ([a, b, c, plus], got) in cases.iter().zip(&got) {
            let n = u128::from(*a) * u128::from(*b) + u128::from(*plus);
            let expected = format!("{} {}", n / u128::from(*c), n % u128::from(*c));
            assert_eq!(*got, expected, "({a} * {b} + {plus}) / {c}");
        }
    }
    assert!(near >= 100_000 && past >= 80_000, "{near} near a multiple, {past} past 2^53");
}

/// The libraries of FUNCTION LIST, each with its functions' names.
fn functions(con: &mut redis::Connection) -> Vec<(String, Vec<String>)> {
    let field = |entry: &Value, name: &str| -> Value {
        let items = array(entry);
        let at =
            items.iter().position(|v| matches!(v, Value::BulkString(b) if b == name.as_bytes()));
        items[at.expect(name) + 1].clone()
    };
    let text = |v: Value| -> String { redis::from_redis_value(v).unwrap() };
    let libraries: Value = redis::cmd("FUNCTION").arg("LIST").query(con).unwrap();
    array(&libraries)
        .iter()
        .map(|library| {
            let names = array(&field(library, "functions"))
                .iter()
                .map(|f| text(field(f, "name")))
                .collect();
            (text(field(library, "library_name")), names)
        })
        .collect()
}

/// Far in the future, where the server's clock (`*`) is behind every key's
/// last update and so counts as no time passed: `*` gets one exact answer.
/// Every key is created first by a take at a given time; no refund (one
/// could delete a key, and a missing key would take the real clock).
fn random_star_sequence(
    rng: &mut StdRng,
    tag: &str,
    algorithm: &'static str,
    length: usize,
) -> Vec<Call> {
    let mut keys = vec![(format!("{{{tag}}}:main"), random_limit(rng, algorithm))];
    for side in 0..rng.gen_range(0..=2) {
        let other = ALGORITHMS.choose(rng).unwrap();
        keys.push((format!("{{{tag}}}:side{side}"), random_limit(rng, other)));
    }
    // After 2100, before the end of 9999 by a margin for the gaps below.
    let mut now = rng.gen_range(4_102_444_800 * SECOND..MAX_TIME_US - 10_000_000 * SECOND);
    let mut calls: Vec<Call> = keys
        .iter()
        .map(|(key, limit)| Call {
            op: Op::Take,
            args: vec![
                take_command(limit.algorithm),
                key.clone(),
                limit.a.clone(),
                limit.b.clone(),
                decimal(now, rng),
                "1".into(),
            ],
            keys: vec![key.clone()],
            counts: vec!["1".into()],
        })
        .collect();
    while calls.len() < length {
        let now_text = if rng.gen_range(0..2) == 0 {
            "*".to_string()
        } else {
            now += rng.gen_range(0..=span_us(&keys[0].1).min(1000 * SECOND) / 4);
            decimal(now, rng)
        };
        calls.push(random_call(rng, &keys, now_text, false, false));
    }
    calls
}

fn the_server_clock_behind_the_keys_agrees_exactly(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let mut rng = StdRng::seed_from_u64(0x57a2);
    let (mut compared, mut stars) = (0, 0);
    for (index, algorithm) in ALGORITHMS.iter().cycle().take(ALGORITHMS.len() * 60).enumerate() {
        let calls = random_star_sequence(&mut rng, &format!("f{index}"), algorithm, 25);
        let done = compare_exactly(module, script, &modes.form, &calls).len();
        compared += done;
        stars += calls[..done].iter().filter(|c| c.args.iter().any(|a| a == "*")).count();
    }
    eprintln!("{compared} calls compared, {stars} of them on the server's clock");
    assert!(stars >= 2000, "{stars} calls on the server's clock");
}

/// One call on one server, not in a transaction: its reply, its keys'
/// PEXPIRETIME after it, and the server's clock (TIME, in ms) just before
/// and just after it.
fn run_timed(
    con: &mut redis::Connection,
    form: Option<&Form>,
    call: &Call,
) -> (Answer, (i64, i64)) {
    let args = match form {
        Some(form) => as_script(form, &call.args),
        None => call.args.clone(),
    };
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("TIME").cmd(&args[0]).arg(&args[1..]).cmd("TIME");
    for key in &call.keys {
        pipe.cmd("PEXPIRETIME").arg(key);
    }
    let replies: Vec<Value> = pipe.query(con).expect("the pipeline");
    let ms = |time: &Value| {
        let parts: Vec<i64> = redis::from_redis_value(time.clone()).expect("TIME");
        parts[0] * 1000 + parts[1] / 1000
    };
    let expiry = replies[3..].iter().map(int).collect();
    (Answer { reply: replies[1].clone(), expiry }, (ms(&replies[0]), ms(&replies[2]) + 1))
}

/// Compares two replies of calls made at instants up to `tolerance` ms
/// apart: every field exactly but the waits (retry_after_ms,
/// reset_after_ms, delay_ms, RL.MULTI's retry_after_ms), which may differ
/// by the tolerance when positive.
fn agree_within(call: &Call, module: &Value, script: &Value, tolerance: i64) -> bool {
    fn fields(module: &[Value], script: &[Value], tolerance: i64, waits: &[usize]) -> bool {
        module.len() == script.len()
            && module.iter().zip(script).enumerate().all(|(i, (m, s))| match (m, s) {
                (Value::Int(m), Value::Int(s)) if waits.contains(&i) && *m > 0 && *s > 0 => {
                    (m - s).abs() <= tolerance
                }
                (m, s) => show(m) == show(s),
            })
    }
    // A limit's waits; a concurrency limit's sixth field is its lease id.
    let waits = |algorithm: &str| -> &[usize] {
        if algorithm == "CONCURRENCY" { &[3, 4] } else { &[3, 4, 5] }
    };
    let algorithms = algorithm_of(call);
    match (module, script) {
        (Value::Array(m), Value::Array(s)) if matches!(m.first(), Some(Value::Int(_))) => {
            match call.op {
                Op::Multi if m.len() == s.len() => {
                    fields(&m[..2], &s[..2], tolerance, &[1])
                        && m[2..].iter().zip(&s[2..]).zip(&algorithms).all(|((m, s), algorithm)| {
                            match (m, s) {
                                (Value::Array(m), Value::Array(s)) => {
                                    fields(m, s, tolerance, waits(algorithm))
                                }
                                _ => false,
                            }
                        })
                }
                Op::Release | Op::Renew => fields(m, s, tolerance, &[2]),
                _ => fields(m, s, tolerance, waits(&algorithms[0])),
            }
        }
        _ => show(module) == show(script),
    }
}

/// `*` on live keys, at rates so slow (a unit per 11.6 days) and windows so
/// long (10^9 s, the current one ending in 2033) that between the two
/// servers' calls, some hundred microseconds apart, nothing refills or
/// slides: `allowed`, `remaining` and `limit` agree exactly, and the waits
/// count down the same milliseconds, so they agree within the time between
/// the two calls, plus, for a sliding log, whose waits run from when its
/// units were logged, the widest such time of the sequence so far (the
/// servers' clocks, both the host's CLOCK_REALTIME, bracket each call). The expiry of every write is checked on each server
/// against its clock just before and after the call: PTTL =
/// reset_after_ms to the millisecond.
fn the_server_clock_agrees_within_the_time_between_the_calls(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let mut rng = StdRng::seed_from_u64(0x7135);
    let slow = |rng: &mut StdRng, algorithm: &'static str| {
        let a = rng.gen_range(1..=if is_bucket(algorithm) { 1_000_000 } else { 20 }).to_string();
        let b = if is_bucket(algorithm) { "0.000001" } else { "1000000000" }.to_string();
        Limit { algorithm, a, b }
    };
    let (mut module_expiry, mut script_expiry) = Default::default();
    let mut checked = 0;
    for (index, algorithm) in ALGORITHMS.iter().cycle().take(ALGORITHMS.len() * 8).enumerate() {
        let mut keys = vec![(format!("{{c{index}}}:main"), slow(&mut rng, algorithm))];
        for side in 0..2 {
            let other = ALGORITHMS.choose(&mut rng).unwrap();
            keys.push((format!("{{c{index}}}:side{side}"), slow(&mut rng, other)));
        }
        let mut widest_gap = 0;
        for _ in 0..40 {
            // Small counts, so that keys fill and empty within the sequence.
            let call = random_call(&mut rng, &keys, "*".into(), true, true);
            let (m, module_clock) = run_timed(module, None, &call);
            let (s, script_clock) = run_timed(script, Some(&modes.form), &call);
            let gap = (script_clock.1 - module_clock.0).max(module_clock.1 - script_clock.0);
            widest_gap = widest_gap.max(gap);
            // A sliding log's waits run from when its units were logged,
            // by an earlier call of the sequence: that call's gap too.
            let tolerance = gap + widest_gap + 1;
            assert!(
                agree_within(&call, &m.reply, &s.reply, tolerance),
                "{:?}: module {} script {} (tolerance {tolerance} ms)",
                call.args,
                show(&m.reply),
                show(&s.reply)
            );
            for (mode, answer, clock, seen) in [
                ("module", &m, module_clock, &mut module_expiry),
                ("script", &s, script_clock, &mut script_expiry),
            ] {
                check_expiry(
                    mode,
                    std::slice::from_ref(&call),
                    std::slice::from_ref(answer),
                    clock,
                    seen,
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, ALGORITHMS.len() * 8 * 40);
}

/// A call in raw bytes (arguments that are not UTF-8 included), on the
/// module, or as a script call when `form` is given.
fn raw_call(con: &mut redis::Connection, form: Option<&Form>, call: &[&[u8]]) -> Value {
    raw_cmd(form, call).query::<Value>(con).unwrap_or_else(|e| {
        Value::ServerError(
            redis::ServerError::try_from(e).unwrap_or_else(|e| panic!("not a server error: {e}")),
        )
    })
}

/// The command `raw_call` sends.
fn raw_cmd(form: Option<&Form>, call: &[&[u8]]) -> redis::Cmd {
    let Some(form) = form else {
        let mut cmd = redis::cmd(std::str::from_utf8(call[0]).unwrap());
        cmd.arg(&call[1..]);
        return cmd;
    };
    let multi = call[0].eq_ignore_ascii_case(b"RL.MULTI");
    let count = if multi {
        std::str::from_utf8(call.get(1).copied().unwrap_or(b"0")).unwrap().parse().unwrap()
    } else {
        usize::from(call.len() > 1)
    };
    let (keys, rest) = if multi {
        call[2..].split_at(count.min(call.len() - 2))
    } else {
        call[1..].split_at(count)
    };
    let mut cmd = redis::cmd(form.command);
    cmd.arg(&form.target).arg(keys.len()).arg(keys).arg(call[0]).arg(rest);
    cmd
}

/// Calls in one MULTI/EXEC (the server's clock stands still for its keys'
/// expiry), each reply as `raw_call` gives it.
fn raw_session(con: &mut redis::Connection, form: Option<&Form>, calls: &[&[&str]]) -> Vec<Value> {
    let mut pipe = redis::pipe();
    pipe.atomic().ignore_errors();
    for call in calls {
        let parts: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
        // Only the RL.* calls go through the script.
        pipe.add_command(raw_cmd(form.filter(|_| call[0].starts_with("RL.")), &parts));
    }
    pipe.query(con).expect("the session")
}

/// Each key's DUMP and PEXPIRETIME.
fn snapshot(con: &mut redis::Connection, keys: &[&str]) -> Vec<(Option<Vec<u8>>, i64)> {
    common::snapshot(con, keys)
}

/// Every error case of tests/bad_input.rs and of the composite commands,
/// on keys that hold state (slow limits, so nothing expires during the
/// test) and keys of other Redis types: script mode answers the module's
/// error, and no key changes on either server.
fn bad_input_gets_the_module_errors_and_changes_nothing(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let setup: [&[&str]; 11] = [
        // Lease 1 (2 slots) until 1100 s, lease 2 (1 slot) until 1050 s.
        &["RL.ACQUIRE", "c", "5", "100", "1000", "2"],
        &["RL.ACQUIRE", "c", "5", "50", "1000", "1"],
        &["RL.TOKENBUCKET", "tb", "10", "0.001", "1700000000", "3"],
        &["RL.LEAKYBUCKET", "lb", "10", "0.001", "1700000000", "3"],
        &["RL.FIXEDWINDOW", "fw", "10", "100000", "1700000000", "3"],
        &["RL.SLIDINGWINDOW", "sw", "10", "100000", "1700000000", "3"],
        &["RL.SLIDINGLOG", "sl", "10", "100000", "1700000000", "3"],
        &["SET", "string", "v"],
        &["RPUSH", "list", "v"],
        &["HSET", "hash", "f", "v"],
        &["SADD", "set", "v"],
    ];
    for call in setup {
        let bytes: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
        let form = call[0].starts_with("RL.").then_some(&modes.form);
        assert!(!matches!(raw_call(module, None, &bytes), Value::ServerError(_)));
        assert!(!matches!(raw_call(script, form, &bytes), Value::ServerError(_)));
    }
    let keys = ["c", "tb", "lb", "fw", "sw", "sl", "string", "list", "hash", "set", "fresh"];
    let before = (snapshot(module, &keys), snapshot(script, &keys));

    let mut cases: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut add = |parts: &[&[u8]]| cases.push(parts.iter().map(|p| p.to_vec()).collect());
    let firsts: [&[u8]; 13] = [
        b"nan",
        b"inf",
        b"1e400",
        b"-1",
        b"0",
        b"",
        b"1.5",
        b"\xff",
        b"9007199254740992",
        b"18446744073709551616",
        b"99999999999999999999999",
        b" 10",
        b"+1",
    ];
    let seconds: [&[u8]; 16] = [
        b"nan",
        b"inf",
        b"-inf",
        b"1e400",
        b"-1",
        b"0",
        b"",
        b"\xc3\x28",
        b"0.0000004",
        b"99999999999999999999",
        b"1000000000000.000001",
        b"0.0009",
        b"1e3",
        b".",
        b"1..2",
        b"1,5",
    ];
    let nows: [&[u8]; 11] = [
        b"nan",
        b"inf",
        b"-1",
        b"1e400",
        b"",
        b"**",
        b"\xff\xfe",
        b"1700000000,5",
        b"253402300800",
        b"253402300799.9999995",
        b"000000000000000000001",
    ];
    let counts: [&[u8]; 8] =
        [b"1.5", b"-1", b"nan", b"", b"18446744073709551616", b"9007199254740992", b"\x80", b"1e3"];
    for (command, key, second) in [
        (&b"RL.TOKENBUCKET"[..], &b"tb"[..], &b"1"[..]),
        (b"RL.LEAKYBUCKET", b"lb", b"1"),
        (b"RL.FIXEDWINDOW", b"fw", b"10"),
        (b"RL.SLIDINGWINDOW", b"sw", b"10"),
        (b"RL.SLIDINGLOG", b"sl", b"10"),
    ] {
        for first in firsts {
            add(&[command, key, first, second, b"*"]);
        }
        for b in seconds {
            // 0.0009 is a window too short, and a rate like any other.
            if !(b == b"0.0009" && second == b"1") {
                add(&[command, key, b"10", b, b"*"]);
            }
        }
        if second == b"1" {
            add(&[command, key, b"1000001", b"0.000001", b"*"]);
            add(&[command, key, b"9007199254740991", b"9007.199254", b"*"]);
        }
        for now in nows {
            add(&[command, key, b"10", second, now]);
        }
        for n in counts {
            add(&[command, key, b"10", second, b"*", n]);
        }
        add(&[command, key, b"10", second]);
        add(&[command, key]);
        add(&[command]);
        add(&[command, key, b"10", second, b"*", b"1", b"x"]);
        // Several errors at once: the module's order decides which one.
        add(&[command, key, b"0", b"0", b"x", b"x"]);
        add(&[command, key, b"10", b"0", b"x", b"x"]);
        add(&[command, key, b"10", second, b"x", b"1", b"x"]);
        add(&[command, key, b"0", second, b"*", b"1", b"x"]);
        // Keys of other Redis types and of other algorithms, looking or not.
        for other in [&b"string"[..], b"list", b"hash", b"set", b"tb", b"sl"] {
            if other != key {
                add(&[command, other, b"10", second, b"*", b"1"]);
                add(&[command, other, b"10", second, b"*", b"0"]);
            }
        }
    }
    for (algorithm, key, second) in [
        (&b"TOKENBUCKET"[..], &b"tb"[..], &b"1"[..]),
        (b"leakyBucket", b"lb", b"1"),
        (b"FIXEDWINDOW", b"fw", b"10"),
        (b"slidingwindow", b"sw", b"10"),
        (b"SLIDINGLOG", b"sl", b"10"),
    ] {
        add(&[b"RL.PEEK", key, b"GCRA", b"10", second, b"*"]);
        add(&[b"RL.PEEK", key, algorithm, b"0", second, b"*"]);
        add(&[b"RL.PEEK", key, algorithm, b"10", b"0", b"*"]);
        add(&[b"RL.PEEK", key, algorithm, b"10", second, b"-1"]);
        add(&[b"RL.PEEK", key, algorithm, b"10", second, b"*", b"-1"]);
        add(&[b"RL.PEEK", key, algorithm, b"10", second, b"*", b"1", b"x"]);
        add(&[b"RL.PEEK", key, algorithm, b"10", second]);
        add(&[b"RL.PEEK", b"string", algorithm, b"10", second, b"*"]);
        add(&[b"RL.REFUND", key, b"GCRA", b"10", second, b"*", b"1"]);
        add(&[b"RL.REFUND", key, algorithm, b"10", second, b"*"]);
        add(&[b"RL.REFUND", key, algorithm, b"10", second, b"*", b"1", b"1"]);
        add(&[b"RL.REFUND", key, algorithm, b"9007199254740992", second, b"*", b"1"]);
        add(&[b"RL.REFUND", key, algorithm, b"10", second, b"*", b"x"]);
        add(&[b"RL.REFUND", key, algorithm, b"10", second, b"nan", b"1"]);
        add(&[b"RL.REFUND", b"list", algorithm, b"10", second, b"*", b"1"]);
        add(&[b"RL.MULTI", b"1", key, b"*", b"GCRA", b"10", second, b"1"]);
        add(&[b"RL.MULTI", b"1", key, b"*", algorithm, b"10", second, b"1", b"extra"]);
        add(&[b"RL.MULTI", b"1", key, b"*", algorithm, b"10", second]);
        add(&[b"RL.MULTI", b"2", key, b"fresh", b"*", algorithm, b"10", second, b"1"]);
        add(&[b"RL.MULTI", b"0", key, b"*", algorithm, b"10", second, b"1"]);
        add(&[b"RL.MULTI", b"1", key, b"x", algorithm, b"10", second, b"1"]);
        add(&[b"RL.MULTI", b"1", key, b"*", algorithm, b"0", second, b"1"]);
        add(&[b"RL.MULTI", b"1", key, b"*", algorithm, b"10", second, b"-1"]);
        add(&multi_two(
            [key, key],
            b"*",
            [algorithm, b"10", second, b"1"],
            [algorithm, b"10", second, b"1"],
        ));
        // The limits' arguments before `now`, before repeated keys.
        add(&multi_two(
            [key, key],
            b"x",
            [algorithm, b"10", second, b"1"],
            [algorithm, b"0", second, b"1"],
        ));
        add(&multi_two(
            [key, key],
            b"x",
            [algorithm, b"10", second, b"1"],
            [algorithm, b"10", second, b"1"],
        ));
        // Every key's type before anything changes: the fresh key first.
        add(&multi_two(
            [b"fresh", b"string"],
            b"*",
            [algorithm, b"10", second, b"1"],
            [algorithm, b"10", second, b"1"],
        ));
        add(&multi_two(
            [b"fresh", b"tb"],
            b"*",
            [algorithm, b"10", second, b"1"],
            [b"SLIDINGLOG", b"10", b"10", b"1"],
        ));
    }
    // tests/bad_input.rs's bad_lease_calls_change_nothing, but for
    // RL.LEASEAPPLY (the module's replication form).
    for id in [&b"-1"[..], b"x", b"", b"1.5", b"9007199254740992"] {
        add(&[b"RL.RELEASE", b"c", id, b"1000"]);
        add(&[b"RL.RENEW", b"c", id, b"10", b"1000"]);
    }
    for lease in [&b"0"[..], b"0.0009", b"-1", b"nan", b"1000000000000.000001", b""] {
        add(&[b"RL.RENEW", b"c", b"1", lease, b"1000"]);
        add(&[b"RL.ACQUIRE", b"c", b"5", lease, b"1000"]);
        add(&[b"RL.PEEK", b"c", b"CONCURRENCY", b"5", lease, b"1000"]);
        add(&[b"RL.MULTI", b"1", b"c", b"1000", b"concurrency", b"5", lease, b"1"]);
    }
    for now in [&b"-1"[..], b"nan", b"253402300800", b"**"] {
        add(&[b"RL.RELEASE", b"c", b"1", now]);
        add(&[b"RL.RENEW", b"c", b"1", b"10", now]);
        add(&[b"RL.ACQUIRE", b"c", b"5", b"10", now]);
    }
    for limit in [&b"0"[..], b"9007199254740992", b"-1", b""] {
        add(&[b"RL.ACQUIRE", b"c", limit, b"10", b"1000"]);
    }
    for n in [&b"-1"[..], b"9007199254740992", b"1.5"] {
        add(&[b"RL.ACQUIRE", b"c", b"5", b"10", b"1000", n]);
    }
    add(&[b"RL.RELEASE", b"c", b"1"]);
    add(&[b"RL.RELEASE", b"c", b"1", b"1000", b"1"]);
    add(&[b"RL.RENEW", b"c", b"1", b"1000"]);
    add(&[b"RL.RENEW", b"c", b"1", b"10", b"1000", b"1"]);
    add(&[b"RL.ACQUIRE", b"c", b"5", b"10"]);
    add(&[b"RL.ACQUIRE", b"c", b"5", b"10", b"1000", b"1", b"1"]);
    // Several errors at once: the id before the lease before the time.
    add(&[b"RL.RENEW", b"c", b"x", b"0", b"x"]);
    add(&[b"RL.RENEW", b"c", b"1", b"0", b"x"]);
    add(&[b"RL.RELEASE", b"c", b"x", b"x"]);
    add(&[b"RL.REFUND", b"c", b"CONCURRENCY", b"5", b"100", b"1000", b"1"]);
    add(&[b"RL.REFUND", b"c", b"CONCURRENCY", b"5", b"0", b"1000", b"1"]);
    add(&[b"RL.REFUND", b"tb", b"CONCURRENCY", b"5", b"100", b"1000", b"1"]);
    for key in [&b"tb"[..], b"string", b"list"] {
        add(&[b"RL.RELEASE", key, b"1", b"1000"]);
        add(&[b"RL.RENEW", key, b"1", b"10", b"1000"]);
        add(&[b"RL.ACQUIRE", key, b"5", b"10", b"1000"]);
        add(&[b"RL.ACQUIRE", key, b"5", b"10", b"1000", b"0"]);
        add(&[b"RL.PEEK", key, b"CONCURRENCY", b"5", b"10", b"1000"]);
        add(&multi_two(
            [b"fresh", key],
            b"1000",
            [b"CONCURRENCY", b"5", b"10", b"1"],
            [b"CONCURRENCY", b"5", b"10", b"1"],
        ));
    }
    // A concurrency key is no other algorithm's.
    add(&[b"RL.TOKENBUCKET", b"c", b"10", b"1", b"1000"]);
    add(&[b"RL.PEEK", b"c", b"SLIDINGLOG", b"10", b"1", b"1000"]);
    add(&multi_two(
        [b"fresh", b"c"],
        b"1000",
        [b"CONCURRENCY", b"5", b"10", b"1"],
        [b"FIXEDWINDOW", b"5", b"10", b"1"],
    ));
    // More keys than RL.MULTI takes (1000): refused before anything else.
    let mut too_many: Vec<Vec<u8>> = vec![b"RL.MULTI".to_vec(), b"1001".to_vec()];
    too_many.extend((0..1001).map(|i| format!("many:{i}").into_bytes()));
    too_many.push(b"*".to_vec());
    for _ in 0..1001 {
        too_many.extend([&b"TOKENBUCKET"[..], b"10", b"1", b"1"].map(|p| p.to_vec()));
    }
    cases.push(too_many);
    assert!(cases.len() >= 400, "{} cases", cases.len());
    for case in &cases {
        let parts: Vec<&[u8]> = case.iter().map(|p| p.as_slice()).collect();
        let ours = raw_call(module, None, &parts);
        let theirs = raw_call(script, Some(&modes.form), &parts);
        let printable: Vec<String> =
            parts.iter().map(|p| String::from_utf8_lossy(p).into()).collect();
        assert!(
            matches!(ours, Value::ServerError(_)),
            "{printable:?}: the module answered {}",
            show(&ours)
        );
        assert_eq!(show(&theirs), show(&ours), "{printable:?}");
    }
    assert_eq!(
        (snapshot(module, &keys), snapshot(script, &keys)),
        before,
        "a bad call changed a key"
    );
    // Releasing or renewing what is not held answers, and changes nothing.
    for (call, reply) in [
        (&[&b"RL.RELEASE"[..], b"c", b"0", b"1000"][..], "[0, 3, 100000]"),
        (&[b"RL.RENEW", b"c", b"9", b"10", b"1000"], "[0, 3, 100000]"),
        (&[b"RL.RELEASE", b"fresh", b"1", b"1000"], "[0, 0, 0]"),
        (&[b"RL.RENEW", b"fresh", b"1", b"10", b"1000"], "[0, 0, 0]"),
    ] {
        assert_eq!(show(&raw_call(module, None, call)), reply);
        assert_eq!(show(&raw_call(script, Some(&modes.form), call)), reply);
    }
    assert_eq!((snapshot(module, &keys), snapshot(script, &keys)), before);
}

/// What only script mode can meet: a string that holds script state of
/// another version, or a damaged one, and a key of the module's own type
/// (a server with the module, the script called there too). Each is
/// refused with its error, and the key is left as it was.
fn stored_values_that_script_mode_did_not_write_are_refused(load: Load) {
    let modes = modes(load);
    let script = &mut modes.script.connect();
    const CORRUPT: &str = "ERR the key holds a damaged script-mode state (rl1:...): script mode did not write it; it is left unchanged";
    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    let cases: &[(&str, &str, &str)] = &[
        ("TOKENBUCKET", "rl1:tb:abc:1", CORRUPT),
        ("TOKENBUCKET", "rl1:tb:01:5", CORRUPT),
        ("TOKENBUCKET", "rl1:tb:1:05", CORRUPT),
        ("TOKENBUCKET", "rl1:tb:9007199254740991000000000001:1", CORRUPT),
        ("TOKENBUCKET", "rl1:tb:1:253402300800000000", CORRUPT),
        ("TOKENBUCKET", "rl1:tb:1:2:3", CORRUPT),
        ("TOKENBUCKET", "rl1:tb:", CORRUPT),
        ("TOKENBUCKET", "rl1:tb:1 :2", CORRUPT),
        ("LEAKYBUCKET", "rl1:lb:0:1", CORRUPT),
        ("LEAKYBUCKET", "rl1:lb:-1:1", CORRUPT),
        ("FIXEDWINDOW", "rl1:fw:1:0", CORRUPT),
        ("FIXEDWINDOW", "rl1:fw:1:9007199254740992", CORRUPT),
        ("SLIDINGWINDOW", "rl1:sw:1:0:0", CORRUPT),
        ("SLIDINGWINDOW", "rl1:sw:1:2", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:0", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:1,", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:1,x", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:9007199254740991,1:1", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:253402300799999999:1,1:1", CORRUPT),
        // Leading zeros, and a count of 16 digits, on the runs read at once.
        ("SLIDINGLOG", "rl1:sl:5:1,01:1", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:1,1:01", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:1;1:1", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:1,,1:1", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:1,0:1;0:1", CORRUPT),
        ("SLIDINGLOG", "rl1:sl:5:1,1:9007199254740992", CORRUPT),
        ("SLIDINGLOG", "rl2:tb:1:1", WRONGTYPE),
        ("TOKENBUCKET", "rl2:tb:1:1", WRONGTYPE),
        ("TOKENBUCKET", "rl1:lb:1:1", WRONGTYPE),
        ("SLIDINGLOG", "rl1:fw:1:1", WRONGTYPE),
        ("FIXEDWINDOW", "tokens=5", WRONGTYPE),
        // Leases: none, no next id, a lease cut short or run out by the
        // last update, or longer than the longest lease; no slot; ids not
        // rising from 1 or not below the next id, which is at most 2^53;
        // more than 2^53 - 1 slots; a time after 9999; leading zeros.
        ("CONCURRENCY", "rl1:cc:", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:6", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:6:1,", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:6:1:7", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:5:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:1000000000000000006:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:6:0", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:0:6:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:4:2:6:1,2:7:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:4:3:6:1,2:7:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:2:6:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:9007199254740993:1:6:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:4:1:6:9007199254740991,2:6:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:253402300800000000:2:1:253402300800000001:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:05:2:1:6:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:01:6:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:6:1 ", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:06:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:2:1:6:01", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:3:1:6:1,02:7:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:3:1:6:1;2:7:1", CORRUPT),
        ("CONCURRENCY", "rl1:cc:5:3:1:6:1,,2:7:1", CORRUPT),
        // A lease ending past 2^52 (the call goes wide), then one run out.
        ("CONCURRENCY", "rl1:cc:5:3:1:4503599627370497:1,2:5:1", CORRUPT),
        ("CONCURRENCY", "rl1:fw:1:1", WRONGTYPE),
        ("TOKENBUCKET", "rl1:cc:5:2:1:6:1", WRONGTYPE),
        ("SLIDINGLOG", "rl1:cc:5:2:1:6:1", WRONGTYPE),
    ];
    // The next version's layout (next_log): a head of other widths, sums
    // that are not the runs', no unit, a first live run not at the head's
    // end or after a comma, or past the end, a time after 9999; and a log
    // in it read for another algorithm.
    let next = |units: &str, newest: &str, first: &str, offset: usize, runs: &str| {
        format!("rl2:sl:{units}:{newest}:{first}:{offset:010}:{runs}")
    };
    let (one, two, five) = ("0000000000000001", "0000000000000002", "000000000000000005");
    let next_cases = [
        ("SLIDINGLOG", "rl2:sl:".to_string(), CORRUPT),
        ("SLIDINGLOG", next("000000000000001", five, five, 73, "5:1"), CORRUPT),
        ("SLIDINGLOG", next(one, "00000000000000005", five, 73, "5:1"), CORRUPT),
        ("SLIDINGLOG", next(one, five, "0000000000000000005", 73, "5:1"), CORRUPT),
        ("SLIDINGLOG", next(two, five, five, 73, "5:1"), CORRUPT),
        ("SLIDINGLOG", next(one, "000000000000000006", five, 73, "5:1"), CORRUPT),
        ("SLIDINGLOG", next(two, "000000000000000007", five, 73, "5:1,1:1"), CORRUPT),
        ("SLIDINGLOG", next("0000000000000000", five, five, 73, "5:0"), CORRUPT),
        ("SLIDINGLOG", next(one, five, five, 72, "5:1"), CORRUPT),
        ("SLIDINGLOG", next(one, five, five, 78, "5:1,12:1"), CORRUPT),
        ("SLIDINGLOG", next(one, five, five, 76, "5:1"), CORRUPT),
        ("SLIDINGLOG", next(one, five, five, 73, "5:1,x"), CORRUPT),
        ("SLIDINGLOG", next(one, "253402300800000000", "253402300800000000", 73, "5:1"), CORRUPT),
        ("TOKENBUCKET", next(one, five, five, 73, "5:1"), WRONGTYPE),
        ("CONCURRENCY", next(one, five, five, 73, "5:1"), WRONGTYPE),
    ];
    // Lease sets in it: the same, and an earliest end past a lease's (a
    // time at or before it is right), a latest end that is not the
    // latest, a lease run out by the last update; and a set read for
    // other algorithms.
    // (`ends`: the latest, then the time at or before the earliest.)
    let set =
        |last: &str, next_id: &str, held: &str, ends: [&str; 2], offset: usize, leases: &str| {
            format!("rl2:cc:{last}:{next_id}:{held}:{}:{}:{offset:010}:{leases}", ends[0], ends[1])
        };
    let (six, seven) = ("000000000000000006", "000000000000000007");
    let next_cases = next_cases.into_iter().chain([
        ("CONCURRENCY", "rl2:cc:".to_string(), CORRUPT),
        ("CONCURRENCY", set("00000000000000005", two, one, [six, six], 109, "1:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, "000000000000002", one, [six, six], 109, "1:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, two, "000000000000001", [six, six], 109, "1:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, two, one, [six, "00000000000000006"], 109, "1:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, two, two, [six, six], 109, "1:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, two, one, [six, seven], 109, "1:6:1"), CORRUPT),
        (
            "CONCURRENCY",
            set(five, "0000000000000003", two, [six, six], 109, "1:6:1,2:7:1"),
            CORRUPT,
        ),
        ("CONCURRENCY", set(five, two, one, [six, six], 108, "1:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, "0000000000000013", one, [six, six], 110, "12:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, two, one, [six, six], 114, "1:6:1"), CORRUPT),
        ("CONCURRENCY", set(five, two, one, [five, five], 109, "1:5:1"), CORRUPT),
        ("CONCURRENCY", set(five, two, one, [six, six], 109, "1:6:1,x"), CORRUPT),
        ("TOKENBUCKET", set(five, two, one, [six, six], 109, "1:6:1"), WRONGTYPE),
        ("SLIDINGLOG", set(five, two, one, [six, six], 109, "1:6:1"), WRONGTYPE),
    ]);
    let cases =
        cases.iter().map(|&(algorithm, value, expected)| (algorithm, value.to_string(), expected));
    for (algorithm, value, expected) in cases.chain(next_cases) {
        let value = value.as_str();
        let _: () =
            redis::cmd("SET").arg("k").arg(value).arg("PX").arg(100_000_000).query(script).unwrap();
        let before = snapshot(script, &["k"]);
        let second = if is_bucket(algorithm) { "1" } else { "10" };
        let concurrency = algorithm == "CONCURRENCY";
        for call in [
            vec![take_command(algorithm), "k".into(), "10".into(), second.into(), "*".into()],
            vec![
                "RL.PEEK".into(),
                "k".into(),
                algorithm.into(),
                "10".into(),
                second.into(),
                "*".into(),
            ],
            vec![
                "RL.REFUND".into(),
                "k".into(),
                algorithm.into(),
                "10".into(),
                second.into(),
                "*".into(),
                "1".into(),
            ],
            vec![
                "RL.MULTI".into(),
                "1".into(),
                "k".into(),
                "*".into(),
                algorithm.into(),
                "10".into(),
                second.into(),
                "1".into(),
            ],
            vec!["RL.RELEASE".into(), "k".into(), "1".into(), "*".into()],
            vec!["RL.RENEW".into(), "k".into(), "1".into(), "10".into(), "*".into()],
        ] {
            let lease_call = call[0] == "RL.RELEASE" || call[0] == "RL.RENEW";
            if lease_call
                && !concurrency
                && (value.starts_with("rl1:cc:") || value.starts_with("rl2:cc:"))
            {
                continue; // leases that are whole, taken for another algorithm
            }
            let parts: Vec<&[u8]> = call.iter().map(|p| p.as_bytes()).collect();
            let reply = raw_call(script, Some(&modes.form), &parts);
            let expected = if call[0] == "RL.REFUND" && concurrency {
                "ERR a concurrency limit takes no refund: release its lease with RL.RELEASE"
            } else if lease_call && !concurrency {
                // Any value that is not leases is another algorithm's.
                WRONGTYPE
            } else {
                expected
            };
            assert_eq!(show(&reply), expected, "{value}: {call:?}");
            assert_eq!(snapshot(script, &["k"]), before, "{value}: {call:?} changed the key");
        }
    }

    // A key of the module's type, on a server with the module.
    let module = &mut modes.module.connect();
    let form = load(module);
    assert_eq!(common::ints(module, &["RL.TOKENBUCKET", "m", "10", "0.001", "*", "3"])[0], 1);
    let before = snapshot(module, &["m"]);
    let both_modes = "WRONGTYPE the key holds module-mode state (the redis-ratelimit module's type); script mode cannot use it: give each mode its own key prefix";
    for call in [
        &["RL.TOKENBUCKET", "m", "10", "0.001", "*"][..],
        &["RL.SLIDINGLOG", "m", "10", "10", "*", "0"],
        &["RL.PEEK", "m", "TOKENBUCKET", "10", "0.001", "*"],
        &["RL.REFUND", "m", "TOKENBUCKET", "10", "0.001", "*", "1"],
        &["RL.MULTI", "1", "m", "*", "TOKENBUCKET", "10", "0.001", "1"],
        &["RL.ACQUIRE", "m", "10", "10", "*"],
        &["RL.RELEASE", "m", "1", "*"],
        &["RL.RENEW", "m", "1", "10", "*"],
        &["RL.PEEK", "m", "CONCURRENCY", "10", "10", "*"],
    ] {
        let parts: Vec<&[u8]> = call.iter().map(|p| p.as_bytes()).collect();
        assert_eq!(show(&raw_call(module, Some(&form), &parts)), both_modes, "{call:?}");
        assert_eq!(snapshot(module, &["m"]), before, "{call:?} changed the key");
    }
}

/// A cluster of three primaries without the module: the script, loaded on
/// every node, called on the node that serves the keys' slot, answers as
/// the module does on a server of its own; keys of two slots get Redis's
/// CROSSSLOT.
fn a_cluster_without_the_module_agrees_with_the_module(load: Load) {
    let nodes = start_cluster_without_module(3);
    let forms: Vec<Form> = nodes.iter().map(|node| load(&mut node.connect())).collect();
    let form = &forms[0];
    let module_server = Server::start(&[]);
    let module = &mut module_server.connect();
    let mut rng = StdRng::seed_from_u64(0xc105);
    let mut compared = 0;
    let mut served = std::collections::HashSet::new();
    for (index, algorithm) in ALGORITHMS.iter().cycle().take(ALGORITHMS.len() * 30).enumerate() {
        let tag = format!("k{index}");
        let calls = random_sequence(&mut rng, &tag, algorithm, 25);
        let node = node_serving(&nodes, &format!("{{{tag}}}"));
        served.insert(node.port);
        compared += compare_exactly(module, &mut node.connect(), form, &calls).len();
    }
    assert_eq!(served.len(), 3, "the sequences' keys spread over every node");
    assert!(compared >= 2500, "{compared} calls compared");
    let con = &mut nodes[0].connect();
    let cross: Vec<&[u8]> = vec![
        b"RL.MULTI",
        b"2",
        b"{a}:x",
        b"{b}:x",
        b"*",
        b"TOKENBUCKET",
        b"1",
        b"1",
        b"1",
        b"FIXEDWINDOW",
        b"1",
        b"1",
        b"1",
    ];
    let reply = show(&raw_call(con, Some(form), &cross));
    assert!(reply.starts_with("CROSSSLOT"), "{reply}");
}

/// The session of docs/script-mode.md, line by line, on
/// a server without the module: each `> command` gives the line after it.
/// Its FUNCTION LOAD and SCRIPT LOAD load the file as the clients do;
/// `ratelimit_<v>` and `<sha1>` stand for what they return.
#[test]
fn the_script_mode_session_runs_as_shown() {
    let doc = include_str!("../docs/script-mode.md");
    let block = doc.split("```").nth(1).expect("its session");
    let server = start_without_module(&[]);
    let con = &mut server.connect();
    let (mut sha, mut library) = (String::new(), String::new());
    let mut lines = block.lines().filter(|line| !line.trim().is_empty());
    let mut ran = 0;
    while let Some(line) = lines.next() {
        let command = line.strip_prefix("> ").unwrap_or_else(|| panic!("not a command: {line}"));
        let expected = lines.next().expect("a reply");
        let reply = if command.starts_with("SCRIPT LOAD") {
            sha = evalsha(con).target;
            "\"<sha1>\"".to_string()
        } else if command.starts_with("FUNCTION LOAD") {
            library = fcall(con).target;
            "\"ratelimit_<v>\"".to_string()
        } else {
            let args: Vec<String> = command
                .split_whitespace()
                .map(|a| a.replace("<sha1>", &sha).replace("ratelimit_<v>", &library))
                .collect();
            let mut cmd = redis::cmd(&args[0]);
            cmd.arg(&args[1..]);
            match cmd.query::<Value>(con) {
                Ok(value) => show(&value),
                Err(e) => {
                    format!("(error) {} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
                }
            }
        };
        assert_eq!(reply, expected, "{command}");
        ran += 1;
    }
    assert_eq!(ran, 10);
}

/// The one corner where script mode is narrower: a leaky bucket whose
/// queue (16,562,844 units, left by a capacity of 18,446,745) is far
/// longer than the call's capacity (2), at 0.000001 a second, waits
/// 1.66 * 10^16 ms, past the 2^53 that Lua returns exactly. The module
/// replies the figure; script mode refuses the take, the look and the
/// refund with REPLY_RANGE and changes nothing (the module's refund does).
fn replies_past_2_53_are_refused_and_change_nothing(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let fill = ["RL.LEAKYBUCKET", "q", "18446745", "0.011593", "1000", "16562844"];
    let fill: Vec<&[u8]> = fill.iter().map(|a| a.as_bytes()).collect();
    let filled = show(&raw_call(module, None, &fill));
    assert_eq!(filled, "[1, 1883901, 18446745, 0, 1428693521953, 0]");
    assert_eq!(show(&raw_call(script, Some(&modes.form), &fill)), filled);
    let before = snapshot(script, &["q"]);
    for call in [
        &["RL.LEAKYBUCKET", "q", "2", "0.000001", "1000", "1"][..],
        &["RL.LEAKYBUCKET", "q", "2", "0.000001", "1000", "0"],
        &["RL.PEEK", "q", "LEAKYBUCKET", "2", "0.000001", "1000"],
        &["RL.MULTI", "1", "q", "1000", "LEAKYBUCKET", "2", "0.000001", "1"],
        &["RL.MULTI", "1", "q", "1000", "LEAKYBUCKET", "2", "0.000001", "0"],
        &["RL.REFUND", "q", "LEAKYBUCKET", "2", "0.000001", "1000", "1"],
    ] {
        let parts: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
        let ours = raw_call(module, None, &parts);
        assert!(past_2_53(&ours), "{call:?}: the module replied {}", show(&ours));
        assert_eq!(show(&raw_call(script, Some(&modes.form), &parts)), REPLY_RANGE, "{call:?}");
        assert_eq!(snapshot(script, &["q"]), before, "{call:?} changed the key");
    }
}

/// Random arguments, valid or not, from a pool of tokens (numbers at and
/// past every bound, decimals in odd spellings, bytes that are not ASCII,
/// names in any case), each call on a key of its own: script mode answers
/// exactly as the module, so no input reaches a Lua error of its own. (No
/// `*`: on a fresh key a window's reply depends on the instant.)
fn random_arguments_get_the_module_replies(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let mut rng = StdRng::seed_from_u64(0xf022);
    let tokens: &[&[u8]] = &[
        b"0",
        b"1",
        b"2",
        b"10",
        b"9007199254740991",
        b"9007199254740992",
        b"18446744073709551616",
        b"-1",
        b"+1",
        b"1.5",
        b".5",
        b"5.",
        b".",
        b"",
        b" ",
        b"1e3",
        b"nan",
        b"inf",
        b"**",
        b"0.000001",
        b"0.0000005",
        b"0.0000004",
        b"0.001",
        b"0.0009",
        b"1000000000000",
        b"1000000000000.000001",
        b"253402300799.999999",
        b"253402300800",
        b"1700000000.123456789",
        b"\xff",
        b"\x00",
        b"tokenbucket",
        b"LEAKYBUCKET",
        b"FixedWindow",
        b"SLIDINGWINDOW",
        b"slidinglog",
        b"CONCURRENCY",
        b"Concurrency",
        b"GCRA",
        b"00000000000000000001",
        b"000000000000000000001",
    ];
    let commands: &[&[u8]] = &[
        b"RL.TOKENBUCKET",
        b"rl.tokenbucket",
        b"RL.LEAKYBUCKET",
        b"RL.FIXEDWINDOW",
        b"RL.SLIDINGWINDOW",
        b"RL.SLIDINGLOG",
        b"RL.PEEK",
        b"RL.REFUND",
        b"RL.MULTI",
        b"Rl.Peek",
        b"RL.ACQUIRE",
        b"rl.acquire",
        b"RL.RELEASE",
        b"RL.RENEW",
    ];
    for i in 0..3000 {
        let command = *commands.choose(&mut rng).unwrap();
        let key = format!("z{i}");
        let mut call: Vec<Vec<u8>> = vec![command.to_vec()];
        if command.eq_ignore_ascii_case(b"RL.MULTI") {
            let count = rng.gen_range(1..=2);
            call.push(count.to_string().into_bytes());
            for k in 0..count {
                call.push(format!("{{{key}}}:{k}").into_bytes());
            }
        } else {
            call.push(key.into_bytes());
        }
        for _ in 0..rng.gen_range(2..=9) {
            call.push(tokens.choose(&mut rng).unwrap().to_vec());
        }
        let parts: Vec<&[u8]> = call.iter().map(|p| p.as_slice()).collect();
        let ours = raw_call(module, None, &parts);
        let theirs = raw_call(script, Some(&modes.form), &parts);
        let printable: Vec<String> =
            parts.iter().map(|p| String::from_utf8_lossy(p).into()).collect();
        let expected = if past_2_53(&ours) { REPLY_RANGE.to_string() } else { show(&ours) };
        assert_eq!(show(&theirs), expected, "{printable:?}");
    }
}

/// Concurrency at the ends of its ranges, exactly: the largest limit, `n`
/// and lease at the last microsecond of 9999, the shortest lease, the
/// largest lease id, and a key that has given out every id (written with
/// RL.SETSTATE on the module, as its `rl1:cc` string in script mode)
/// refusing new leases until its last one is gone, then starting again
/// from 1. The last release deletes the key on both servers.
fn concurrency_at_the_ends_of_its_ranges_agrees_exactly(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let far = (client_us() / 1000 + 1_000_000_000).to_string();
    let _: () = redis::cmd("RL.SETSTATE")
        .arg("spent")
        .arg("CONCURRENCY")
        .arg(&["1000000000", "9007199254740992", "9007199254740991", "1001000000", "1"])
        .arg("PXAT")
        .arg(&far)
        .query(module)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("spent")
        .arg("rl1:cc:1000000000:9007199254740992:9007199254740991:1001000000:1")
        .arg("PXAT")
        .arg(&far)
        .query(script)
        .unwrap();
    let max = "9007199254740991";
    let end = "253402300799.999999";
    let session: &[(&[&str], &str)] = &[
        // Every id given: none until lease 9007199254740991 is gone.
        (&["RL.ACQUIRE", "spent", "5", "10", "1000", "1"], "[0, 4, 5, 1000, 1000, 0]"),
        (&["RL.ACQUIRE", "spent", "5", "10", "1000", "0"], "[1, 4, 5, 0, 1000, 0]"),
        (&["RL.PEEK", "spent", "CONCURRENCY", "5", "10", "1000"], "[0, 4, 5, 1000, 1000, 0]"),
        (&["RL.RENEW", "spent", max, "10", "1000"], "[1, 1, 10000]"),
        (&["RL.ACQUIRE", "spent", "5", "10", "1009.999999", "1"], "[0, 4, 5, 1, 1, 0]"),
        (&["RL.ACQUIRE", "spent", "5", "10", "1010", "1"], "[1, 4, 5, 0, 10000, 1]"),
        (&["RL.ACQUIRE", "spent", "5", "10", "1010", "1"], "[1, 3, 5, 0, 10000, 2]"),
        (&["RL.RELEASE", "spent", max, "1010"], "[0, 2, 10000]"),
        // The largest limit, n and lease at the end of 9999.
        (
            &["RL.ACQUIRE", "top", max, "1000000000000", end, max],
            "[1, 0, 9007199254740991, 0, 1000000000000000, 1]",
        ),
        (
            &["RL.ACQUIRE", "top", max, "1000000000000", end, "1"],
            "[0, 0, 9007199254740991, 1000000000000000, 1000000000000000, 0]",
        ),
        (
            &["RL.ACQUIRE", "top", max, "1000000000000", end, "9007199254740992"],
            "ERR n must be an integer from 0 to 9007199254740991",
        ),
        (&["RL.RENEW", "top", "1", "0.001", end], "[1, 9007199254740991, 1]"),
        (&["PEXPIRE", "top", "100000000"], "1"),
        (
            &["RL.RENEW", "top", "1", "1000000000000", end],
            "[1, 9007199254740991, 1000000000000000]",
        ),
        (
            &["RL.RENEW", "top", max, "1000000000000", end],
            "[0, 9007199254740991, 1000000000000000]",
        ),
        (&["RL.RELEASE", "top", "1", end], "[1, 0, 0]"),
        // A lease ending past 2^52 microseconds (`now` and the lease each
        // below) beside a short one.
        (&["RL.ACQUIRE", "mixed", "5", "10", "600000000", "1"], "[1, 4, 5, 0, 10000, 1]"),
        (
            &["RL.ACQUIRE", "mixed", "5", "4000000000", "600000001", "1"],
            "[1, 3, 5, 0, 4000000000000, 2]",
        ),
        (&["RL.RELEASE", "mixed", "2", "600000001"], "[1, 1, 9000]"),
        (&["RL.RELEASE", "mixed", "1", "600000001"], "[1, 0, 0]"),
        // The shortest lease, counted to the microsecond.
        (&["RL.ACQUIRE", "short", "1", "0.001", "1000", "1"], "[1, 0, 1, 0, 1, 1]"),
        (&["PEXPIRE", "short", "100000000"], "1"),
        (&["RL.ACQUIRE", "short", "1", "0.001", "1000.000999", "1"], "[0, 0, 1, 1, 1, 0]"),
        (&["RL.RELEASE", "short", "1", "1000.001"], "[0, 0, 0]"),
        (
            &["RL.MULTI", "1", "short", "1000.001", "CONCURRENCY", "1", "0.001", "1"],
            "[1, 0, [1, 0, 1, 0, 1, 1]]",
        ),
        (&["PEXPIRE", "short", "100000000"], "1"),
        (
            &["RL.ACQUIRE", "short", "1", "0.0005", "1000.001", "0"],
            "ERR lease must be a decimal number of seconds from 0.001 to 1000000000000",
        ),
        (&["RL.RELEASE", "short", "1", "1000.001"], "[1, 0, 0]"),
    ];
    // In one transaction on each server, and the keys that a call leaves
    // to expire 1 ms later (the shortest lease) given longer by PEXPIRE: a
    // script reads the clock when it starts, even in a transaction, so on a
    // loaded machine the key could be gone for the next call.
    let calls: Vec<&[&str]> = session.iter().map(|(call, _)| *call).collect();
    let module_replies = raw_session(module, None, &calls);
    let script_replies = raw_session(script, Some(&modes.form), &calls);
    for (((call, expected), m), s) in session.iter().zip(&module_replies).zip(&script_replies) {
        assert_eq!(show(m), *expected, "module: {call:?}");
        assert_eq!(show(s), *expected, "script: {call:?}");
    }
    let state: Option<String> = redis::cmd("GET").arg("spent").query(script).unwrap();
    assert_eq!(state.as_deref(), Some("rl1:cc:1010000000:3:1:1020000000:1,2:1020000000:1"));
    for con in [module, script] {
        let exists: i64 = redis::cmd("EXISTS").arg(&["top", "short", "mixed"]).query(con).unwrap();
        assert_eq!(exists, 0, "the last release deletes the key");
    }
}

/// A function library keeps the leases of the value it last wrote to a
/// key; whatever else comes to hold the key is read from its text: another
/// key's value copied over it, and the value an RL.MULTI that one of its
/// limits refused did not write.
fn lease_sets_are_read_from_the_stored_value(load: Load) {
    let server = start_without_module(&[]);
    let con = &mut server.connect();
    let form = load(con);
    let session: &[(&[&str], &str)] = &[
        (&["RL.ACQUIRE", "c", "5", "100", "1000", "2"], "[1, 3, 5, 0, 100000, 1]"),
        (&["RL.ACQUIRE", "c", "5", "100", "1000", "1"], "[1, 2, 5, 0, 100000, 2]"),
        (&["RL.ACQUIRE", "d", "5", "100", "1000", "1"], "[1, 4, 5, 0, 100000, 1]"),
        // c now holds d's one lease (1 slot, the next id 2), not its own 3.
        (&["COPY", "d", "c", "REPLACE"], "1"),
        (&["RL.ACQUIRE", "c", "5", "100", "1000", "0"], "[1, 4, 5, 0, 100000, 0]"),
        (&["RL.ACQUIRE", "c", "5", "100", "1000", "1"], "[1, 3, 5, 0, 100000, 2]"),
        // The token bucket refuses 2: c's new lease is not written.
        (
            &[
                "RL.MULTI",
                "2",
                "c",
                "t",
                "1000",
                "CONCURRENCY",
                "5",
                "100",
                "1",
                "TOKENBUCKET",
                "1",
                "1",
                "2",
            ],
            "[0, -1, [1, 3, 5, 0, 100000, 0], [0, 1, 1, -1, 0]]",
        ),
        (&["RL.ACQUIRE", "c", "5", "100", "1000", "0"], "[1, 3, 5, 0, 100000, 0]"),
        (&["RL.RELEASE", "c", "2", "1000"], "[1, 1, 100000]"),
        (&["RL.RENEW", "c", "1", "200", "1000"], "[1, 1, 200000]"),
        (&["RL.PEEK", "c", "CONCURRENCY", "5", "100", "1000", "1"], "[1, 3, 5, 0, 200000, 0]"),
        (&["RL.ACQUIRE", "c", "5", "100", "1100", "4"], "[1, 0, 5, 0, 100000, 3]"),
        (&["RL.ACQUIRE", "c", "5", "100", "1100", "1"], "[0, 0, 5, 100000, 100000, 0]"),
        (&["GET", "c"], r#""rl1:cc:1100000000:4:1:1200000000:1,3:1200000000:4""#),
    ];
    let calls: Vec<&[&str]> = session.iter().map(|(call, _)| *call).collect();
    let replies = raw_session(con, Some(&form), &calls);
    for ((call, expected), reply) in session.iter().zip(&replies) {
        assert_eq!(show(reply), *expected, "{call:?}");
    }
}

/// Each call of `calls` through `form`, then PEXPIRETIME and GET of each
/// of its keys, in one MULTI/EXEC: per call, the reply and the keys'
/// values as text, and their expiry; and the client's clock after, in ms.
fn replies_and_values(
    con: &mut redis::Connection,
    form: &Form,
    calls: &[Call],
) -> (Vec<(String, Vec<i64>)>, i64) {
    let mut pipe = redis::pipe();
    pipe.atomic().ignore_errors();
    for call in calls {
        let args = as_script(form, &call.args);
        pipe.cmd(&args[0]).arg(&args[1..]);
        for key in &call.keys {
            pipe.cmd("PEXPIRETIME").arg(key).cmd("GET").arg(key);
        }
    }
    let replies: Vec<Value> = pipe.query(con).expect("the pipeline");
    let after = client_us().div_ceil(1000) as i64;
    let mut replies = replies.iter();
    let answers = calls
        .iter()
        .map(|call| {
            let mut text = show(replies.next().expect("a reply"));
            let mut expiry = Vec::new();
            for _ in &call.keys {
                expiry.push(int(replies.next().expect("PEXPIRETIME")));
                text += &format!(" {}", show(replies.next().expect("GET")));
            }
            (text, expiry)
        })
        .collect();
    (answers, after)
}

/// A function library keeps the sums of the sliding logs and lease sets it
/// wrote, and does not read such a value again; EVALSHA keeps nothing and
/// reads every value whole. Random sequences on given times through each
/// (every command on logs and lease sets, with the other algorithms in
/// RL.MULTI) get the same replies and leave the same values after every
/// call, up to a key that may have expired on one server and not the
/// other (as in compare_exactly). First, one log is taken across the
/// point where the kept sums start again: logs past 192 bytes fill most of
/// the 8 MB the library keeps their sums in (each counts its bytes and
/// 600), and the log's runs take it past that.
#[test]
fn kept_sums_write_what_reading_the_whole_value_writes() {
    let (kept, whole) = (start_without_module(&[]), start_without_module(&[]));
    let (kept, whole) = (&mut kept.connect(), &mut whole.connect());
    let (through_fcall, through_evalsha) = (fcall(kept), evalsha(whole));
    // A take of one unit on `key` at `now`, of a limit of 1000 in 4 * 10^9 s
    // (below 2^52 us, where a call stays plain and its log is kept).
    let take = |key: &str, now: String| Call {
        op: Op::Take,
        args: ["RL.SLIDINGLOG", key, "1000", "4000000000", &now, "1"].map(String::from).to_vec(),
        keys: vec![key.to_string()],
        counts: vec!["1".to_string()],
    };
    // 10,418 logs of 205 bytes (`rl1:sl:1700000000000000:1`, then
    // `,270000000000001:1` ten times) fill most of the 8 MB.
    let mut fill = redis::pipe();
    for i in 0..10_418 {
        for j in 0..11u64 {
            let now = format!("{}.{j:06}", 1_700_000_000 + 270_000_000 * j);
            let call = as_script(&through_fcall, &take(&format!("fill:{i}"), now).args);
            fill.cmd(&call[0]).arg(&call[1..]).ignore();
        }
    }
    let () = fill.query(kept).expect("the logs filling the library's");
    // Then one log, a run of 13 bytes a call (`,1000000001:1`), kept from
    // its 14th call on and taken past the 8 MB; then 5 units given back
    // and 3 more taken.
    let at = |j: u64| format!("{}.{j:06}", 1_700_000_000 + 1000 * j);
    let mut across: Vec<Call> = (0..170).map(|j| take("across", at(j))).collect();
    across.push(Call {
        op: Op::Refund,
        args: ["RL.REFUND", "across", "SLIDINGLOG", "1000", "4000000000", &at(170), "5"]
            .map(String::from)
            .to_vec(),
        keys: vec!["across".to_string()],
        counts: vec!["5".to_string()],
    });
    across.extend((171..174).map(|j| take("across", at(j))));
    // (Replies and values: the expiry is on each server's own clock.)
    let texts = |con: &mut redis::Connection, form: &Form| -> Vec<String> {
        replies_and_values(con, form, &across).0.into_iter().map(|(text, _)| text).collect()
    };
    let (a, b) = (texts(kept, &through_fcall), texts(whole, &through_evalsha));
    assert_eq!(a, b, "a log taken across the kept sums' new start: FCALL, EVALSHA");
    let log = format!("rl1:sl:1700000000000000:1{}", ",1000000001:1".repeat(169));
    assert_eq!(a[169], format!("[1, 830, 1000, 0, 4000000000000] \"{log}\""));
    let refunded = &log[..log.len() - 13 * 5];
    assert_eq!(a[170], format!("[1, 835, 1000, 0, 3999994000000] \"{refunded}\""));
    assert_eq!(a.len(), 174);
    let mut rng = StdRng::seed_from_u64(0x5e7);
    let mut compared = 0;
    for index in 0..300 {
        let algorithm = ["SLIDINGLOG", "CONCURRENCY"][index % 2];
        let calls = random_sequence(&mut rng, &format!("k{index}"), algorithm, 60);
        let (a, a_clock) = replies_and_values(kept, &through_fcall, &calls);
        let (b, b_clock) = replies_and_values(whole, &through_evalsha, &calls);
        let deadline = a_clock.max(b_clock) + 1;
        let mut expiry = std::collections::HashMap::<&str, i64>::new();
        for (at, (call, (a, b))) in calls.iter().zip(a.iter().zip(&b)).enumerate() {
            if call
                .keys
                .iter()
                .any(|key| expiry.get(key.as_str()).is_some_and(|&t| t != -2 && t <= deadline))
            {
                break;
            }
            assert_eq!(a.0, b.0, "sequence {index}, call {at} {:?}: FCALL, EVALSHA", call.args);
            for (key, t) in call.keys.iter().zip(a.1.iter().zip(&b.1)) {
                let earliest = if *t.0 == -2 {
                    *t.1
                } else if *t.1 == -2 {
                    *t.0
                } else {
                    *t.0.min(t.1)
                };
                expiry.insert(key, earliest);
            }
            compared += 1;
        }
    }
    eprintln!("{compared} calls compared");
    assert!(compared >= 10_000, "{compared} calls compared");
}

/// A function library appends the new run to a log past 192 bytes (APPEND,
/// then PEXPIRE), never making the whole value, and keeps its sums with the
/// two pieces, the value it read and the run. The next value read is
/// compared with both in place: one of the same length that differs in
/// either piece, written by anything else, is read whole.
#[test]
fn an_appended_log_read_back_is_compared_with_both_pieces() {
    let server = start_without_module(&[]);
    let con = &mut server.connect();
    let form = fcall(con);
    // A log of `first` units at 1700000000 s, then 30 runs of 1 unit 1 ms
    // apart, then `last` (258 bytes with a 7-byte `last`).
    let log = |first: &str, last: &str| {
        format!("rl1:sl:1700000000000000:{first}{}{last}", ",1000:1".repeat(30))
    };
    let take = |con: &mut redis::Connection, ms: u64| -> (String, String, i64) {
        let now = format!("1700000000.{:06}", ms * 1000);
        let call = ["RL.SLIDINGLOG", "log", "1000", "1000", &now, "1"].map(String::from);
        let command = as_script(&form, &call);
        let reply: Value = redis::cmd(&command[0]).arg(&command[1..]).query(con).expect("the take");
        let value: String = redis::cmd("GET").arg("log").query(con).expect("GET");
        let ttl: i64 = redis::cmd("PTTL").arg("log").query(con).expect("PTTL");
        (show(&reply), value, ttl)
    };
    let set = |con: &mut redis::Connection, value: &str| {
        let () = redis::cmd("SET").arg("log").arg(value).query(con).expect("SET");
    };
    // Written by SET: read whole, the run appended (31 units, then 32).
    set(con, &log("1", ""));
    let (reply, value, ttl) = take(con, 31);
    assert_eq!(reply, "[1, 968, 1000, 0, 1000000]");
    assert_eq!(value, log("1", ",1000:1"));
    assert!((999_000..=1_000_000).contains(&ttl), "the appended log's expiry: {ttl}");
    // Read back as appended: its kept sums (33 units).
    let (reply, value, _) = take(con, 32);
    assert_eq!(reply, "[1, 967, 1000, 0, 1000000]");
    assert_eq!(value, log("1", ",1000:1,1000:1"));
    // The same length and run, another first run (2 units, not 1).
    let appended = log("1", ",1000:1,1000:1,1000:1");
    let _ = take(con, 33);
    let other_head = log("2", ",1000:1,1000:1,1000:1");
    assert_eq!(other_head.len(), appended.len());
    set(con, &other_head);
    let (reply, value, _) = take(con, 34);
    assert_eq!(reply, "[1, 964, 1000, 0, 1000000]");
    assert_eq!(value, log("2", ",1000:1,1000:1,1000:1,1000:1"));
    // The same length and first part, another last run (9 ms after the one
    // before it, not 1): the next run is 1 ms after that one.
    let other_tail = log("2", ",1000:1,1000:1,1000:1,9000:1");
    set(con, &other_tail);
    let (reply, value, _) = take(con, 43);
    assert_eq!(reply, "[1, 963, 1000, 0, 1000000]");
    assert_eq!(value, log("2", ",1000:1,1000:1,1000:1,9000:1,1000:1"));
}

/// The words of `RL.MULTI 2 k1 k2 now` and two limits (ALGORITHM a b n each).
fn multi_two<'a>(
    keys: [&'a [u8]; 2],
    now: &'a [u8],
    first: [&'a [u8]; 4],
    second: [&'a [u8]; 4],
) -> Vec<&'a [u8]> {
    let mut words: Vec<&[u8]> = vec![b"RL.MULTI", b"2", keys[0], keys[1], now];
    words.extend(first);
    words.extend(second);
    words
}

/// Sliding logs and lease sets of 300 entries (longer than the 256 leases
/// whose arrays script mode keeps from call to call), then short ones on
/// other keys, then both in one RL.MULTI, in either order: nothing read
/// from a longer one is taken for a shorter one's.
fn long_logs_and_lease_sets_then_short_ones_agree_exactly(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let at = |ms: u64| format!("{}.{:06}", 1_700_000_000 + ms / 1000, ms % 1000 * 1000);
    let call = |op: Op, args: &[&str], keys: &[&str]| Call {
        op,
        args: args.iter().map(|a| a.to_string()).collect(),
        keys: keys.iter().map(|k| k.to_string()).collect(),
        counts: keys.iter().map(|_| "1".to_string()).collect(),
    };
    let mut calls = Vec::new();
    let mut ms = 0;
    let mut tick = || {
        ms += 1;
        at(ms)
    };
    let takes = [
        ("RL.SLIDINGLOG", "log:long", 300),
        ("RL.SLIDINGLOG", "log:short", 3),
        ("RL.ACQUIRE", "leases:long", 300),
        ("RL.ACQUIRE", "leases:short", 2),
    ];
    for (command, key, times) in takes {
        for _ in 0..times {
            calls.push(call(Op::Take, &[command, key, "1000", "1000", &tick(), "1"], &[key]));
        }
    }
    for (algorithm, kind) in [("SLIDINGLOG", "log"), ("CONCURRENCY", "leases")] {
        let (long, short) = (format!("{kind}:long"), format!("{kind}:short"));
        for (first, second) in [(&long, &short), (&short, &long)] {
            let now = tick();
            let spec = [algorithm, "1000", "1000", "1"];
            let mut args = vec!["RL.MULTI", "2", first, second, &now];
            args.extend(spec);
            args.extend(spec);
            calls.push(call(Op::Multi, &args, &[first, second]));
        }
    }
    calls.push(call(
        Op::Renew,
        &["RL.RENEW", "leases:long", "150", "1000", &tick()],
        &["leases:long"],
    ));
    calls.push(call(
        Op::Renew,
        &["RL.RENEW", "leases:short", "2", "1000", &tick()],
        &["leases:short"],
    ));
    calls.push(call(Op::Release, &["RL.RELEASE", "leases:long", "10", &tick()], &["leases:long"]));
    calls.push(call(Op::Release, &["RL.RELEASE", "leases:short", "1", &tick()], &["leases:short"]));
    calls.push(call(
        Op::Take,
        &["RL.SLIDINGLOG", "log:short", "1000", "1000", &tick(), "1"],
        &["log:short"],
    ));
    calls.push(call(
        Op::Take,
        &["RL.ACQUIRE", "leases:short", "1000", "1000", &tick(), "1"],
        &["leases:short"],
    ));
    let replies: Vec<String> =
        compare_exactly(module, script, &modes.form, &calls).iter().map(show).collect();
    assert_eq!(replies.len(), calls.len(), "every call compared");
    // The logs: 300 and 3 units; each RL.MULTI adds one to both.
    assert_eq!(replies[299], "[1, 700, 1000, 0, 1000000]");
    assert_eq!(replies[302], "[1, 997, 1000, 0, 1000000]");
    assert_eq!(replies[605], "[1, 0, [1, 699, 1000, 0, 1000000], [1, 996, 1000, 0, 1000000]]");
    assert_eq!(replies[606], "[1, 0, [1, 995, 1000, 0, 1000000], [1, 698, 1000, 0, 1000000]]");
    // The leases: 300 and 2 held (ids to 300 and 2), one more each in
    // both orders; a lease of each renewed, then one of each released (the
    // others, all renewed or taken 2 ms before, end 999,998 ms later); the
    // short log's sixth unit, the short set's fifth lease.
    assert_eq!(replies[602], "[1, 700, 1000, 0, 1000000, 300]");
    assert_eq!(replies[604], "[1, 998, 1000, 0, 1000000, 2]");
    assert_eq!(
        replies[607],
        "[1, 0, [1, 699, 1000, 0, 1000000, 301], [1, 997, 1000, 0, 1000000, 3]]"
    );
    assert_eq!(
        replies[608],
        "[1, 0, [1, 996, 1000, 0, 1000000, 4], [1, 698, 1000, 0, 1000000, 302]]"
    );
    assert_eq!(
        replies[609..613],
        ["[1, 302, 1000000]", "[1, 4, 1000000]", "[1, 301, 999998]", "[1, 3, 999998]"]
    );
    assert_eq!(replies[613], "[1, 994, 1000, 0, 1000000]");
    assert_eq!(replies[614], "[1, 996, 1000, 0, 1000000, 5]");

    // Script mode alone: a damaged log and lease set of over 256 entries
    // are refused, and the short ones read after them are read right.
    const CORRUPT: &str = "ERR the key holds a damaged script-mode state (rl1:...): script mode did not write it; it is left unchanged";
    let script = &mut modes.script.connect();
    let log = format!("rl1:sl:1700000000000000:1{},x", ",1:1".repeat(300));
    let leases: Vec<String> = (1..=300).map(|id| format!("{id}:1700001000000000:1")).collect();
    let leases = format!("rl1:cc:1700000000000000:301:{},x", leases.join(","));
    let _: () = redis::cmd("SET").arg("log:damaged").arg(&log).query(script).unwrap();
    let _: () = redis::cmd("SET").arg("leases:damaged").arg(&leases).query(script).unwrap();
    let later = at(10_000);
    let sessions: [(&[&str], &str); 4] = [
        (&["RL.SLIDINGLOG", "log:damaged", "1000", "1000", &later, "1"], CORRUPT),
        (
            &["RL.SLIDINGLOG", "log:short", "1000", "1000", &later, "1"],
            "[1, 993, 1000, 0, 1000000]",
        ),
        (&["RL.ACQUIRE", "leases:damaged", "1000", "1000", &later, "1"], CORRUPT),
        (
            &["RL.ACQUIRE", "leases:short", "1000", "1000", &later, "1"],
            "[1, 995, 1000, 0, 1000000, 6]",
        ),
    ];
    for (args, expected) in sessions {
        let call: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let full = as_script(&modes.form, &call);
        let replies: Vec<Value> =
            redis::pipe().ignore_errors().cmd(&full[0]).arg(&full[1..]).query(script).unwrap();
        assert_eq!(show(&replies[0]), expected, "{args:?}");
    }
}

/// Scripts run their commands under the caller's ACL. The user that
/// docs/script-mode.md and the README give script mode, for either form,
/// loads the library (FUNCTION LOAD) or the script (EVAL after NOSCRIPT)
/// itself and runs every command with the default user's replies, also the
/// error for a key of another type (TYPE) and the calls that append to a
/// log (APPEND, PEXPIRE) and delete a key (DEL); without any one of those
/// rules, some call is refused.
#[test]
fn the_documented_acl_runs_every_command() {
    const INSIDE: [&str; 7] = ["+get", "+set", "+del", "+append", "+pexpire", "+time", "+type"];
    let server = start_without_module(&[]);
    let admin = &mut server.connect();
    let () = redis::cmd("HSET").arg("hash").arg("f").arg("v").query(admin).expect("HSET");
    let (name, library) = common::function_library(SCRIPT);
    let sha = sha1_smol::Sha1::from(SCRIPT).digest().to_string();
    for (user, call_rules) in
        [("fcall", ["+fcall", "+function|load"]), ("evalsha", ["+evalsha", "+eval"])]
    {
        let mut acl = redis::cmd("ACL");
        acl.arg(&["SETUSER", user, "on", ">pw", "~*"]).arg(&call_rules).arg(&INSIDE);
        let () = acl.query(admin).expect("ACL SETUSER");
        let con = &mut server.connect();
        let () = redis::cmd("AUTH").arg(user).arg("pw").query(con).expect("AUTH");
        let form = if user == "fcall" {
            let loaded: String =
                redis::cmd("FUNCTION").arg("LOAD").arg(&library).query(con).expect("FUNCTION LOAD");
            assert_eq!(loaded, name);
            Form { command: "FCALL", target: name.clone() }
        } else {
            let missing = redis::cmd("EVALSHA").arg(&sha).arg(0).query::<Value>(con).unwrap_err();
            assert_eq!(missing.code(), Some("NOSCRIPT"));
            let first: Value = redis::cmd("EVAL")
                .arg(SCRIPT)
                .arg(1)
                .arg("first")
                .arg(&["RL.TOKENBUCKET", "10", "1", "1700000000", "1"])
                .query(con)
                .expect("EVAL");
            assert_eq!(show(&first), "[1, 9, 10, 0, 1000]");
            Form { command: "EVALSHA", target: sha.clone() }
        };
        let calls = |p: &str| -> Vec<Vec<String>> {
            let at = |s: &str| format!("1700000000{s}");
            [
                vec!["RL.TOKENBUCKET", &format!("{p}tb"), "10", "1", &at(""), "1"],
                vec!["RL.TOKENBUCKET", &format!("{p}star"), "10", "1", "*", "1"],
                vec!["RL.LEAKYBUCKET", &format!("{p}lb"), "10", "1", &at(""), "1"],
                vec!["RL.FIXEDWINDOW", &format!("{p}fw"), "10", "60", &at(""), "1"],
                vec!["RL.SLIDINGWINDOW", &format!("{p}sw"), "10", "60", &at(""), "1"],
                vec!["RL.SLIDINGLOG", &format!("{p}sl"), "10", "60", &at(""), "1"],
                vec!["RL.SLIDINGLOG", &format!("{p}sl"), "10", "60", &at(".001"), "2"],
                vec!["RL.REFUND", &format!("{p}sl"), "SLIDINGLOG", "10", "60", &at(".002"), "3"],
                vec![
                    "RL.MULTI",
                    "2",
                    &format!("{p}m1"),
                    &format!("{p}m2"),
                    &at(""),
                    "TOKENBUCKET",
                    "10",
                    "1",
                    "1",
                    "FIXEDWINDOW",
                    "10",
                    "60",
                    "1",
                ],
                vec!["RL.PEEK", &format!("{p}tb"), "TOKENBUCKET", "10", "1", &at(".5"), "1"],
                vec!["RL.REFUND", &format!("{p}tb"), "TOKENBUCKET", "10", "1", &at(".5"), "1"],
                vec!["RL.ACQUIRE", &format!("{p}cc"), "10", "30", &at(""), "1"],
                vec!["RL.RENEW", &format!("{p}cc"), "1", "30", &at(".5")],
                vec!["RL.RELEASE", &format!("{p}cc"), "1", &at(".6")],
                vec!["RL.TOKENBUCKET", "hash", "10", "1", &at(""), "1"],
            ]
            .into_iter()
            .map(|call| call.into_iter().map(String::from).collect())
            .collect()
        };
        let replies = |con: &mut redis::Connection, p: &str| -> Vec<String> {
            calls(p)
                .iter()
                .map(|call| {
                    let parts: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
                    show(&raw_call(con, Some(&form), &parts))
                })
                .collect()
        };
        let (theirs, default) =
            (replies(con, &format!("{user}:")), replies(admin, &format!("admin-{user}:")));
        assert_eq!(theirs, default, "the {user} user's replies, the default user's");
        assert_eq!(theirs[0], "[1, 9, 10, 0, 1000]");
        assert_eq!(theirs[7], "[1, 10, 10, 0, 0]");
        assert_eq!(
            theirs.last().unwrap(),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
        // (The log's key was deleted by the refund of all it held.)
        let gone: bool =
            redis::cmd("EXISTS").arg(format!("{user}:sl")).query(admin).expect("EXISTS");
        assert!(!gone, "the {user} user's refunded log");
        // Each rule is needed: without it, some call is refused.
        for rule in INSIDE {
            let without = format!("{user}-without-{rule}");
            let mut acl = redis::cmd("ACL");
            acl.arg(&["SETUSER", &without, "on", ">pw", "~*"]).arg(&call_rules);
            acl.arg(INSIDE.iter().filter(|r| **r != rule).collect::<Vec<_>>());
            let () = acl.query(admin).expect("ACL SETUSER");
            let con = &mut server.connect();
            let () = redis::cmd("AUTH").arg(&without).arg("pw").query(con).expect("AUTH");
            let theirs = replies(con, &format!("{without}:"));
            // (Redis 7.0's words, then Redis 7.2's and Valkey's.)
            let refused = |reply: &String| {
                reply.contains("can't run this command") || reply.contains("no permissions to run")
            };
            assert!(theirs.iter().any(refused), "{user} without {rule}: {theirs:?}");
            // A refused call changes nothing: a log made by one call (SET),
            // which the next one's refused PEXPIRE would have appended to,
            // is as the first call left it.
            if rule == "+pexpire" {
                let key = format!("{without}:log");
                let take = |con: &mut redis::Connection, at: &str| {
                    let call = ["RL.SLIDINGLOG", &key, "10", "60", at, "1"];
                    let parts: Vec<&[u8]> = call.iter().map(|a| a.as_bytes()).collect();
                    show(&raw_call(con, Some(&form), &parts))
                };
                assert_eq!(take(con, "1700000000"), "[1, 9, 10, 0, 60000]");
                let before = snapshot(admin, &[&key]);
                assert!(refused(&take(con, "1700000000.1")), "{user} without {rule}");
                assert_eq!(
                    snapshot(admin, &[&key]),
                    before,
                    "{user} without {rule}: the log changed"
                );
            }
        }
    }
}

/// A sliding log `rl1:sl:...` in the layout the next version writes:
/// `rl2:sl:<units:16>:<newest run's time:18>:<first live run's time:18>:
/// <offset of the first live run:10>:`, zero-padded, then `dead` (runs that
/// have left, not read), then the runs, the first one's own time replaced
/// by `first_step` when given (after a trim it is a step from a left run).
fn next_log(log: &str, dead: &str, first_step: Option<u64>) -> String {
    let runs: Vec<(u128, &str)> = log["rl1:sl:".len()..]
        .split(',')
        .map(|run| {
            let (step, count) = run.split_once(':').expect("a run");
            (step.parse().expect("a step"), count)
        })
        .collect();
    let first = runs[0].0;
    let last: u128 = runs.iter().map(|run| run.0).sum();
    let units: u128 = runs.iter().map(|run| run.1.parse::<u128>().expect("a count")).sum();
    let mut body = log["rl1:sl:".len()..].to_string();
    if let Some(step) = first_step {
        body.replace_range(..body.find(':').unwrap(), &step.to_string());
    }
    format!("rl2:sl:{units:016}:{last:018}:{first:018}:{:010}:{dead}{body}", 73 + dead.len())
}

/// A lease set `rl1:cc:<last>:<next_id>:<leases>` in the layout the next
/// version writes: `rl2:cc:<last:18>:<next_id:16>:<slots held:16>:<latest
/// end:18>:<a time at or before the earliest end:18>:<offset of the first
/// lease:10>:`, zero-padded, then `dead` (not read), then the leases, with
/// `early` taken off the earliest end in the head.
fn next_lease_set(set: &str, dead: &str, early: u128) -> String {
    let mut fields = set["rl1:cc:".len()..].splitn(3, ':');
    let last: u128 = fields.next().unwrap().parse().unwrap();
    let next_id: u128 = fields.next().unwrap().parse().unwrap();
    let leases = fields.next().unwrap();
    let (mut held, mut first, mut latest) = (0u128, u128::MAX, 0u128);
    for lease in leases.split(',') {
        let parts: Vec<u128> = lease.split(':').map(|f| f.parse().unwrap()).collect();
        held += parts[2];
        first = first.min(parts[1]);
        latest = latest.max(parts[1]);
    }
    let first = first - early.min(first);
    let offset = 109 + dead.len();
    format!(
        "rl2:cc:{last:018}:{next_id:016}:{held:016}:{latest:018}:{first:018}:{offset:010}:{dead}{leases}"
    )
}

/// Reading ahead of a two-release change of layout: the next version
/// writes long sliding logs and lease sets with their sums in a head
/// (next_log, next_lease_set), so that a call reads a few bytes of a long
/// value instead of all of it; two versions of an app share keys during a
/// rolling deploy, so this one reads that layout too. Random sequences of
/// RL.SLIDINGLOG, RL.ACQUIRE, RL.RELEASE, RL.RENEW (of held leases and
/// others), RL.PEEK, RL.REFUND and RL.MULTI, where before about half the
/// calls the script's value is rewritten in the next layout (with or
/// without entries before its first live one, its expiry kept), agree with
/// the module exactly; times now, past 2^52 us and near the end of 9999;
/// what a call writes is in this layout (rl1), expiring `reset_after_ms`
/// after the call.
fn values_in_the_next_layout_agree_with_the_module(load: Load) {
    let modes = modes(load);
    let (module, script) = (&mut modes.module.connect(), &mut modes.script.connect());
    let mut rng = StdRng::seed_from_u64(0x2_51);
    let mut expiry = std::collections::HashMap::new();
    // Per algorithm: calls, values rewritten, those past 192 bytes, and
    // (leases) releases and renewals that found their lease.
    let mut seen = std::collections::BTreeMap::<String, [usize; 4]>::new();
    for sequence in 0..120 {
        let (algorithm, prefix) =
            if sequence % 2 == 0 { ("SLIDINGLOG", "rl1:sl:") } else { ("CONCURRENCY", "rl1:cc:") };
        let key = format!("next:{sequence}");
        let mut now: u64 = match sequence / 2 % 3 {
            0 => 1_700_000_000 * SECOND,
            1 => 5_000_000_000 * SECOND, // past 2^52 us
            _ => MAX_TIME_US - 40_000 * SECOND,
        };
        let limit = rng.gen_range(1..=80u64).to_string();
        let span_s = rng.gen_range(100..=1000u64); // the window, or the lease
        let span = span_s.to_string();
        let mut ids: Vec<String> = vec!["1".into()];
        let counts = seen.entry(algorithm.to_string()).or_default();
        for _ in 0..rng.gen_range(20..=150) {
            match rng.gen_range(0..20) {
                0 => now -= rng.gen_range(0..5 * SECOND),
                1 => now += rng.gen_range(span_s / 2..=span_s * 3 / 2) * SECOND, // leases run out
                _ => now += rng.gen_range(0..span_s * SECOND / 20),
            }
            let at = format!("{}.{:06}", now / SECOND, now % SECOND);
            let n = rng.gen_range(0..=3u64).to_string();
            let id = ids.choose(&mut rng).unwrap().clone();
            let take = if algorithm == "CONCURRENCY" { "RL.ACQUIRE" } else { "RL.SLIDINGLOG" };
            let (op, args): (Op, Vec<&str>) = match rng.gen_range(0..10) {
                0 => (Op::Peek, vec!["RL.PEEK", &key, algorithm, &limit, &span, &at, &n]),
                1 if algorithm == "SLIDINGLOG" => {
                    (Op::Refund, vec!["RL.REFUND", &key, algorithm, &limit, &span, &at, &n])
                }
                1 => (Op::Release, vec!["RL.RELEASE", &key, &id, &at]),
                2 => (Op::Multi, vec!["RL.MULTI", "1", &key, &at, algorithm, &limit, &span, &n]),
                3 if algorithm == "CONCURRENCY" => {
                    (Op::Renew, vec!["RL.RENEW", &key, &id, &span, &at])
                }
                _ => (Op::Take, vec![take, &key, &limit, &span, &at, &n]),
            };
            let call = Call {
                op,
                args: args.iter().map(|a| a.to_string()).collect(),
                keys: vec![key.clone()],
                counts: vec![n.clone()],
            };
            let mut stored: Option<String> = redis::cmd("GET").arg(&key).query(script).unwrap();
            let rl1 = stored.clone().filter(|value| value.starts_with(prefix));
            if let Some(value) = rl1.filter(|_| rng.gen_bool(0.5)) {
                let next = if algorithm == "SLIDINGLOG" {
                    let dead: String = (0..rng.gen_range(0..=3))
                        .map(|_| {
                            format!("{}:{},", rng.gen_range(0..=999_999), rng.gen_range(1..=5))
                        })
                        .collect();
                    let first_step =
                        (!dead.is_empty() && rng.gen_bool(0.5)).then(|| rng.gen_range(0..=999_999));
                    next_log(&value, &dead, first_step)
                } else {
                    let dead: String = (0..rng.gen_range(0..=2))
                        .map(|i| format!("{i}:{}:1,", rng.gen_range(0..=999_999)))
                        .collect();
                    let early =
                        if rng.gen_bool(0.5) { 0 } else { rng.gen_range(0..=10_000_000_000) };
                    next_lease_set(&value, &dead, early)
                };
                let _: () =
                    redis::cmd("SET").arg(&key).arg(&next).arg("KEEPTTL").query(script).unwrap();
                counts[1] += 1;
                counts[2] += usize::from(value.len() > 192);
                stored = Some(next);
            }
            let (expected, _) = run(module, None, std::slice::from_ref(&call), false);
            let (answers, clock) =
                run(script, Some(&modes.form), std::slice::from_ref(&call), false);
            assert_eq!(show(&answers[0].reply), show(&expected[0].reply), "{call:?}");
            check_expiry("script", std::slice::from_ref(&call), &answers, clock, &mut expiry);
            counts[0] += 1;
            if let Value::Array(fields) = &answers[0].reply {
                match (call.op, fields.as_slice()) {
                    (Op::Take, [Value::Int(1), .., Value::Int(id)]) if *id > 0 => {
                        ids.push(id.to_string())
                    }
                    (Op::Release | Op::Renew, [Value::Int(1), ..]) => counts[3] += 1,
                    _ => {}
                }
            }
            let after: Option<String> = redis::cmd("GET").arg(&key).query(script).unwrap();
            if let Some(value) = after.filter(|value| Some(value) != stored.as_ref()) {
                assert!(value.starts_with(prefix), "{call:?} wrote {value}");
            }
        }
    }
    eprintln!("[calls, rewritten, past 192 bytes, leases found]: {seen:?}");
    assert!(seen["SLIDINGLOG"][1] >= 1000 && seen["SLIDINGLOG"][2] >= 100, "{seen:?}");
    assert!(seen["CONCURRENCY"][1] >= 1000 && seen["CONCURRENCY"][2] >= 100, "{seen:?}");
    assert!(seen["CONCURRENCY"][3] >= 100, "{seen:?}");
}
