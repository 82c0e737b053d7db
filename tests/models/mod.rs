//! Reference models of the five algorithms, written from the formulas of
//! docs/commands.md with plain exact arithmetic (rationals, or integers scaled by
//! the window), and the waits found by stepping a millisecond at a time.
//! Each `call` returns the reply the module must give; `refund` that of
//! RL.REFUND, and `multi` composes them into RL.MULTI's.
#![allow(dead_code)]

use num_rational::Ratio;

type Q = Ratio<i128>;

fn q(n: i128) -> Q {
    Q::from_integer(n)
}

/// Milliseconds, rounded up, for `us` microseconds.
fn ceil_ms(us: Q) -> i64 {
    (us / q(1000)).ceil().to_integer() as i64
}

fn floor(x: Q) -> i64 {
    x.floor().to_integer() as i64
}

/// The smallest m >= 0 with `ok(m * 1000 µs later)`; the waits only shrink
/// with time, so the first hit is the answer.
fn first_ms(limit_ms: i64, ok: impl Fn(i128) -> bool) -> i64 {
    (0..=limit_ms).find(|&m| ok(i128::from(m) * 1000)).expect("a wait within the bound")
}

#[derive(Clone)]
pub struct TokenBucket {
    pub capacity: i128,
    /// Tokens per microsecond.
    pub rate: Q,
    /// Tokens and time of the last write.
    pub state: Option<(Q, i128)>,
}

impl TokenBucket {
    pub fn call(&mut self, t: i128, n: i128) -> Vec<i64> {
        let cap = q(self.capacity);
        let (tokens, t) = match self.state {
            None => (cap, t),
            Some((tokens, last)) => {
                let t = t.max(last);
                (cap.min(tokens + q(t - last) * self.rate), t)
            }
        };
        let reset = |tokens: Q| ceil_ms((cap - tokens) / self.rate);
        let c = self.capacity as i64;
        if n > self.capacity {
            return vec![0, floor(tokens), c, -1, reset(tokens)];
        }
        if tokens >= q(n) {
            let left = tokens - q(n);
            if n > 0 {
                self.state = Some((left, t));
            }
            return vec![1, floor(left), c, 0, reset(left)];
        }
        vec![0, floor(tokens), c, ceil_ms((q(n) - tokens) / self.rate), reset(tokens)]
    }
}

#[derive(Clone)]
pub struct LeakyBucket {
    pub capacity: i128,
    /// Units drained per microsecond.
    pub rate: Q,
    /// Level and time of the last write.
    pub state: Option<(Q, i128)>,
}

impl LeakyBucket {
    pub fn call(&mut self, t: i128, n: i128) -> Vec<i64> {
        let cap = q(self.capacity);
        let (level, t) = match self.state {
            None => (q(0), t),
            Some((level, last)) => {
                let t = t.max(last);
                (q(0).max(level - q(t - last) * self.rate), t)
            }
        };
        let drain = |level: Q| ceil_ms(level / self.rate);
        let c = self.capacity as i64;
        if n > self.capacity {
            return vec![0, floor(cap - level), c, -1, drain(level), 0];
        }
        if level + q(n) <= cap {
            let queued = level + q(n);
            if n > 0 {
                self.state = Some((queued, t));
            }
            return vec![1, floor(cap - queued), c, 0, drain(queued), drain(level)];
        }
        vec![0, floor(cap - level), c, drain(level + q(n) - cap), drain(level), 0]
    }
}

/// The three window algorithms share their parameters.
#[derive(Clone)]
pub struct Window {
    pub limit: i128,
    /// Window length in microseconds.
    pub window: i128,
}

#[derive(Clone)]
pub struct FixedWindow {
    pub params: Window,
    /// Count and time of the last write.
    pub state: Option<(i128, i128)>,
}

impl FixedWindow {
    pub fn call(&mut self, t: i128, n: i128) -> Vec<i64> {
        let (limit, w) = (self.params.limit, self.params.window);
        let t = self.state.map_or(t, |(_, last)| t.max(last));
        let k = t / w;
        let count = match self.state {
            Some((count, last)) if last / w == k => count,
            _ => 0,
        };
        let to_end = ceil_ms(q((k + 1) * w - t));
        let reset = |count: i128| if count > 0 { to_end } else { 0 };
        let remaining = |count: i128| (limit - count).max(0) as i64;
        if n > limit {
            return vec![0, remaining(count), limit as i64, -1, reset(count)];
        }
        if count + n <= limit {
            if n > 0 {
                self.state = Some((count + n, t));
            }
            return vec![1, remaining(count + n), limit as i64, 0, reset(count + n)];
        }
        vec![0, remaining(count), limit as i64, to_end, to_end]
    }
}

#[derive(Clone)]
pub struct SlidingWindow {
    pub params: Window,
    /// Window index, previous and current counts, time of the last write.
    pub state: Option<(i128, i128, i128)>,
}

