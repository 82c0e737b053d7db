//! Concurrency limit: at most `limit` slots held at once. A slot is held
//! for the life of some work, under a lease: it is free again when the
//! holder releases it, or when the lease runs out (at `now + lease`, unless
//! renewed), so a holder that dies does not keep it.
//!
//! A lease that runs out at E holds its slots while t < E. Acquire `n` at t
//! when held(t) + n <= limit. The key lives while a lease is held: a state
//! with no live lease is a fresh one, and lease ids start again at 1.

use std::ffi::CStr;

use super::varint::{get_varint, put_varint};
use super::{MAX_SPAN_US, MAX_TIME_US, MAX_UNITS, Verdict, ms_between, size};
use crate::error::Error;
use crate::limit::{self, Call, Kind, Op, Outcome, Parameters, stored};
use crate::state::Value;

/// The parameters of `RL.ACQUIRE`, already validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Most slots held at once, 1..=MAX_UNITS.
    pub limit: u64,
    /// How long a lease lasts unless renewed, microseconds, 1000..=MAX_SPAN_US.
    pub lease_us: u64,
}

/// The largest lease id, exact in every client language.
pub const MAX_ID: u64 = MAX_UNITS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// 1..=MAX_ID, unique within the key while it lives.
    pub id: u64,
    /// Unix microseconds at which it runs out.
    pub expires_us: u64,
    /// The slots it holds, at least 1.
    pub n: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leases {
    /// Unix time of the last update, microseconds.
    pub last_us: u64,
    /// The id the next lease gets.
    pub next_id: u64,
    /// The leases, in the order they were taken (ascending ids).
    pub held: Vec<Lease>,
}

/// A missing key: no lease, ids from 1.
pub const FRESH: &Leases = &Leases { last_us: 0, next_id: 1, held: Vec::new() };

impl Default for Leases {
    fn default() -> Leases {
        FRESH.clone()
    }
}

/// What a call changes, made the same way by the primary, its replicas and
/// an AOF replay: first the leases that ran out by `at_us` go (and the
/// clock moves to `at_us`, never back), then the lease is added, released
/// or renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Acquire { at_us: u64, lease: Lease },
    Release { at_us: u64, id: u64 },
    Renew { at_us: u64, id: u64, expires_us: u64 },
}

impl Change {
    fn at_us(&self) -> u64 {
        match *self {
            Change::Acquire { at_us, .. }
            | Change::Release { at_us, .. }
            | Change::Renew { at_us, .. } => at_us,
        }
    }
}

/// RL.RELEASE's and RL.RENEW's answer: `[done, held, reset_after_ms]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Whether the lease was held (and is now released or renewed).
    pub done: bool,
    /// Slots held after the call.
    pub held: u64,
    /// Milliseconds, rounded up, until the last lease runs out; 0: none left.
    pub reset_after_ms: u64,
    pub store: Option<Change>,
}

impl Leases {
    /// A state some call could have stored: at least one lease, each live
    /// at `last_us` and for at most the longest lease after it, holding at
    /// least 1 slot, at most MAX_UNITS in all; ids ascending, below
    /// `next_id`, which is at most MAX_ID + 1.
    pub fn is_valid(&self) -> bool {
        let mut previous_id = 0;
        let mut total = 0u64;
        for lease in &self.held {
            let live =
                lease.expires_us > self.last_us && lease.expires_us - self.last_us <= MAX_SPAN_US;
            total = total.saturating_add(lease.n);
            if !live || lease.n == 0 || lease.id <= previous_id {
                return false;
            }
            previous_id = lease.id;
        }
        !self.held.is_empty()
            && total <= MAX_UNITS
            && self.last_us <= MAX_TIME_US
            && previous_id < self.next_id
            && self.next_id <= MAX_ID + 1
    }

    fn live(&self, now_us: u64) -> impl Iterator<Item = &Lease> + Clone {
        self.held.iter().filter(move |lease| lease.expires_us > now_us)
    }

    /// Slots held at `now_us`.
    fn held_at(&self, now_us: u64) -> u64 {
        self.live(now_us).map(|lease| lease.n).sum()
    }

    /// Milliseconds from `now_us` until every live lease but `except` has
    /// run out.
    fn reset_after_ms(&self, now_us: u64, except: Option<u64>) -> u64 {
        let others = self.live(now_us).filter(|lease| Some(lease.id) != except);
        others.map(|lease| ms_between(now_us, lease.expires_us)).max().unwrap_or(0)
    }

