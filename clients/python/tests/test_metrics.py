"""Metrics through OpenTelemetry (the SDK's in-memory reader) and the
on_decision hook, against a real server in both modes, Redis up and down."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from redis_ratelimit_client import DecisionEvent, Limit, RateLimiter, RateLimiterUnavailable
from servers import Server

READER = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))

LIMITS = [Limit("fixedwindow", 2, window=1_000_000, name="per-ip"), Limit("tokenbucket", 100, rate=0.001, name="tokens")]


def points(name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    """The metric's data points by their attributes: counts, or histogram counts."""
    data = READER.get_metrics_data()
    out: dict[tuple[tuple[str, Any], ...], Any] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            if scope.scope.name != "redis-ratelimit-client":
                continue
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        out[tuple(sorted((point.attributes or {}).items()))] = point.value if hasattr(point, "value") else point.count
    return out


def decisions(policy: str) -> dict[str, int]:
    return {dict(key)["ratelimit.outcome"]: value for key, value in points("ratelimit.decisions").items() if dict(key)["ratelimit.policy"] == policy}


def test_decisions_by_policy_and_outcome_and_the_hook(own_server: Server) -> None:
    policy = "per-ip,tokens"
    before = decisions(policy)
    calls_before = {dict(k)["ratelimit.result"]: v for k, v in points("ratelimit.redis.duration").items()}
    events: list[DecisionEvent] = []
    client = redis.Redis(port=own_server.port)
    limiter = RateLimiter(client, LIMITS, key=lambda request: request, on_decision=events.append)
    local = RateLimiter(client, LIMITS, key=lambda request: request, on_unavailable="local", on_decision=events.append)
    closed = RateLimiter(client, LIMITS, key=lambda request: request, on_unavailable="closed")
    for _ in range(2):
        assert limiter.check("m").allowed  # type: ignore[union-attr]
    assert not limiter.check("m").allowed  # type: ignore[union-attr]  # Redis denies
    assert not limiter.check("m").allowed  # type: ignore[union-attr]  # denied in process
    own_server.stop()
    try:
        assert limiter.check("n") is None
        assert [local.check("n").allowed for _ in range(3)] == [True, True, False]  # type: ignore[union-attr]
        with pytest.raises(RateLimiterUnavailable):
            closed.check("n")
    finally:
        own_server.start()
    after = decisions(policy)
    counted = {outcome: after.get(outcome, 0) - before.get(outcome, 0) for outcome in after}
    assert {k: v for k, v in counted.items() if v} == {
        "allowed": 2,
        "denied": 1,
        "denied_in_process": 1,
        "unavailable_open": 1,
        "unavailable_local_allowed": 2,
        "unavailable_local_denied": 1,
        "unavailable_closed": 1,
    }
    # The Redis calls: 3 answered (the in-process denial and the policy's answers made none), and those that failed.
    calls = {dict(k)["ratelimit.result"]: v for k, v in points("ratelimit.redis.duration").items()}
    assert calls.get("ok", 0) - calls_before.get("ok", 0) == 3
    assert calls.get("error", 0) + calls.get("timeout", 0) - calls_before.get("error", 0) - calls_before.get("timeout", 0) == 3
    # The hook: every check of the two limiters that have it, in order.
    assert [e.outcome for e in events] == ["allowed", "allowed", "denied", "denied_in_process", "unavailable_open", "unavailable_local_allowed", "unavailable_local_allowed", "unavailable_local_denied"]
    assert events[0].decision is not None and events[0].duration_ms is not None and events[0].duration_ms > 0 and events[0].error is None
    assert events[3].duration_ms is None and events[3].decision is not None and events[3].decision.retry_after_ms > 0
    assert events[4].decision is None and events[4].error is not None
    assert events[6].duration_ms is None and events[6].error is not None  # the outage was known: Redis was not called


def test_an_exception_in_the_hook_is_logged_and_the_request_goes_on(own_server: Server, caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: DecisionEvent) -> None:
        raise RuntimeError("the hook's bug")

    limiter = RateLimiter(redis.Redis(port=own_server.port), LIMITS, key=lambda request: "h", on_decision=broken)
    with caplog.at_level(logging.ERROR, logger="redis_ratelimit_client"):
        decision = limiter.check()
    assert decision is not None and decision.allowed
    assert [r.getMessage() for r in caplog.records] == ["rate limiter: on_decision raised"]
    assert "the hook's bug" in caplog.text
