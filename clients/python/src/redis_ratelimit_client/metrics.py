"""Metrics through OpenTelemetry's API, when it is installed (the `otel`
extra; without an SDK its calls do nothing), and the `on_decision` hook.

- counter `ratelimit.decisions`, attributes `ratelimit.policy` (the limit
  names joined with ",") and `ratelimit.outcome` (OUTCOMES);
- histogram `ratelimit.redis.duration`, seconds, attribute
  `ratelimit.result`: `ok`, `error` (an error reply or a broken
  connection), `timeout`."""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import dataclass
from typing import Any, Callable, Optional

from redis.exceptions import TimeoutError as RedisTimeoutError

from .decision import Decision

try:
    from opentelemetry import metrics as otel
except ImportError:  # the optional extra is not installed
    otel = None  # type: ignore[assignment]

log = logging.getLogger("redis_ratelimit_client")

METER = "redis-ratelimit-client"
OUTCOMES = (
    "allowed",
    "denied",
    "denied_in_process",
    "unavailable_open",
    "unavailable_closed",
    "unavailable_local_allowed",
    "unavailable_local_denied",
)


@dataclass(frozen=True)
class DecisionEvent:
    """What on_decision receives for each check."""

    outcome: str  # one of OUTCOMES
    decision: Optional[Decision]  # None when failing open or closed
    duration_ms: Optional[float]  # the Redis call's, None when Redis was not called
    error: Optional[BaseException]  # why Redis could not answer


OnDecision = Callable[[DecisionEvent], Any]


def call_result(error: Optional[BaseException]) -> str:
    """The histogram's `ratelimit.result` of a Redis call that raised `error` (None: ok)."""
    if error is None:
        return "ok"
    cause = error.__cause__ or error
    return "timeout" if isinstance(cause, (RedisTimeoutError, asyncio.TimeoutError, TimeoutError, socket.timeout)) else "error"


class Metrics:
    def __init__(self, policy: str, on_decision: Optional[OnDecision]) -> None:
        self.policy = policy
        self.on_decision = on_decision
        self.attributes = {outcome: {"ratelimit.policy": policy, "ratelimit.outcome": outcome} for outcome in OUTCOMES}
        self.decisions: Any = None
        self.duration: Any = None
        if otel is not None:
            meter = otel.get_meter(METER)
            self.decisions = meter.create_counter("ratelimit.decisions", unit="{decision}", description="Rate limit decisions by policy and outcome")
            self.duration = meter.create_histogram("ratelimit.redis.duration", unit="s", description="Duration of the limiter's Redis calls")

    def redis_call(self, seconds: float, error: Optional[BaseException]) -> None:
        if self.duration is not None:
            self.duration.record(seconds, {"ratelimit.result": call_result(error)})

    def decided(self, outcome: str, decision: Optional[Decision], seconds: Optional[float], error: Optional[BaseException]) -> None:
        if self.decisions is not None:
            self.decisions.add(1, self.attributes[outcome])
        if self.on_decision is not None:
            try:
                self.on_decision(DecisionEvent(outcome, decision, None if seconds is None else seconds * 1000, error))
            except Exception:  # a hook's bug never breaks the request
                log.exception("rate limiter: on_decision raised")
