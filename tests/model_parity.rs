//! Every reply field of every command equals that of a reference model
//! (tests/models) on thousands of random calls: random parameters per key,
//! times that jump forward, stand still and sometimes go back, random `n`.
//! RL.MULTI over random sets of keys of all five algorithms, with RL.REFUND
//! and RL.PEEK interleaved, equals the models composed.

mod common;
mod models;

use num_rational::Ratio;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::Server;
use models::{FixedWindow, LeakyBucket, Limit, SlidingLog, SlidingWindow, TokenBucket, Window};

const KEYS: usize = 150;
const CALLS_PER_KEY: usize = 30;

/// One key's calls: (time in µs, n).
fn random_calls(rng: &mut StdRng, limit: u64, span_us: u64) -> Vec<(u64, u64)> {
    let mut now: u64 = 1_700_000_000_000_000 + rng.gen_range(0..1_000_000_000_000);
    (0..CALLS_PER_KEY)
        .map(|_| {
            match rng.gen_range(0..20) {
                0..=5 => {}
                6 => now -= rng.gen_range(0..=span_us), // the clock goes back
                7..=15 => now += rng.gen_range(0..=span_us / 3),
                _ => now += rng.gen_range(0..=2 * span_us),
            }
            let n = match rng.gen_range(0..10) {
                0..=5 => 1,
                6..=8 => rng.gen_range(0..=limit),
                _ => rng.gen_range(0..=limit + 2),
            };
            (now, n)
        })
        .collect()
}

