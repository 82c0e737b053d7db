"""The RateLimit fields are serialized by hand (headers.py); http-sf, a
general Structured Fields serializer, must give the same text."""

from __future__ import annotations

import http_sf
import pytest

from redis_ratelimit_client import Decision, Limit, LimitResult, rate_limit_headers
from redis_ratelimit_client.headers import SF_MAX, reset_seconds


def result(name: str, limit: Limit, remaining: int, size: int, retry: int, reset: int, allowed: bool) -> LimitResult:
    return LimitResult(name, f"k:{name}", limit.algorithm, allowed, remaining, size, retry, reset, None, 1, limit)


@pytest.mark.parametrize("allowed", [True, False])
def test_the_fields_are_what_a_structured_fields_serializer_writes(allowed: bool) -> None:
    limits = (
        result('say "hi" \\ there', Limit("tokenbucket", 10, rate=0.5), 3, 10, 0 if allowed else 1500, 14_000, True),
        result("bytes", Limit("fixedwindow", 5, window=60, quota_unit="content-bytes"), 0, 2**53 - 1, 0 if allowed else 30_000, 30_000, allowed),
        result("never", Limit("slidinglog", 5, window=60), 5, 5, 0, 0, True),
    )
    decision = Decision(allowed, 0 if allowed else 30_000, limits)
    policies, states = [], []
    for r in limits:
        policy: dict[str, object] = {"q": min(r.limit, SF_MAX)}
        if r.spec.quota_unit != "requests":
            policy["qu"] = r.spec.quota_unit
        policy["w"] = r.spec.window_seconds(r.limit)
        policies.append((r.name, policy))
        state: dict[str, object] = {"r": min(r.remaining, SF_MAX)}
        t = reset_seconds(r, decision)
        if t is not None:
            state["t"] = min(t, SF_MAX)
        states.append((r.name, state))
    headers = rate_limit_headers(decision)
    assert headers["RateLimit-Policy"] == http_sf.ser(policies)  # type: ignore[arg-type]
    assert headers["RateLimit"] == http_sf.ser(states)  # type: ignore[arg-type]
    assert '"say \\"hi\\" \\\\ there";q=10;w=20' in headers["RateLimit-Policy"]
