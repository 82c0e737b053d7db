"""Denials answered in process: after Redis denies a request with
`retry_after_ms` R, the same keys and limits, for the same or a larger
cost, are denied here for R ms without a call to Redis, so a flood from
one client does not become a flood on Redis. The answer is the cached
decision with its waits counted down. It can only be stricter than Redis:
a refund made elsewhere in the meantime is not seen."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from typing import Callable, Optional, Sequence

from .commands import Charge
from .decision import Decision

#: A "never admissible" denial (retry_after_ms -1) is kept this long.
NEVER_MS = 1000

#: The Redis key, algorithm, limit and rate or window of each limit.
EntryKey = tuple[tuple[str, str, int, float, str], ...]


def entry_key(charges: Sequence[Charge]) -> EntryKey:
    return tuple((c.key, c.spec.algorithm, c.limit, c.spec.parameter, c.spec.quota_unit) for c in charges)


@dataclasses.dataclass
class _Entry:
    decision: Decision
    costs: tuple[int, ...]
    stored_ms: float
    until_ms: float


class DenialCache:
    """At most `size` denials, the least recently used out; thread-safe
    (the sync limiter serves threads)."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.clock = clock
        self.entries: OrderedDict[EntryKey, _Entry] = OrderedDict()
        self.lock = threading.Lock()

    def _now_ms(self) -> float:
        return self.clock() * 1000

    def remember(self, charges: Sequence[Charge], decision: Decision) -> None:
        if self.size == 0 or decision.allowed or any(c.spec.is_concurrency for c in charges):
            return  # a release frees a slot long before a lease's retry_after_ms
        now = self._now_ms()
        wait = NEVER_MS if decision.retry_after_ms == -1 else decision.retry_after_ms
        entry = _Entry(decision, tuple(c.cost for c in charges), now, now + wait)
        key = entry_key(charges)
        with self.lock:
            self.entries[key] = entry
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)

    def answer(self, charges: Sequence[Charge]) -> Optional[Decision]:
        """The cached denial, counted down, when it covers this request."""
        if self.size == 0:
            return None
        key = entry_key(charges)
        now = self._now_ms()
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                return None
            if now >= entry.until_ms:
                del self.entries[key]
                return None
            self.entries.move_to_end(key)
        if any(c.cost < cached for c, cached in zip(charges, entry.costs)):
            return None  # a smaller request may pass: ask Redis
        if entry.decision.retry_after_ms != -1 and any(c.cost > c.limit for c in charges):
            return None  # this one can never pass, which Redis says (-1), not the cached wait
        return counted_down(entry.decision, int(now - entry.stored_ms))


def counted_down(decision: Decision, elapsed_ms: int) -> Decision:
    """The decision `elapsed_ms` later: every wait shorter by that much
    (never below 0; -1, never admissible, stays)."""

    def less(ms: int) -> int:
        return ms if ms <= 0 else max(0, ms - elapsed_ms)

    limits = tuple(dataclasses.replace(r, retry_after_ms=less(r.retry_after_ms), reset_after_ms=less(r.reset_after_ms)) for r in decision.limits)
    return Decision(decision.allowed, less(decision.retry_after_ms), limits)
