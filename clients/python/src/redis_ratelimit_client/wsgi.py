"""What the two WSGI layers (Flask, Django) share: one request's path
through a sync limiter, and when its concurrency leases are released."""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, Optional, TypeVar

from .decision import Decision
from .http import UNAVAILABLE, Answer, HttpOptions, answer
from .limiter import RateLimiter, RateLimiterUnavailable
from .limits import ConfigurationError

T = TypeVar("T")


def check_limiter(limiter: object) -> RateLimiter:
    if not isinstance(limiter, RateLimiter):
        raise ConfigurationError(f"limiter: must be a RateLimiter (got {type(limiter).__name__})")
    return limiter


def decide(limiter: RateLimiter, options: HttpOptions, request: Any) -> tuple[Optional[Decision], Optional[Answer]]:
    """As asgi.decide, for a sync limiter."""
    if options.skip is not None and options.skip(request):
        return None, None
    try:
        decision = limiter.check(request)
    except RateLimiterUnavailable:
        return None, UNAVAILABLE
    result = answer(decision, options)
    if decision is not None and result.status is None and options.throttle and decision.delay_ms > 0:
        time.sleep(decision.delay_ms / 1000)
    return decision, result


def release_when_done(limiter: RateLimiter, decision: Optional[Decision], streamed: Optional[Iterable[T]]) -> Optional[Iterator[T]]:
    """Releases the decision's leases now, the view's response being
    complete (before its bytes go out: a client that sends its next request
    on receipt finds its slot free). A streamed response's body (`streamed`)
    is returned wrapped instead, to release when its last chunk has been
    made or the server closes it (the client went away)."""
    if decision is None or not decision.leases:
        return None
    if streamed is None:
        limiter.release(decision)
        return None
    return _then_release(limiter, decision, streamed)


def _then_release(limiter: RateLimiter, decision: Decision, chunks: Iterable[T]) -> Iterator[T]:
    try:
        yield from chunks
    finally:
        limiter.release(decision)
