//! Every reply field of every command equals that of a reference model
//! (tests/models) on thousands of random calls: random parameters per key,
//! times that jump forward, stand still and sometimes go back, random `n`.

mod common;
mod models;

use num_rational::Ratio;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::Server;
use models::{FixedWindow, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket, Window};

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

#[test]
fn token_bucket_matches_model() {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(1);
    let mut outcomes = Outcomes::default();
    for key in 0..KEYS {
        let capacity = rng.gen_range(1..=40u64);
        let (rate, per_us) = random_rate(&mut rng);
        let full_us = (Ratio::from_integer(i128::from(capacity)) / per_us).to_integer() as u64;
        let calls = random_calls(&mut rng, capacity, full_us.clamp(1, 100_000_000));
        let mut model = TokenBucket { capacity: capacity.into(), rate: per_us, state: None };
        let cap = capacity.to_string();
        check(
            &mut outcomes,
            &mut con,
            "RL.TOKENBUCKET",
            &format!("tb{key}"),
            [&cap, &rate],
            &calls,
            |t, n| model.call(t, n),
        );
    }
    outcomes.assert_varied();
}

#[test]
fn leaky_bucket_matches_model() {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(2);
    let mut outcomes = Outcomes::default();
    for key in 0..KEYS {
        let capacity = rng.gen_range(1..=40u64);
        let (rate, per_us) = random_rate(&mut rng);
        let full_us = (Ratio::from_integer(i128::from(capacity)) / per_us).to_integer() as u64;
        let calls = random_calls(&mut rng, capacity, full_us.clamp(1, 100_000_000));
        let mut model = LeakyBucket { capacity: capacity.into(), rate: per_us, state: None };
        let cap = capacity.to_string();
        check(
            &mut outcomes,
            &mut con,
            "RL.LEAKYBUCKET",
            &format!("lb{key}"),
            [&cap, &rate],
            &calls,
            |t, n| model.call(t, n),
        );
    }
    outcomes.assert_varied();
}

#[test]
fn fixed_window_matches_model() {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(3);
    let mut outcomes = Outcomes::default();
    for key in 0..KEYS {
        let limit = rng.gen_range(1..=30u64);
        let (window, us) = random_window(&mut rng);
        let calls = random_calls(&mut rng, limit, us);
        let params = Window { limit: limit.into(), window: us.into() };
        let mut model = FixedWindow { params, state: None };
        let l = limit.to_string();
        check(
            &mut outcomes,
            &mut con,
            "RL.FIXEDWINDOW",
            &format!("fw{key}"),
            [&l, &window],
            &calls,
            |t, n| model.call(t, n),
        );
    }
    outcomes.assert_varied();
}

#[test]
fn sliding_window_matches_model() {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(4);
    let mut outcomes = Outcomes::default();
    for key in 0..KEYS {
        let limit = rng.gen_range(1..=30u64);
        let (window, us) = random_window(&mut rng);
        let calls = random_calls(&mut rng, limit, us);
        let params = Window { limit: limit.into(), window: us.into() };
        let mut model = SlidingWindow { params, state: None };
        let l = limit.to_string();
        check(
            &mut outcomes,
            &mut con,
            "RL.SLIDINGWINDOW",
            &format!("sw{key}"),
            [&l, &window],
            &calls,
            |t, n| model.call(t, n),
        );
    }
    outcomes.assert_varied();
}

#[test]
fn sliding_log_matches_model() {
    let (_server, mut con) = server();
    let mut rng = StdRng::seed_from_u64(5);
    let mut outcomes = Outcomes::default();
    for key in 0..KEYS {
        let limit = rng.gen_range(1..=30u64);
        let (window, us) = random_window(&mut rng);
        let calls = random_calls(&mut rng, limit, us);
        let params = Window { limit: limit.into(), window: us.into() };
        let mut model = SlidingLog { params, units: Vec::new() };
        let l = limit.to_string();
        check(
            &mut outcomes,
            &mut con,
            "RL.SLIDINGLOG",
            &format!("sl{key}"),
            [&l, &window],
            &calls,
            |t, n| model.call(t, n),
        );
    }
    outcomes.assert_varied();
}