fn seconds(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

/// How often each outcome came up: admitted, denied for now, never.
#[derive(Default)]
struct Outcomes([usize; 3]);

impl Outcomes {
    fn count(&mut self, reply: &[i64]) {
        self.0[match (reply[0], reply[3]) {
            (1, _) => 0,
            (_, -1) => 2,
            _ => 1,
        }] += 1;
    }

    /// Every outcome is exercised, not just the easy one.
    fn assert_varied(&self) {
        let [admitted, denied, never] = self.0;
        assert!(admitted > 1000 && denied > 300 && never > 20, "{:?}", self.0);
    }
}

/// Runs `calls` on `key` in one transaction (Redis's clock stands still
/// inside it, so no key expires mid-sequence) and checks each reply.
fn check(
    outcomes: &mut Outcomes,
    con: &mut redis::Connection,
    command: &str,
    key: &str,
    params: [&str; 2],
    calls: &[(u64, u64)],
    mut model: impl FnMut(i128, i128) -> Vec<i64>,
) {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for &(now, n) in calls {
        pipe.cmd(command).arg(key).arg(&params).arg(seconds(now)).arg(n);
    }
    let replies: Vec<Vec<i64>> = pipe.query(con).unwrap();
    for (i, (&(now, n), reply)) in calls.iter().zip(&replies).enumerate() {
        let expected = model(i128::from(now), i128::from(n));
        outcomes.count(reply);
        assert_eq!(
            reply,
            &expected,
            "{command} {key} {params:?} call {i}: now {} n {n}\n{calls:?}",
            seconds(now)
        );
    }
}

fn server() -> (Server, redis::Connection) {
    let server = Server::start(&[]);
    let con = server.connect();
    (server, con)
}

/// A rate with up to three decimals: (its text, units per microsecond).
fn random_rate(rng: &mut StdRng) -> (String, Ratio<i128>) {
    let milli = rng.gen_range(1..=200_000i128);
    (format!("{}.{:03}", milli / 1000, milli % 1000), Ratio::new(milli, 1_000_000_000))
}

/// A window of 1 ms to 3 s with microseconds: (its text, microseconds).
fn random_window(rng: &mut StdRng) -> (String, u64) {
    let us = rng.gen_range(1000..=3_000_000u64);
    (seconds(us), us)
}

/// Every model answers a call the way its command must.
trait Model {
    fn call(&mut self, t: i128, n: i128) -> Vec<i64>;
}

macro_rules! model {
    ($($type:ty),*) => {$(
        impl Model for $type {
            fn call(&mut self, t: i128, n: i128) -> Vec<i64> {
                <$type>::call(self, t, n)
            }
        }
    )*};
}
model!(TokenBucket, LeakyBucket, FixedWindow, SlidingWindow, SlidingLog);

/// Random buckets: capacity 1 to 40 at a rate of 0.001 to 200 per second.
fn buckets<M: Model>(command: &str, seed: u64, new: impl Fn(i128, Ratio<i128>) -> M) {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut outcomes = Outcomes::default();
    for key in 0..KEYS {
        let capacity = rng.gen_range(1..=40u64);
        let (rate, per_us) = random_rate(&mut rng);
        let full_us = (Ratio::from_integer(i128::from(capacity)) / per_us).to_integer() as u64;
        let calls = random_calls(&mut rng, capacity, full_us.clamp(1, 100_000_000));
        let mut model = new(capacity.into(), per_us);
        let capacity = capacity.to_string();
        let params = [capacity.as_str(), rate.as_str()];
        let key = format!("{command}:{key}");
        check(&mut outcomes, &mut con, command, &key, params, &calls, |t, n| model.call(t, n));
    }
    outcomes.assert_varied();
}

/// Random windows: limit 1 to 30 per 1 ms to 3 s.
fn windows<M: Model>(command: &str, seed: u64, new: impl Fn(Window) -> M) {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut outcomes = Outcomes::default();
    for key in 0..KEYS {
        let limit = rng.gen_range(1..=30u64);
        let (window, us) = random_window(&mut rng);
        let calls = random_calls(&mut rng, limit, us);
        let mut model = new(Window { limit: limit.into(), window: us.into() });
        let limit = limit.to_string();
        let params = [limit.as_str(), window.as_str()];
        let key = format!("{command}:{key}");
        check(&mut outcomes, &mut con, command, &key, params, &calls, |t, n| model.call(t, n));
    }
    outcomes.assert_varied();
}

#[test]
fn token_bucket_matches_model() {
    buckets("RL.TOKENBUCKET", 1, |capacity, rate| TokenBucket { capacity, rate, state: None });
}

#[test]
fn leaky_bucket_matches_model() {
    buckets("RL.LEAKYBUCKET", 2, |capacity, rate| LeakyBucket { capacity, rate, state: None });
}

#[test]
fn fixed_window_matches_model() {
    windows("RL.FIXEDWINDOW", 3, |params| FixedWindow { params, state: None });
}

#[test]
fn sliding_window_matches_model() {
    windows("RL.SLIDINGWINDOW", 4, |params| SlidingWindow { params, state: None });
}

#[test]
fn sliding_log_matches_model() {
    windows("RL.SLIDINGLOG", 5, |params| SlidingLog { params, units: Vec::new() });
}

/// A key of a composed test: its limit spec's arguments, its size
/// (capacity or limit) and its model.
struct Key {
    name: String,
    spec: [String; 3],
    size: u64,
    model: Limit,
}

/// A key of a random algorithm with random parameters, as in the tests above.
fn random_key(rng: &mut StdRng, name: String) -> Key {
    let algorithm = rng.gen_range(0..5);
    if algorithm < 2 {
        let capacity = rng.gen_range(1..=40u64);
        let (rate, per_us) = random_rate(rng);
        let (name_of, model) = if algorithm == 0 {
            (
                "TOKENBUCKET",
                Limit::TokenBucket(TokenBucket {
                    capacity: capacity.into(),
                    rate: per_us,
                    state: None,
                }),
            )
        } else {
            (
                "LEAKYBUCKET",
                Limit::LeakyBucket(LeakyBucket {
                    capacity: capacity.into(),
                    rate: per_us,
                    state: None,
                }),
            )
        };
        return Key {
            name,
            spec: [name_of.into(), capacity.to_string(), rate],
            size: capacity,
            model,
        };
    }
    let limit = rng.gen_range(1..=30u64);
    let (window, us) = random_window(rng);
    let params = Window { limit: limit.into(), window: us.into() };
    let (name_of, model) = match algorithm {
        2 => ("FIXEDWINDOW", Limit::FixedWindow(FixedWindow { params, state: None })),
        3 => ("SLIDINGWINDOW", Limit::SlidingWindow(SlidingWindow { params, state: None })),
        _ => ("SLIDINGLOG", Limit::SlidingLog(SlidingLog { params, units: Vec::new() })),
    };
    Key { name, spec: [name_of.into(), limit.to_string(), window], size: limit, model }
}

/// `n` for a limit of `size`: mostly 1, often 0 to the size, sometimes above.
fn random_n(rng: &mut StdRng, size: u64) -> u64 {
    match rng.gen_range(0..10) {
        0..=4 => 1,
        5 => 0,
        6..=8 => rng.gen_range(0..=size),
        _ => rng.gen_range(0..=size + 2),
    }
}

/// One call of a composed test: RL.MULTI on some keys, or RL.REFUND or
/// RL.PEEK on one.
enum Call {
    Multi(Vec<usize>, Vec<u64>),
    Refund(usize, u64),
    Peek(usize, u64),
}

fn ints_of(value: &redis::Value) -> Vec<i64> {
    redis::from_redis_value(value.clone()).unwrap_or_else(|e| panic!("{value:?}: {e}"))
}

/// RL.MULTI's reply: `(allowed, retry_after_ms, [fields of each limit])`.
fn multi_of(value: &redis::Value) -> (i64, i64, Vec<Vec<i64>>) {
    let parts: Vec<redis::Value> =
        redis::from_redis_value(value.clone()).unwrap_or_else(|e| panic!("{value:?}: {e}"));
    let int = |v: &redis::Value| ints_of(&redis::Value::Array(vec![v.clone()]))[0];
    (int(&parts[0]), int(&parts[1]), parts[2..].iter().map(ints_of).collect())
}

/// How often each case came up, so that the test is seen to exercise them all.
#[derive(Default, Debug)]
struct Composed {
    admitted: usize,
    denied: usize,
    never: usize,
    /// Denied calls in which some limit alone would have admitted.
    partly_admitting: usize,
    refunds: usize,
    /// Refunds of n > 0 that left the limiter fresh (its key deleted).
    refunds_to_fresh: usize,
    peeks: usize,
}

const GROUPS: usize = 120;
const KEYS_PER_GROUP: usize = 6;
const CALLS_PER_GROUP: usize = 50;

#[test]
fn multi_refund_and_peek_match_the_models_composed() {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(6);
    let mut seen = Composed::default();
    // A denied RL.MULTI must report the limits that would admit unchanged
    // (docs/commands.md, RL.MULTI); those fields are compared at the end, so that every
    // other field is checked first.
    let mut unchanged_mismatches = Vec::new();
    for group in 0..GROUPS {
        let mut keys: Vec<Key> =
            (0..KEYS_PER_GROUP).map(|k| random_key(&mut rng, format!("g{group}:k{k}"))).collect();
        let span_us = rng.gen_range(1_000..=3_000_000u64);
        let mut now: u64 = 1_700_000_000_000_000 + rng.gen_range(0..1_000_000_000_000);
        let mut calls = Vec::new();
        let mut pipe = redis::pipe();
        pipe.atomic();
        for _ in 0..CALLS_PER_GROUP {
            match rng.gen_range(0..20) {
                0..=5 => {}
                6 => now -= rng.gen_range(0..=span_us),
                7..=15 => now += rng.gen_range(0..=span_us / 3),
                _ => now += rng.gen_range(0..=2 * span_us),
            }
            let call = match rng.gen_range(0..20) {
                0..=10 => {
                    let mut chosen: Vec<usize> = (0..KEYS_PER_GROUP).collect();
                    rand::seq::SliceRandom::shuffle(&mut chosen[..], &mut rng);
                    chosen.truncate(rng.gen_range(1..=4));
                    let n = chosen.iter().map(|&k| random_n(&mut rng, keys[k].size)).collect();
                    Call::Multi(chosen, n)
                }
                11..=16 => {
                    let k = rng.gen_range(0..KEYS_PER_GROUP);
                    Call::Refund(k, rng.gen_range(0..=keys[k].size + 3))
                }
                _ => {
                    let k = rng.gen_range(0..KEYS_PER_GROUP);
                    Call::Peek(k, random_n(&mut rng, keys[k].size))
                }
            };
            let at = seconds(now);
            match &call {
                Call::Multi(chosen, n) => {
                    let cmd = pipe.cmd("RL.MULTI").arg(chosen.len());
                    for &k in chosen {
                        cmd.arg(&keys[k].name);
                    }
                    cmd.arg(&at);
                    for (&k, n) in chosen.iter().zip(n) {
                        cmd.arg(&keys[k].spec).arg(n);
                    }
                }
                Call::Refund(k, n) => {
                    pipe.cmd("RL.REFUND").arg(&keys[*k].name).arg(&keys[*k].spec).arg(&at).arg(n);
                }
                Call::Peek(k, n) => {
                    pipe.cmd("RL.PEEK").arg(&keys[*k].name).arg(&keys[*k].spec).arg(&at).arg(n);
                }
            }
            calls.push((now, call));
        }
        let replies: Vec<redis::Value> = pipe.query(&mut con).unwrap();
        for (i, ((now, call), reply)) in calls.iter().zip(&replies).enumerate() {
            let t = i128::from(*now);
            let context =
                |what: &str| format!("group {group} call {i} at {}: {what}", seconds(*now));
            match call {
                Call::Multi(chosen, n) => {
                    let n: Vec<i128> = n.iter().map(|&n| i128::from(n)).collect();
                    let mut models: Vec<Limit> = keys.iter().map(|k| k.model.clone()).collect();
                    let expected = models::multi(&mut models, chosen, t, &n);
                    for (key, model) in keys.iter_mut().zip(models) {
                        key.model = model;
                    }
                    let got = multi_of(reply);
                    let specs: Vec<_> =
                        chosen.iter().map(|&k| (&keys[k].spec, &keys[k].name)).collect();
                    let what = context(&format!("RL.MULTI {specs:?} n {n:?}"));
                    assert_eq!(
                        (got.0, got.1),
                        (expected.0, expected.1),
                        "{what}\n{got:?}\n{expected:?}"
                    );
                    assert_eq!(got.2.len(), expected.2.len(), "{what}");
                    for (fields, wanted) in got.2.iter().zip(&expected.2) {
                        let alone_admits = expected.0 == 0 && wanted[0] == 1;
                        if alone_admits {
                            // allowed, limit and retry_after_ms are the limit's own.
                            assert_eq!(
                                (fields[0], fields[2], fields[3]),
                                (1, wanted[2], 0),
                                "{what}"
                            );
                            if fields != wanted {
                                unchanged_mismatches
                                    .push(format!("{what}: {fields:?}, expected {wanted:?}"));
                            }
                        } else {
                            assert_eq!(fields, wanted, "{what}\n{got:?}\n{expected:?}");
                        }
                    }
                    match expected {
                        (1, _, _) => seen.admitted += 1,
                        (_, -1, _) => seen.never += 1,
                        _ => seen.denied += 1,
                    }
                    if expected.0 == 0 && expected.2.iter().any(|f| f[0] == 1) {
                        seen.partly_admitting += 1;
                    }
                }
                Call::Refund(k, n) => {
                    let expected = keys[*k].model.refund(t, i128::from(*n));
                    let what = context(&format!("RL.REFUND {:?} n {n}", keys[*k].spec));
                    assert_eq!(ints_of(reply), expected, "{what}");
                    seen.refunds += 1;
                    if *n > 0 && expected[4] == 0 {
                        seen.refunds_to_fresh += 1;
                    }
                }
                Call::Peek(k, n) => {
                    let expected = keys[*k].model.peek(t, i128::from(*n));
                    let what = context(&format!("RL.PEEK {:?} n {n}", keys[*k].spec));
                    assert_eq!(ints_of(reply), expected, "{what}");
                    seen.peeks += 1;
                }
            }
        }
    }
    let Composed { admitted, denied, never, partly_admitting, refunds, refunds_to_fresh, peeks } =
        seen;
    assert!(admitted > 300 && denied > 150 && never > 30 && partly_admitting > 100, "{seen:?}");
    assert!(refunds > 500 && refunds_to_fresh > 100 && peeks > 200, "{seen:?}");
    assert!(
        unchanged_mismatches.is_empty(),
        "{} limits that would admit, in denied RL.MULTI calls, report their state as if they had taken their n:\n{}",
        unchanged_mismatches.len(),
        unchanged_mismatches[..unchanged_mismatches.len().min(5)].join("\n")
    );
}
