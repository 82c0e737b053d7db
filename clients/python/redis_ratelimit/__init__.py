"""redis-ratelimit from Python: call the module with redis-py, get a
decision, and turn it into HTTP headers and a 429 body, whatever the web
framework (ASGI or WSGI)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional, Union

Algorithm = Literal["tokenbucket", "leakybucket", "fixedwindow", "slidingwindow", "slidinglog"]


@dataclass(frozen=True)
class Decision:
    """The module's reply, named, plus the policy the headers advertise."""

    allowed: bool
    remaining: int
    limit: int
    retry_after_ms: int  # 0 when allowed, -1 when the request can never pass
    reset_after_ms: int
    policy: str = "default"
    window_seconds: int = 1  # the time the whole quota takes to come back
    delay_ms: Optional[int] = None  # leaky bucket only


def _seconds_text(seconds: float) -> str:
    # Six decimals at most: the module keeps time and rates to the microsecond.
    text = f"{seconds:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def command(
    key: str,
    *,
    limit: int,
    algorithm: Algorithm = "tokenbucket",
    rate: Optional[float] = None,
    window: Optional[float] = None,
    cost: int = 1,
    now: Union[float, Literal["*"]] = "*",
) -> list[str]:
    """The module command for one call."""
    bucket = algorithm.endswith("bucket")
    second = rate if bucket else window
    if second is None or not second > 0:
        raise ValueError(f"{algorithm} needs a positive {'rate' if bucket else 'window'}")
    at = "*" if now == "*" else _seconds_text(float(now))
    return [f"RL.{algorithm.upper()}", key, str(limit), _seconds_text(second), at, str(cost)]


def check(
    redis,
    client_id: str,
    *,
    limit: int,
    algorithm: Algorithm = "tokenbucket",
    rate: Optional[float] = None,
    window: Optional[float] = None,
    cost: int = 1,
    now: Union[float, Literal["*"]] = "*",
    prefix: str = "ratelimit:",
    policy: str = "default",
) -> Decision:
    """Asks the limiter whether `client_id` may make this request, taking
    `cost` units when it may. `redis` is a redis-py client."""
    args = command(
        prefix + client_id, limit=limit, algorithm=algorithm, rate=rate, window=window, cost=cost, now=now
    )
    reply = [int(x) for x in redis.execute_command(*args)]
    quota_seconds = limit / rate if algorithm.endswith("bucket") else window
    return Decision(
        allowed=reply[0] == 1,
        remaining=reply[1],
        limit=reply[2],
        retry_after_ms=reply[3],
        reset_after_ms=reply[4],
        policy=policy,
        window_seconds=max(1, math.ceil(quota_seconds)),
        delay_ms=reply[5] if len(reply) > 5 else None,
    )


def seconds(ms: int) -> int:
    """Whole seconds, rounded up."""
    return -(-ms // 1000)


def _sf_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def headers(decision: Decision, legacy: bool = False) -> dict[str, str]:
    """The fields of draft-ietf-httpapi-ratelimit-headers
    (`RateLimit-Policy: "default";q=100;w=60`, `RateLimit: "default";r=42;t=30`),
    with `legacy` also RateLimit-Limit/-Remaining/-Reset, and on denial
    Retry-After, unless the request can never pass."""
    name = _sf_string(decision.policy)
    reset = seconds(decision.reset_after_ms)
    out = {
        "RateLimit-Policy": f"{name};q={decision.limit};w={decision.window_seconds}",
        "RateLimit": f"{name};r={decision.remaining};t={reset}",
    }
    if legacy:
        out["RateLimit-Limit"] = str(decision.limit)
        out["RateLimit-Remaining"] = str(decision.remaining)
        out["RateLimit-Reset"] = str(reset)
    if not decision.allowed and decision.retry_after_ms >= 0:
        out["Retry-After"] = str(seconds(decision.retry_after_ms))
    return out


def denied_body(decision: Decision, message: str = "Rate limit exceeded. Please try again later.") -> dict:
    """The JSON body of a 429; `retry_after_seconds` is None when the request can never pass."""
    retry = seconds(decision.retry_after_ms) if decision.retry_after_ms >= 0 else None
    return {"error": "rate_limit_exceeded", "message": message, "retry_after_seconds": retry}