    fn find_live(&self, now_us: u64, id: u64) -> Option<&Lease> {
        self.live(now_us).find(|lease| lease.id == id)
    }

    /// Adds `leases` after the held ones when the state stays one that
    /// `is_valid` takes; else changes nothing and says so. O(H): how many
    /// leases are loaded back from an AOF, a bounded command at a time.
    pub fn extend(&mut self, leases: &[Lease]) -> bool {
        let held = self.held.len();
        self.held.extend_from_slice(leases);
        let valid = self.is_valid();
        if !valid {
            self.held.truncate(held);
        }
        valid
    }

    /// Bytes of memory the leases take beyond the struct, for MEMORY USAGE.
    pub fn heap_bytes(&self) -> usize {
        self.held.capacity() * size_of::<Lease>()
    }

    /// Whether a change that comes from outside (a replica's stream, an
    /// AOF) is one a call could have made here: a released or renewed lease
    /// is live at its time, and the state after it is valid (or has no
    /// lease left: no key).
    pub fn takes(&self, change: &Change) -> bool {
        let at_us = change.at_us().max(self.last_us);
        let held = |id| self.find_live(at_us, id).is_some();
        let possible = match *change {
            Change::Acquire { .. } => true,
            Change::Release { id, .. } | Change::Renew { id, .. } => held(id),
        };
        possible && change.at_us() <= MAX_TIME_US && {
            let mut after = self.clone();
            after.apply(*change);
            after.held.is_empty() || after.is_valid()
        }
    }

    pub fn apply(&mut self, change: Change) {
        let at_us = change.at_us().max(self.last_us);
        self.held.retain(|lease| lease.expires_us > at_us);
        self.last_us = at_us;
        if self.held.is_empty() {
            self.next_id = 1;
        }
        match change {
            Change::Acquire { lease, .. } => {
                self.next_id = self.next_id.max(lease.id.saturating_add(1));
                // Room for one, not four: most keys hold a lease or two.
                if self.held.is_empty() {
                    self.held.reserve_exact(1);
                }
                self.held.push(lease);
            }
            Change::Release { id, .. } => self.held.retain(|lease| lease.id != id),
            Change::Renew { id, expires_us, .. } => {
                for lease in self.held.iter_mut().filter(|lease| lease.id == id) {
                    lease.expires_us = expires_us;
                }
            }
        }
        // Memory follows the leases held.
        if self.held.capacity() > 2 * self.held.len() + 4 {
            self.held.shrink_to(self.held.len() + 4);
        }
    }

    /// The leases as RDB holds them, after `last_us` and `next_id`: per
    /// lease, varints of its id's step from the one before (from 0), its
    /// expiry after `last_us`, and its slots.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.held.len() * 8);
        let mut previous_id = 0;
        for lease in &self.held {
            put_varint(&mut bytes, lease.id - previous_id);
            put_varint(&mut bytes, lease.expires_us - self.last_us);
            put_varint(&mut bytes, lease.n);
            previous_id = lease.id;
        }
        bytes
    }

    /// Decodes `encode`'s bytes for `count` leases: `None` unless they are
    /// exactly what `encode` writes for a valid state.
    pub fn decode(last_us: u64, next_id: u64, count: u64, bytes: &[u8]) -> Option<Leases> {
        let mut held = Vec::new();
        let (mut position, mut previous_id) = (0, 0u64);
        let mut next = || {
            let (value, len) = get_varint(bytes.get(position..)?)?;
            position += len;
            Some(value)
        };
        for _ in 0..count {
            let (step, after, n) = (next()?, next()?, next()?);
            let id = previous_id.checked_add(step)?;
            held.push(Lease { id, expires_us: last_us.checked_add(after)?, n });
            previous_id = id;
            // Each lease takes at least 3 bytes: a count past them is short.
            if held.len() * 3 > bytes.len() {
                return None;
            }
        }
        let leases = Leases { last_us, next_id, held };
        (leases.is_valid() && leases.encode() == bytes).then_some(leases)
    }
}

