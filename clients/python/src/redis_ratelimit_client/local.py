"""The five algorithms and the concurrency limit in process, for
`on_unavailable="local"`: the module's math (src/algorithms/*.rs) in
Python's exact integers, time in microseconds, a bucket's tokens in
pico-units (10^12 a unit). `multi` answers what RL.MULTI would, field for
field, `release` what RL.RELEASE would, and the state is kept in a dict
(least recently used out) instead of Redis."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence

from redis.exceptions import ResponseError

PICO = 10**12
MAX_ID = 2**53 - 1  # the module's last lease id

#: One limit's reply fields: allowed, remaining, limit, retry_after_ms, reset_after_ms (, delay_ms).
Fields = list[int]
KEEP = object()  # a verdict that leaves the state as it was
#: The module's reply to a key that holds another algorithm's state.
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


#: A decimal as the module reads one (`12`, `0.5`, `.25`, `3.`): ASCII digits, no sign, space or `_`.
_DECIMAL = re.compile(r"([0-9]*)(?:\.([0-9]*))?")


def micros(text: str) -> int:
    """A decimal in millionths, as the module reads it: rounded half up at
    the seventh decimal; ValueError for anything else."""
    match = _DECIMAL.fullmatch(text)
    if match is None or text in ("", "."):
        raise ValueError(f"not a decimal: {text!r}")
    whole, fraction = match.group(1), match.group(2) or ""
    rounded = 1 if fraction[6:7] >= "5" else 0
    return int(whole or "0") * 1_000_000 + int(fraction[:6].ljust(6, "0")) + rounded


def share(algorithm: str, limit: int, parameter: str, instances: int) -> tuple[int, str]:
    """One of `instances` processes' share of a limit: its limit (capacity,
    window limit, slots) floor(limit / instances), at least 1; a bucket's
    rate divided too, rounded down to six decimals, at least 0.000001."""
    size = max(1, limit // instances)
    if algorithm in ("tokenbucket", "leakybucket"):
        rate = max(1, micros(parameter) // instances)
        parameter = f"{rate // 1_000_000}.{rate % 1_000_000:06d}".rstrip("0").rstrip(".")
    return size, parameter


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def ms_between(from_us: int, to_us: int) -> int:
    return ceil_div(max(0, to_us - from_us), 1000)


def token_bucket(state: Any, now: int, capacity: int, refill: int, n: int) -> tuple[Fields, Any]:
    full = capacity * PICO
    if state is None:
        tokens, last = full, now
    else:
        last = max(now, state[1])
        tokens = min(full, state[0] + (last - state[1]) * refill)
    def ms(pico: int) -> int:
        return ceil_div(pico, refill * 1000)
    if n > capacity:
        return [0, tokens // PICO, capacity, -1, ms(full - tokens)], KEEP
    wanted = n * PICO
    if tokens < wanted:
        return [0, tokens // PICO, capacity, ms(wanted - tokens), ms(full - tokens)], KEEP
    left = tokens - wanted
    return [1, left // PICO, capacity, 0, ms(full - left)], ((left, last) if n > 0 else KEEP)


def leaky_bucket(state: Any, now: int, capacity: int, refill: int, n: int) -> tuple[Fields, Any]:
    full = capacity * PICO
    if state is None:
        level, last = 0, now
    else:
        last = max(now, state[1])
        level = max(0, state[0] - (last - state[1]) * refill)
    def ms(pico: int) -> int:
        return ceil_div(pico, refill * 1000)
    def free(lv: int) -> int:
        return max(0, full - lv) // PICO
    if n > capacity:
        return [0, free(level), capacity, -1, ms(level), 0], KEEP
    queued = level + n * PICO
    if queued > full:
        return [0, free(level), capacity, ms(queued - full), ms(level), 0], KEEP
    return [1, free(queued), capacity, 0, ms(queued), ms(level)], ((queued, last) if n > 0 else KEEP)


def fixed_window(state: Any, now: int, limit: int, window: int, n: int) -> tuple[Fields, Any]:
    if state is not None:
        now = max(now, state[0])
    start = now - now % window
    count = state[1] if state is not None and state[0] - state[0] % window == start else 0
    def reset(c: int) -> int:
        return 0 if c == 0 else ms_between(now, start + window)
    remaining = max(0, limit - count)
    if n > limit:
        return [0, remaining, limit, -1, reset(count)], KEEP
    if count + n > limit:
        return [0, remaining, limit, reset(count), reset(count)], KEEP
    return [1, limit - count - n, limit, 0, reset(count + n)], ((now, count + n) if n > 0 else KEEP)


def sliding_window(state: Any, now: int, limit: int, window: int, n: int) -> tuple[Fields, Any]:
    if state is not None:
        now = max(now, state[0])
    start = now - now % window
    previous, current = 0, 0
    if state is not None:
        last_start = state[0] - state[0] % window
        if last_start == start:
            previous, current = state[1], state[2]
        elif last_start + window == start:
            previous = state[2]
    elapsed = now - start

    def estimate(cur: int) -> int:
        return previous * (window - elapsed) + cur * window

    def remaining(cur: int) -> int:
        return max(0, limit * window - estimate(cur)) // window

    def reset(prev: int, cur: int) -> int:
        if prev == 0 and cur == 0:
            return 0
        return ms_between(now, start + window if cur == 0 else start + 2 * window)

    if n > limit:
        return [0, remaining(current), limit, -1, reset(previous, current)], KEEP
    if estimate(current + n) > limit * window:
        to_edge = window - elapsed
        wait = None
        if limit - (current + n) >= 0:
            excess = max(0, previous * to_edge - (limit - current - n) * window)
            candidate = ceil_div(excess, max(previous, 1))
            if candidate < to_edge:
                wait = candidate
        if wait is None:
            excess = max(0, current * window - (limit - n) * window)
            wait = to_edge + ceil_div(excess, max(current, 1))
        return [0, remaining(current), limit, ceil_div(wait, 1000), reset(previous, current)], KEEP
    after = current + n
    return [1, remaining(after), limit, 0, reset(previous, after)], ((now, previous, after) if n > 0 else KEEP)


def sliding_log(state: Any, now: int, limit: int, window: int, n: int) -> tuple[Fields, Any]:
    """state: a list of [at_us, count] runs, oldest first."""
    runs: list[list[int]] = state or []
    if runs:
        now = max(now, runs[-1][0])
    cutoff = max(0, now + 1 - window)
    live = [run for run in runs if run[0] >= cutoff]
    count = sum(c for _, c in live)
    def leaves(at: int) -> int:
        return ms_between(now, at + window)
    reset = 0 if count == 0 else leaves(runs[-1][0])
    remaining = max(0, limit - count)
    if n > limit:
        return [0, remaining, limit, -1, reset], KEEP
    if count + n > limit:
        must_leave, seen, retry = count + n - limit, 0, reset
        for at, c in live:
            seen += c
            if seen >= must_leave:
                retry = leaves(at)
                break
        return [0, remaining, limit, retry, reset], KEEP
    if n == 0:
        return [1, remaining, limit, 0, reset], KEEP
    return [1, remaining - n, limit, 0, leaves(now)], [*live, [now, n]]


#: A concurrency limit's state: (last_us, next_id, leases), a lease being (id, expires_us, n).
Leases = tuple[int, int, tuple[tuple[int, int, int], ...]]


def live_leases(state: Optional[Leases], now: int) -> tuple[int, int, list[tuple[int, int, int]]]:
    """`now` (never before the last call), the next id, the leases not run out."""
    last, next_id, leases = state or (0, 1, ())
    now = max(now, last)
    return now, next_id, [lease for lease in leases if lease[1] > now]


def held_and_reset(leases: Sequence[tuple[int, int, int]], now: int) -> tuple[int, int]:
    """Slots held, and ms until the last lease runs out."""
    return sum(n for _, _, n in leases), max((ms_between(now, end) for _, end, _ in leases), default=0)


def concurrency(state: Any, now: int, limit: int, lease: int, n: int) -> tuple[Fields, Any]:
    """RL.ACQUIRE: the fields and a sixth, the lease id (0: none taken)."""
    now, next_id, live = live_leases(state, now)
    held, reset = held_and_reset(live, now)
    remaining = max(0, limit - held)
    if n > limit:
        return [0, remaining, limit, -1, reset, 0], KEEP
    if held + n > limit:
        must_free, freed, retry = held + n - limit, 0, reset
        for end, count in sorted((end, count) for _, end, count in live):
            freed += count
            if freed >= must_free:
                retry = ms_between(now, end)
                break
        return [0, remaining, limit, retry, reset, 0], KEEP
    lease_id = 1 if held == 0 else next_id
    if n > 0 and lease_id > MAX_ID:
        return [0, remaining, limit, reset, reset, 0], KEEP
    if n == 0:
        return [1, remaining, limit, 0, reset, 0], KEEP
    end = now + lease
    fields = [1, remaining - n, limit, 0, max(reset, ms_between(now, end)), lease_id]
    return fields, (now, lease_id + 1, (*live, (lease_id, end, n)))


ALGORITHMS = {
    "tokenbucket": token_bucket,
    "leakybucket": leaky_bucket,
    "fixedwindow": fixed_window,
    "slidingwindow": sliding_window,
    "slidinglog": sliding_log,
    "concurrency": concurrency,
}


class LocalLimiter:
    """RL.MULTI in process: `multi(keys, now_us, specs)` with specs of
    (algorithm, size, parameter text, n); at most `size` keys kept (a
    concurrency limit's leases too: the oldest state goes first). Each key
    keeps its algorithm: another algorithm's call on it raises the
    module's WRONGTYPE, and nothing changes."""

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self.states: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def multi(self, keys: Sequence[str], now_us: int, specs: Sequence[tuple[str, int, str, int]]) -> list[Any]:
        with self.lock:
            states = [self._state(key, algorithm) for key, (algorithm, *_) in zip(keys, specs)]
            verdicts = []
            for state, (algorithm, size, parameter, n) in zip(states, specs):
                verdicts.append(ALGORITHMS[algorithm](state, now_us, size, micros(parameter), n))
            allowed = all(fields[0] == 1 for fields, _ in verdicts)
            if allowed:
                for key, (algorithm, *_), (fields, store) in zip(keys, specs, verdicts):
                    self._store(key, algorithm, fields, store)
                return [1, 0, *(fields for fields, _ in verdicts)]
            waits = [fields[3] for fields, _ in verdicts if fields[0] == 0]
            replies = []
            for state, (algorithm, size, parameter, _), (fields, _) in zip(states, specs, verdicts):
                if fields[0] == 1:  # admitted alone: what it keeps, as a look
                    fields = ALGORITHMS[algorithm](state, now_us, size, micros(parameter), 0)[0]
                replies.append(fields)
            return [0, -1 if -1 in waits else max(waits), *replies]

    def release(self, key: str, lease_id: int, now_us: int) -> list[int]:
        """RL.RELEASE: [released, held, reset_after_ms]."""
        with self.lock:
            now, next_id, live = live_leases(self._state(key, "concurrency"), now_us)
            others = [lease for lease in live if lease[0] != lease_id]
            if len(others) == len(live):
                return [0, *held_and_reset(live, now)]
            if others:
                self.states[key] = ("concurrency", (now, next_id, tuple(others)))
            else:  # the last lease: no state, as Redis deletes the key
                self.states.pop(key, None)
            return [1, *held_and_reset(others, now)]

    def renew(self, key: str, lease_id: int, lease_us: int, now_us: int) -> list[int]:
        """RL.RENEW: [renewed, held, reset_after_ms]; a held lease runs out `lease_us` from now instead."""
        with self.lock:
            now, next_id, live = live_leases(self._state(key, "concurrency"), now_us)
            if all(lease[0] != lease_id for lease in live):
                return [0, *held_and_reset(live, now)]
            renewed = [(i, now + lease_us if i == lease_id else end, n) for i, end, n in live]
            self.states[key] = ("concurrency", (now, next_id, tuple(renewed)))
            return [1, *held_and_reset(renewed, now)]

    def _state(self, key: str, algorithm: str) -> Any:
        kept = self.states.get(key)
        if kept is None:
            return None
        if kept[0] != algorithm:
            raise ResponseError(WRONGTYPE)
        self.states.move_to_end(key)  # used now: the least recently used go first
        return kept[1]

    def _store(self, key: str, algorithm: str, fields: Fields, store: Any) -> None:
        if store is KEEP:
            return
        if fields[4] == 0:  # fresh again: no state, as Redis deletes the key
            self.states.pop(key, None)
            return
        self.states[key] = (algorithm, store)
        self.states.move_to_end(key)
        while len(self.states) > self.size:
            self.states.popitem(last=False)