impl SlidingWindow {
    /// window * estimate at time `t`, with nothing arriving after the last write.
    fn scaled_estimate(&self, t: i128) -> i128 {
        let w = self.params.window;
        let Some((previous, current, last)) = self.state else { return 0 };
        let (k, elapsed) = (t / w, t % w);
        match k - last / w {
            0 => previous * (w - elapsed) + current * w,
            1 => current * (w - elapsed),
            _ => 0,
        }
    }

    pub fn call(&mut self, t: i128, n: i128) -> Vec<i64> {
        let (limit, w) = (self.params.limit, self.params.window);
        let t = self.state.map_or(t, |(_, _, last)| t.max(last));
        let estimate = self.scaled_estimate(t);
        let remaining = |scaled: i128| ((limit * w - scaled).max(0) / w) as i64;
        let bound = (2 * w / 1000 + 2) as i64;
        let reset = |model: &Self| first_ms(bound, |later| model.scaled_estimate(t + later) == 0);
        if n > limit {
            return vec![0, remaining(estimate), limit as i64, -1, reset(self)];
        }
        if estimate + n * w <= limit * w {
            if n > 0 {
                let k = t / w;
                let (previous, current) = match self.state {
                    Some((p, c, last)) if last / w == k => (p, c),
                    Some((_, c, last)) if last / w + 1 == k => (c, 0),
                    _ => (0, 0),
                };
                self.state = Some((previous, current + n, t));
            }
            let after = self.scaled_estimate(t);
            return vec![1, remaining(after), limit as i64, 0, reset(self)];
        }
        let retry = first_ms(bound, |later| self.scaled_estimate(t + later) + n * w <= limit * w);
        vec![0, remaining(estimate), limit as i64, retry, reset(self)]
    }
}

#[derive(Clone)]
pub struct SlidingLog {
    pub params: Window,
    /// The time of every admitted unit.
    pub units: Vec<i128>,
}

impl SlidingLog {
    fn count(&self, t: i128) -> i128 {
        self.units.iter().filter(|&&s| s > t - self.params.window).count() as i128
    }

    pub fn call(&mut self, t: i128, n: i128) -> Vec<i64> {
        let (limit, w) = (self.params.limit, self.params.window);
        let t = self.units.last().map_or(t, |&last| t.max(last));
        let bound = (w / 1000 + 2) as i64;
        let reset = |log: &Self| first_ms(bound, |later| log.count(t + later) == 0);
        let count = self.count(t);
        if n > limit {
            return vec![0, (limit - count) as i64, limit as i64, -1, reset(self)];
        }
        if count + n <= limit {
            self.units.extend(std::iter::repeat_n(t, n as usize));
            return vec![1, (limit - count - n) as i64, limit as i64, 0, reset(self)];
        }
        let retry = first_ms(bound, |later| self.count(t + later) + n <= limit);
        vec![0, (limit - count) as i64, limit as i64, retry, reset(self)]
    }
}

// RL.REFUND: per docs/commands.md, give back up to `n` units; `allowed` is 1, the
// other fields describe the limiter after the refund. A missing key has
// nothing to give back and stays missing; a refund that leaves the
// limiter fresh deletes it (the model's state becomes `None` or empty);
// `n = 0` changes nothing.

impl TokenBucket {
    /// Tokens rise by `n`, at most to the capacity.
    pub fn refund(&mut self, t: i128, n: i128) -> Vec<i64> {
        let cap = q(self.capacity);
        let c = self.capacity as i64;
        let Some((tokens, last)) = self.state else { return vec![1, c, c, 0, 0] };
        let t = t.max(last);
        let tokens = cap.min(cap.min(tokens + q(t - last) * self.rate) + q(n));
        if n > 0 {
            self.state = (tokens < cap).then_some((tokens, t));
        }
        vec![1, floor(tokens), c, 0, ceil_ms((cap - tokens) / self.rate)]
    }
}

impl LeakyBucket {
    /// The level falls by `n`, not below 0; the delay is that of a
    /// request queued now.
    pub fn refund(&mut self, t: i128, n: i128) -> Vec<i64> {
        let cap = q(self.capacity);
        let c = self.capacity as i64;
        let Some((level, last)) = self.state else { return vec![1, c, c, 0, 0, 0] };
        let t = t.max(last);
        let level = q(0).max(q(0).max(level - q(t - last) * self.rate) - q(n));
        if n > 0 {
            self.state = (level > q(0)).then_some((level, t));
        }
        let drain = ceil_ms(level / self.rate);
        vec![1, floor(cap - level).max(0), c, 0, drain, drain]
    }
}

impl FixedWindow {
    /// The current window's count falls by `n`, not below 0; units of an
    /// earlier window are gone already.
    pub fn refund(&mut self, t: i128, n: i128) -> Vec<i64> {
        let (limit, w) = (self.params.limit, self.params.window);
        let Some((count, last)) = self.state else {
            return vec![1, limit as i64, limit as i64, 0, 0];
        };
        let t = t.max(last);
        let count = if last / w == t / w { count } else { 0 };
        let left = (count - n).max(0);
        if n > 0 {
            self.state = (left > 0).then_some((left, t));
        }
        let reset = if left > 0 { ceil_ms(q((t / w + 1) * w - t)) } else { 0 };
        vec![1, (limit - left) as i64, limit as i64, 0, reset]
    }
}