/// Takes `n` slots at `now_us` under a new lease when at most `limit` are
/// then held. A `now_us` before the last update counts as no time passed;
/// `n == 0` only looks. The new lease's id is in the change (0: none).
pub fn acquire(stored: Option<&Leases>, now_us: u64, params: &Params, n: u64) -> Verdict<Change> {
    let leases = stored.unwrap_or(FRESH);
    let now_us = now_us.max(leases.last_us);
    let held = leases.held_at(now_us);
    let reset_after_ms = leases.reset_after_ms(now_us, None);
    let remaining = params.limit.saturating_sub(held);
    if n > params.limit {
        return Verdict::never(remaining, reset_after_ms);
    }
    if held + n > params.limit {
        // Wait for the leases that run out first until n fit.
        let mut ends: Vec<(u64, u64)> =
            leases.live(now_us).map(|lease| (lease.expires_us, lease.n)).collect();
        ends.sort_unstable();
        let must_free = held + n - params.limit;
        let mut freed = 0;
        let end = ends.iter().find_map(|&(expires_us, n)| {
            freed += n;
            (freed >= must_free).then_some(expires_us)
        });
        let retry = end.map_or(reset_after_ms, |end| ms_between(now_us, end));
        return Verdict::denied(remaining, retry, reset_after_ms);
    }
    let next_id = if held == 0 { 1 } else { leases.next_id };
    if n > 0 && next_id > MAX_ID {
        // Every id was given out: they start again once no lease is left.
        return Verdict::denied(remaining, reset_after_ms, reset_after_ms);
    }
    if n == 0 {
        return Verdict::admitted(remaining, reset_after_ms, None);
    }
    let expires_us = now_us + params.lease_us;
    let lease = Lease { id: next_id, expires_us, n };
    let reset_after_ms = reset_after_ms.max(ms_between(now_us, expires_us));
    Verdict::admitted(remaining - n, reset_after_ms, Some(Change::Acquire { at_us: now_us, lease }))
}

/// Frees lease `id` when it is still held at `now_us`; else changes
/// nothing (a second release is harmless).
pub fn release(stored: Option<&Leases>, now_us: u64, id: u64) -> Held {
    let leases = stored.unwrap_or(FRESH);
    let now_us = now_us.max(leases.last_us);
    let held = leases.held_at(now_us);
    match leases.find_live(now_us, id) {
        Some(lease) => Held {
            done: true,
            held: held - lease.n,
            reset_after_ms: leases.reset_after_ms(now_us, Some(id)),
            store: Some(Change::Release { at_us: now_us, id }),
        },
        None => Held {
            done: false,
            held,
            reset_after_ms: leases.reset_after_ms(now_us, None),
            store: None,
        },
    }
}

/// Makes lease `id`, when still held at `now_us`, run out at
/// `now_us + lease_us`; else changes nothing.
pub fn renew(stored: Option<&Leases>, now_us: u64, id: u64, lease_us: u64) -> Held {
    let leases = stored.unwrap_or(FRESH);
    let now_us = now_us.max(leases.last_us);
    let held = leases.held_at(now_us);
    let reset_after_ms = leases.reset_after_ms(now_us, None);
    if leases.find_live(now_us, id).is_none() {
        return Held { done: false, held, reset_after_ms, store: None };
    }
    let expires_us = now_us + lease_us;
    let others = leases.reset_after_ms(now_us, Some(id));
    Held {
        done: true,
        held,
        reset_after_ms: others.max(ms_between(now_us, expires_us)),
        store: Some(Change::Renew { at_us: now_us, id, expires_us }),
    }
}

/// `RL.ACQUIRE key limit lease now [n]` (its reply has a sixth field,
/// `lease_id`), and `CONCURRENCY` in a limit spec.
pub struct Concurrency;

impl Kind for Concurrency {
    const NAME: &'static CStr = c"CONCURRENCY";
    type Params = Params;

    fn run(params: &Params, call: Call, value: Option<Value>) -> Result<Outcome, Error> {
        let leases =
            stored(value, |v| if let Value::Leases(leases) = v { Some(leases) } else { None })?;
        // A slot comes back by its lease's id: RL.RELEASE.
        if call.op == Op::Refund {
            return Err(Error::RefundConcurrency);
        }
        let verdict = acquire(leases.as_deref(), call.now_us, params, call.n);
        let lease_id = match verdict.store {
            Some(Change::Acquire { lease, .. }) => lease.id,
            _ => 0,
        };
        let mut outcome = Outcome::of(verdict, params.limit, limit::Change::Lease);
        outcome.fields.lease_id = Some(lease_id);
        Ok(outcome)
    }
}

