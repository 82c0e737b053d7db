"""What the module answered for one request, limit by limit."""

from __future__ import annotations

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


@dataclass(frozen=True)
class Decision:
    """`allowed` when every limit admitted its cost (then each took it);
    `retry_after_ms` 0 when allowed, -1 when the request can never pass,
    else the wait after which all of them admit."""

    allowed: bool
    retry_after_ms: int
    limits: tuple[LimitResult, ...]

    @property
    def never_allowed(self) -> bool:
        return self.retry_after_ms == -1

    @property
    def delay_ms(self) -> int:
        """The largest leaky-bucket delay: how long to wait before doing the work."""
        return max((r.delay_ms or 0 for r in self.limits), default=0)

    def limit(self, name: str) -> LimitResult:
        for result in self.limits:
            if result.name == name:
                return result
        raise KeyError(name)
