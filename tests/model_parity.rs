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
