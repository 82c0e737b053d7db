"""What the two WSGI layers (Flask, Django) share: one request's path
through a sync limiter."""

from __future__ import annotations

import time
from typing import Any, Optional

from .decision import Decision
from .http import UNAVAILABLE, Answer, HttpOptions, answer
from .limiter import RateLimiter, RateLimiterUnavailable
from .limits import ConfigurationError


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
