"""What the module answered for one request, limit by limit."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional

from .limits import Algorithm, Limit


@dataclass(frozen=True)
class LimitResult:
    """One limit's fields, as its own command would reply them."""

    name: str
    key: str  # the Redis key
    algorithm: Algorithm
    allowed: bool  # this limit alone would admit the request
    remaining: int
    limit: int
    retry_after_ms: int  # 0 allowed, -1 never
    reset_after_ms: int
    delay_ms: Optional[int]  # leaky bucket only
    cost: int
    spec: Limit = field(repr=False, compare=False)
    lease_id: Optional[int] = None  # concurrency only: the lease taken, 0 when none


class Once:
    """True the first time only, also across threads: a decision's
    leases are released once, whoever asks first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False

    def first(self) -> bool:
        with self._lock:
            done, self._done = self._done, True
            return not done


@dataclass(frozen=True)
class Decision:
    """`allowed` when every limit admitted its cost (then each took it);
    `retry_after_ms` 0 when allowed, -1 when the request can never pass,
    else the wait after which all of them admit. `local`: decided in
    process (on_unavailable="local"), so its leases are the process's."""

    allowed: bool
    retry_after_ms: int
    limits: tuple[LimitResult, ...]
    local: bool = False
    release_once: Once = field(default_factory=Once, repr=False, compare=False)

    @property
    def never_allowed(self) -> bool:
        return self.retry_after_ms == -1

    @property
    def delay_ms(self) -> int:
        """The largest leaky-bucket delay: how long to wait before doing the work."""
        return max((r.delay_ms or 0 for r in self.limits), default=0)

    @property
    def leases(self) -> tuple[LimitResult, ...]:
        """The concurrency limits' results that hold a lease (limiter.release frees them)."""
        return tuple(r for r in self.limits if r.lease_id)

    def limit(self, name: str) -> LimitResult:
        for result in self.limits:
            if result.name == name:
                return result
        raise KeyError(name)
