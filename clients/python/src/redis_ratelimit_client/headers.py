"""A decision as HTTP: the rate-limit fields (`headers`: the RateLimit-Policy
and RateLimit fields of draft-ietf-httpapi-ratelimit-headers, draft 10;
the RateLimit-Limit / -Remaining / -Reset of its earlier drafts; GitHub's
X-RateLimit-*; or none), Retry-After, and the bodies of a 429 and a 503.
docs/clients.md says what each value is and why; the other clients send
the same."""

from __future__ import annotations

import math
import time
from typing import Callable, Literal, Optional, Union

from .decision import Decision, LimitResult

SF_MAX = 999_999_999_999_999  # Structured Fields Integers stop at 15 digits

DEFAULT_MESSAGE = "Rate limit exceeded. Please try again later."
NEVER_MESSAGE = "This request costs more than the rate limit allows in total; it can never be admitted."
UNAVAILABLE_BODY: dict[str, str] = {"error": "rate_limiter_unavailable"}

Body = dict[str, Union[str, int, None]]
#: Which rate-limit fields a response carries (the layers' `headers` option).
Headers = Union[bool, Literal["draft-10", "draft-6", "legacy"]]
HEADERS: tuple[Headers, ...] = (True, "draft-10", "draft-6", "legacy", False)


def seconds(ms: int) -> int:
    """Whole seconds, rounded up."""
    return math.ceil(ms / 1000)


def reset_seconds(result: LimitResult, decision: Decision) -> Optional[int]:
    """The draft's `t`: seconds until more quota is available, or None when
    none will come (the limiter is fresh, or it can never admit). A
    concurrency limit: when its last lease runs out (a release may come sooner)."""
    if not decision.allowed and not result.allowed:
        return None if result.retry_after_ms == -1 else seconds(decision.retry_after_ms)
    if result.reset_after_ms <= 0:
        return None
    if result.spec.is_bucket:
        # Units come back continuously: the next whole one is
        # (limit - remaining - 1) / rate before full. The reply's reset is
        # rounded up to a millisecond: take that back.
        next_unit = (result.reset_after_ms - 1) / 1000 - (result.limit - result.remaining - 1) / result.spec.parameter
        return max(0, math.ceil(next_unit))
    # Fixed window: its end. Sliding window and log: when fresh, an upper bound.
    return seconds(result.reset_after_ms)


def sf_string(text: str) -> str:
    """A Structured Fields String (RFC 9651): policy names are printable ASCII."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rate_limit_headers(decision: Decision, headers: Headers = True, clock: Callable[[], float] = time.time) -> dict[str, str]:
    """The fields `headers` picks, and Retry-After on a denial that can
    pass later whatever it picks. True or "draft-10": RateLimit-Policy and
    RateLimit, every limit; "draft-6": RateLimit-Limit, -Remaining and
    -Reset (seconds), "legacy": X-RateLimit-Limit, -Remaining and -Reset
    (Unix seconds: the clock, rounded up, plus the reset), for the limit
    closest to denial; False: none."""
    if headers is True or headers == "draft-10":
        fields = draft_10(decision)
    elif headers == "draft-6" or headers == "legacy":
        result = closest(decision)
        t = reset_seconds(result, decision) or 0
        prefix, reset = ("RateLimit-", t) if headers == "draft-6" else ("X-RateLimit-", math.ceil(clock()) + t)
        fields = {f"{prefix}Limit": str(result.limit), f"{prefix}Remaining": str(result.remaining), f"{prefix}Reset": str(reset)}
    else:
        fields = {}
    if not decision.allowed and decision.retry_after_ms >= 0:
        fields["Retry-After"] = str(seconds(decision.retry_after_ms))
    return fields


def closest(decision: Decision) -> LimitResult:
    """The limit closest to denial: on a denial, the denying limit with
    the longest wait; else the one with the fewest remaining (the first in
    the limiter's order on a tie)."""
    if not decision.allowed:
        return max((r for r in decision.limits if not r.allowed), key=lambda r: r.retry_after_ms)
    return min(decision.limits, key=lambda r: r.remaining)


def draft_10(decision: Decision) -> dict[str, str]:
    """RateLimit-Policy and RateLimit, one member per limit in the
    limiter's order. Serialized here (Structured Fields Lists of Strings
    with Integer or String parameters): a general serializer cost a third
    of a check."""
    policies: list[str] = []
    states: list[str] = []
    for result in decision.limits:
        name = sf_string(result.name)
        unit = "" if result.spec.unit == "requests" else f";qu={sf_string(result.spec.unit)}"
        window = "" if result.spec.is_concurrency else f";w={result.spec.window_seconds(result.limit)}"  # slots have no window
        policies.append(f"{name};q={min(result.limit, SF_MAX)}{unit}{window}")
        t = reset_seconds(result, decision)
        reset = "" if t is None else f";t={min(t, SF_MAX)}"
        states.append(f"{name};r={min(result.remaining, SF_MAX)}{reset}")
    return {"RateLimit-Policy": ", ".join(policies), "RateLimit": ", ".join(states)}


def denied_body(decision: Decision, message: str = DEFAULT_MESSAGE) -> Body:
    """The JSON body of a 429 (the seed's); `message` replaces the default
    one of a denial that can pass later."""
    if decision.never_allowed:
        return {"error": "rate_limit_exceeded", "message": NEVER_MESSAGE, "retry_after_seconds": None}
    return {"error": "rate_limit_exceeded", "message": message, "retry_after_seconds": seconds(decision.retry_after_ms)}