impl SlidingWindow {
    /// The current window's count falls first, then the previous one's.
    pub fn refund(&mut self, t: i128, n: i128) -> Vec<i64> {
        let (limit, w) = (self.params.limit, self.params.window);
        let Some((previous, current, last)) = self.state else {
            return vec![1, limit as i64, limit as i64, 0, 0];
        };
        let t = t.max(last);
        let (previous, current) = match t / w - last / w {
            0 => (previous, current),
            1 => (current, 0),
            _ => (0, 0),
        };
        let from_current = n.min(current);
        let (previous, current) =
            (previous - (n - from_current).min(previous), current - from_current);
        if n > 0 {
            self.state = (previous + current > 0).then_some((previous, current, t));
        }
        // Looking, with n = 0, reports the state as it is now.
        let mut now = self.clone();
        let reply = now.call(t, 0);
        vec![1, reply[1], limit as i64, 0, reply[4]]
    }
}

impl SlidingLog {
    /// The `n` most recently logged units still in the window go.
    pub fn refund(&mut self, t: i128, n: i128) -> Vec<i64> {
        let (limit, w) = (self.params.limit, self.params.window);
        let Some(&last) = self.units.last() else {
            return vec![1, limit as i64, limit as i64, 0, 0];
        };
        let t = t.max(last);
        if n > 0 {
            self.units.retain(|&s| s > t - w);
            let keep = self.units.len().saturating_sub(n as usize);
            self.units.truncate(keep);
        }
        let left = self.count(t);
        let bound = (w / 1000 + 2) as i64;
        let reset = first_ms(bound, |later| self.count(t + later) == 0);
        vec![1, (limit - left) as i64, limit as i64, 0, reset]
    }
}

/// Any of the five, as an RL.MULTI limit spec names it.
#[derive(Clone)]
pub enum Limit {
    TokenBucket(TokenBucket),
    LeakyBucket(LeakyBucket),
    FixedWindow(FixedWindow),
    SlidingWindow(SlidingWindow),
    SlidingLog(SlidingLog),
}

impl Limit {
    /// The algorithm's own command.
    pub fn call(&mut self, t: i128, n: i128) -> Vec<i64> {
        match self {
            Limit::TokenBucket(m) => m.call(t, n),
            Limit::LeakyBucket(m) => m.call(t, n),
            Limit::FixedWindow(m) => m.call(t, n),
            Limit::SlidingWindow(m) => m.call(t, n),
            Limit::SlidingLog(m) => m.call(t, n),
        }
    }

    /// RL.REFUND.
    pub fn refund(&mut self, t: i128, n: i128) -> Vec<i64> {
        match self {
            Limit::TokenBucket(m) => m.refund(t, n),
            Limit::LeakyBucket(m) => m.refund(t, n),
            Limit::FixedWindow(m) => m.refund(t, n),
            Limit::SlidingWindow(m) => m.refund(t, n),
            Limit::SlidingLog(m) => m.refund(t, n),
        }
    }

    /// RL.PEEK: the call's reply, with nothing taken.
    pub fn peek(&self, t: i128, n: i128) -> Vec<i64> {
        self.clone().call(t, n)
    }
}

/// RL.MULTI's reply, `(allowed, retry_after_ms, [fields of each limit])`,
/// for `n[i]` units of `limits[keys[i]]` at `t`; the limits take their
/// units only when all of them admit.
///
/// A denied call changes nothing, so a limit that alone would admit
/// reports its state as it is (`remaining` and `reset_after_ms` of a
/// look, n = 0), with `allowed` 1; one that denies reports its own reply.
pub fn multi(
    limits: &mut [Limit],
    keys: &[usize],
    t: i128,
    n: &[i128],
) -> (i64, i64, Vec<Vec<i64>>) {
    let mut after: Vec<Limit> = keys.iter().map(|&k| limits[k].clone()).collect();
    let own: Vec<Vec<i64>> = after.iter_mut().zip(n).map(|(limit, &n)| limit.call(t, n)).collect();
    if own.iter().all(|fields| fields[0] == 1) {
        for (&k, limit) in keys.iter().zip(after) {
            limits[k] = limit;
        }
        return (1, 0, own);
    }
    let retry_after_ms = if own.iter().any(|fields| fields[3] == -1) {
        -1
    } else {
        own.iter().map(|fields| fields[3]).max().unwrap_or(0)
    };
    let fields = own
        .into_iter()
        .zip(keys)
        .map(|(fields, &k)| if fields[0] == 1 { limits[k].peek(t, 0) } else { fields })
        .collect();
    (0, retry_after_ms, fields)
}