impl Parameters for Params {
    /// `limit lease`, each in its range.
    fn parse(limit: &[u8], lease: &[u8]) -> Result<Params, Error> {
        let limit = size(limit).ok_or(Error::Limit)?;
        Ok(Params { limit, lease_us: crate::args::lease_us(lease)? })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::test_support::*;
    use super::*;

    /// Applies what a call stores, as the glue does (a state with no lease
    /// left is no key).
    fn store(state: &mut Option<Leases>, change: Option<Change>) {
        if let Some(change) = change {
            let mut leases = state.take().unwrap_or_default();
            assert!(leases.takes(&change), "{leases:?} {change:?}");
            leases.apply(change);
            *state = (!leases.held.is_empty()).then_some(leases);
        }
    }

    fn lease_id(verdict: &Verdict<Change>) -> u64 {
        match verdict.store {
            Some(Change::Acquire { lease, .. }) => lease.id,
            _ => 0,
        }
    }

    const P: Params = Params { limit: 3, lease_us: 10 * SECOND };

    #[test]
    fn holds_at_most_the_limit_until_released_or_run_out() {
        let mut s = None;
        let a = acquire(s.as_ref(), T0, &P, 2);
        assert_eq!((reply(&a), lease_id(&a)), ((true, 1, 0, 10_000), 1));
        store(&mut s, a.store);
        let b = acquire(s.as_ref(), T0 + SECOND, &P, 1);
        assert_eq!((reply(&b), lease_id(&b)), ((true, 0, 0, 10_000), 2));
        store(&mut s, b.store);
        // Full: the first lease's 2 slots come back at T0 + 10 s.
        let c = acquire(s.as_ref(), T0 + 2 * SECOND, &P, 2);
        assert_eq!((reply(&c), lease_id(&c)), ((false, 0, 8000, 9000), 0));
        // Released: one slot back now.
        let r = release(s.as_ref(), T0 + 2 * SECOND, 2);
        assert_eq!((r.done, r.held, r.reset_after_ms), (true, 2, 8000));
        store(&mut s, r.store);
        assert_eq!(reply(&acquire(s.as_ref(), T0 + 2 * SECOND, &P, 2)), (false, 1, 8000, 8000));
        // A second release is harmless.
        let again = release(s.as_ref(), T0 + 2 * SECOND, 2);
        assert_eq!((again.done, again.held, again.store), (false, 2, None));
        // At T0 + 10 s the first lease has run out: all free.
        let d = acquire(s.as_ref(), T0 + 10 * SECOND, &P, 3);
        assert_eq!((reply(&d), lease_id(&d)), ((true, 0, 0, 10_000), 1));
    }

    #[test]
    fn ids_go_on_while_the_key_lives_and_start_again_after() {
        let mut s = None;
        for expected in 1..=3 {
            let v = acquire(s.as_ref(), T0, &P, 1);
            assert_eq!(lease_id(&v), expected);
            store(&mut s, v.store);
        }
        let r = release(s.as_ref(), T0, 3);
        store(&mut s, r.store);
        // Id 3 is not given again while lease 1 or 2 is held.
        let v = acquire(s.as_ref(), T0, &P, 1);
        assert_eq!(lease_id(&v), 4);
        store(&mut s, v.store);
        for id in [1, 2, 4] {
            let change = release(s.as_ref(), T0, id).store;
            store(&mut s, change);
        }
        assert_eq!(s, None, "the last release leaves no key");
        assert_eq!(lease_id(&acquire(s.as_ref(), T0, &P, 1)), 1);
    }

    #[test]
    fn renew_moves_the_end_of_a_held_lease_only() {
        let mut s = None;
        let change = acquire(s.as_ref(), T0, &P, 1).store;
        store(&mut s, change);
        let change = acquire(s.as_ref(), T0, &Params { lease_us: 4 * SECOND, ..P }, 1).store;
        store(&mut s, change);
        let r = renew(s.as_ref(), T0 + 9 * SECOND, 1, 30 * SECOND);
        assert_eq!((r.done, r.held, r.reset_after_ms), (true, 1, 30_000));
        store(&mut s, r.store);
        // Lease 2 ran out at T0 + 4 s: nothing to renew.
        let gone = renew(s.as_ref(), T0 + 9 * SECOND, 2, 30 * SECOND);
        assert_eq!(
            (gone.done, gone.held, gone.reset_after_ms, gone.store),
            (false, 1, 30_000, None)
        );
        assert_eq!(reply(&acquire(s.as_ref(), T0 + 38 * SECOND, &P, 3)), (false, 2, 1000, 1000));
        assert!(acquire(s.as_ref(), T0 + 39 * SECOND, &P, 3).allowed);
    }

    #[test]
    fn looks_too_many_and_the_clock_never_runs_back() {
        let mut s = None;
        let look = acquire(s.as_ref(), T0, &P, 0);
        assert_eq!((reply(&look), look.store), ((true, 3, 0, 0), None));
        assert_eq!(reply(&acquire(s.as_ref(), T0, &P, 4)), (false, 3, -1, 0));
        let change = acquire(s.as_ref(), T0 + 5 * SECOND, &P, 3).store;
        store(&mut s, change);
        // 5 s earlier counts as no time passed.
        assert_eq!(reply(&acquire(s.as_ref(), T0, &P, 1)), (false, 0, 10_000, 10_000));
        let r = release(s.as_ref(), T0, 1);
        assert_eq!(r.store, Some(Change::Release { at_us: T0 + 5 * SECOND, id: 1 }));
    }

    #[test]
    fn retry_and_reset_round_up_to_a_millisecond() {
        let p = Params { limit: 1, lease_us: 1500 };
        let mut s = None;
        let change = acquire(s.as_ref(), T0, &p, 1).store;
        store(&mut s, change);
        assert_eq!(reply(&acquire(s.as_ref(), T0 + 1, &p, 1)), (false, 0, 2, 2));
        assert_eq!(reply(&acquire(s.as_ref(), T0 + 1499, &p, 1)), (false, 0, 1, 1));
        assert!(acquire(s.as_ref(), T0 + 1500, &p, 1).allowed);
    }

    #[test]
    fn the_largest_limit_and_lease_are_exact() {
        let p = Params { limit: MAX_UNITS, lease_us: MAX_SPAN_US };
        let mut s = None;
        let all = acquire(s.as_ref(), MAX_TIME_US, &p, MAX_UNITS);
        assert_eq!(reply(&all), (true, 0, 0, MAX_SPAN_US / 1000));
        store(&mut s, all.store);
        let one = acquire(s.as_ref(), MAX_TIME_US, &p, 1);
        assert_eq!(reply(&one), (false, 0, MAX_SPAN_US as i64 / 1000, MAX_SPAN_US / 1000));
    }

    #[test]
    fn ids_run_out_only_while_leases_are_held() {
        let last = Lease { id: MAX_ID, expires_us: T0 + SECOND, n: 1 };
        let s = Leases { last_us: T0, next_id: MAX_ID + 1, held: vec![last] };
        assert!(s.is_valid());
        assert_eq!(reply(&acquire(Some(&s), T0, &P, 1)), (false, 2, 1000, 1000));
        let later = acquire(Some(&s), T0 + SECOND, &P, 1);
        assert_eq!(lease_id(&later), 1);
        let mut after = s.clone();
        assert!(after.takes(&later.store.unwrap()));
        after.apply(later.store.unwrap());
        assert_eq!(after.next_id, 2);
    }

    #[test]
    fn decode_takes_only_what_encode_writes_for_a_valid_state() {
        let held = vec![
            Lease { id: 3, expires_us: T0 + 5, n: 2 },
            Lease { id: 300, expires_us: T0 + 10 * SECOND, n: 1 },
        ];
        let s = Leases { last_us: T0, next_id: 301, held };
        let bytes = s.encode();
        assert_eq!(bytes.len(), 3 + 7);
        assert_eq!(Leases::decode(T0, 301, 2, &bytes), Some(s.clone()));
        assert_eq!(Leases::decode(T0, 300, 2, &bytes), None, "an id not below next_id");
        assert_eq!(Leases::decode(T0, 301, 1, &bytes), None, "bytes left over");
        assert_eq!(Leases::decode(T0, 301, 3, &bytes), None, "cut short");
        assert_eq!(Leases::decode(T0, 4, 1, &[3, 0, 2]), None, "a lease that ran out");
        assert_eq!(Leases::decode(T0, 1, 0, &[]), None, "no lease is no key");
        let mut zero_step = bytes.clone();
        zero_step[3] = 0;
        assert_eq!(Leases::decode(T0, 301, 2, &zero_step), None, "ids must ascend");
        let mut padded = vec![0x83, 0x00];
        padded.extend(&bytes[1..]);
        assert_eq!(Leases::decode(T0, 301, 2, &padded), None, "a varint has one form");
        assert_eq!(Leases::decode(T0, 301, u64::MAX, &bytes), None);
    }

    #[derive(Debug, Clone)]
    enum Call {
        Acquire(u64, u64),
        Release(u64),
        Renew(u64, u64),
    }

    fn any_call() -> impl Strategy<Value = Call> {
        prop_oneof![
            (0u64..4, 1u64..4).prop_map(|(n, lease)| Call::Acquire(n, lease)),
            (0u64..8).prop_map(Call::Release),
            (0u64..8, 1u64..4).prop_map(|(id, lease)| Call::Renew(id, lease)),
        ]
    }

    proptest! {
        /// Against a plain list of leases: never more than the limit held,
        /// ids unique among the held ones, retry and reset exact to the
        /// millisecond, every stored state valid and round-tripping, every
        /// change one `takes` accepts.
        #[test]
        fn matches_a_list_of_leases(
            limit in 1u64..5,
            calls in proptest::collection::vec((0u64..6_000_000, any_call()), 1..40),
        ) {
            let mut s: Option<Leases> = None;
            // The model: (id, expires_us, n) of the leases taken, and the
            // time of the last write, before which no call looks.
            let mut model: Vec<(u64, u64, u64)> = Vec::new();
            let mut last = 0;
            for (at, call) in calls {
                let now = T0 + at;
                let t = now.max(last);
                let mut live: Vec<(u64, u64, u64)> =
                    model.iter().copied().filter(|l| l.1 > t).collect();
                let held: u64 = live.iter().map(|l| l.2).sum();
                prop_assert!(held <= limit);
                let change = match call {
                    Call::Acquire(n, lease) => {
                        let p = Params { limit, lease_us: lease * SECOND / 2 };
                        let v = acquire(s.as_ref(), now, &p, n);
                        let fits = held + n <= limit;
                        prop_assert_eq!(v.allowed, fits);
                        prop_assert_eq!(v.remaining, limit - held - if fits { n } else { 0 });
                        if fits && n > 0 {
                            let id = lease_id(&v);
                            prop_assert!(id >= 1 && live.iter().all(|l| l.0 < id));
                            live.push((id, t + p.lease_us, n));
                        }
                        if !fits && n <= limit {
                            // Exact: admitted at the retry, not a millisecond before.
                            let retry = v.retry_after_ms as u64;
                            let wait = |ms: u64| acquire(s.as_ref(), t + ms * 1000, &p, n).allowed;
                            prop_assert!(retry > 0 && wait(retry) && !wait(retry - 1));
                        }
                        v.store
                    }
                    Call::Release(id) => {
                        let r = release(s.as_ref(), now, id);
                        let found = live.iter().position(|l| l.0 == id);
                        prop_assert_eq!(r.done, found.is_some());
                        if let Some(i) = found {
                            live.remove(i);
                        }
                        r.store
                    }
                    Call::Renew(id, lease) => {
                        let r = renew(s.as_ref(), now, id, lease * SECOND / 2);
                        let found = live.iter_mut().find(|l| l.0 == id);
                        prop_assert_eq!(r.done, found.is_some());
                        if let Some(l) = found {
                            l.1 = t + lease * SECOND / 2;
                        }
                        r.store
                    }
                };
                if change.is_some() {
                    (model, last) = (live, t);
                }
                store(&mut s, change);
                if s.is_none() {
                    // No key: its clock goes with it, as for every limiter.
                    last = 0;
                }
                let live = model.iter().filter(|l| l.1 > t);
                let held: u64 = live.clone().map(|l| l.2).sum();
                let reset = live.map(|l| (l.1 - t).div_ceil(1000)).max().unwrap_or(0);
                let look = acquire(s.as_ref(), t, &Params { limit, lease_us: SECOND }, 0);
                prop_assert_eq!((look.remaining, look.reset_after_ms), (limit - held, reset));
                if let Some(leases) = &s {
                    prop_assert!(leases.is_valid());
                    let bytes = leases.encode();
                    let count = leases.held.len() as u64;
                    let decoded = Leases::decode(leases.last_us, leases.next_id, count, &bytes);
                    prop_assert_eq!(decoded.as_ref(), Some(leases));
                }
            }
        }
    }
}
