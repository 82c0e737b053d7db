"""Rate limiting for Python web APIs on the redis-ratelimit Redis module,
or on any Redis through the same commands in Lua (mode.py): a limiter
for redis-py's sync and asyncio clients (standalone and cluster), IETF
RateLimit headers, and thin layers for ASGI (Starlette, FastAPI,
Litestar), Flask and Django. The spec both clients follow: docs/clients.md."""

from .decision import Decision, LimitResult
from .headers import DEFAULT_MESSAGE, NEVER_MESSAGE, UNAVAILABLE_BODY, Headers, denied_body, rate_limit_headers
from .keys import by_ip, by_user, ip_key
from .limiter import AsyncRateLimiter, RateLimiter, RateLimiterUnavailable
from .metrics import DecisionEvent
from .mode import Mode
from .limits import (
    Algorithm,
    ConfigurationError,
    Limit,
    concurrency,
    fixed_window,
    leaky_bucket,
    sliding_log,
    sliding_window,
    token_bucket,
)

__all__ = [
    "Algorithm",
    "AsyncRateLimiter",
    "ConfigurationError",
    "DEFAULT_MESSAGE",
    "Decision",
    "DecisionEvent",
    "Headers",
    "Limit",
    "Mode",
    "LimitResult",
    "NEVER_MESSAGE",
    "RateLimiter",
    "RateLimiterUnavailable",
    "UNAVAILABLE_BODY",
    "by_ip",
    "by_user",
    "concurrency",
    "denied_body",
    "fixed_window",
    "ip_key",
    "leaky_bucket",
    "rate_limit_headers",
    "sliding_log",
    "sliding_window",
    "token_bucket",
]
