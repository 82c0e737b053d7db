//! Reference models of the five algorithms, written from DESIGN.md's
//! formulas with plain exact arithmetic (rationals, or integers scaled by
//! the window), and the waits found by stepping a millisecond at a time.
//! Each `call` returns the reply the module must give.
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
pub struct Window {
    pub limit: i128,
    /// Window length in microseconds.
    pub window: i128,
}

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
