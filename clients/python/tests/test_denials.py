"""Denials answered in process (denials.py), against a real server in
both modes: how many calls reached Redis says whether the limiter asked it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
import redis.asyncio

from modes import calls
from redis_ratelimit_client import AsyncRateLimiter, ConfigurationError, Decision, Limit, RateLimiter, denied_body, rate_limit_headers
from servers import Server

LIMITS = [
    Limit("fixedwindow", 2, window=1_000_000, name="per-user", cost=lambda request: request[1]),
    Limit("tokenbucket", 100, rate=0.001, name="tokens", cost=lambda request: request[1]),
]


def limiter(r: redis.Redis, **options: Any) -> RateLimiter:
    return RateLimiter(r, LIMITS, key=lambda request: request[0], **options)


def denied(decision: Decision | None) -> Decision:
    assert decision is not None and not decision.allowed
    return decision


def test_a_flood_from_one_key_is_denied_without_redis(r: redis.Redis, mode: str) -> None:
    check = limiter(r)
    assert [check.check(("u1", 1)).allowed for _ in range(2)] == [True, True]  # type: ignore[union-attr]
    first = denied(check.check(("u1", 1)))
    before = calls(r, mode)
    flood = [denied(check.check(("u1", 1))) for _ in range(300)]
    assert calls(r, mode) == before  # not one more call
    last = flood[-1]
    # The same answer, its waits counted down: same status, headers (Retry-After counts down), body.
    assert 0 < last.retry_after_ms <= first.retry_after_ms and first.retry_after_ms - last.retry_after_ms < 60_000
    assert [(x.name, x.allowed, x.remaining, x.limit) for x in last.limits] == [(x.name, x.allowed, x.remaining, x.limit) for x in first.limits]
    assert rate_limit_headers(last)["RateLimit-Policy"] == rate_limit_headers(first)["RateLimit-Policy"]
    assert denied_body(last)["error"] == "rate_limit_exceeded"
    # A larger cost is denied in process too; a smaller one (0: a look), another key, other limits ask Redis.
    denied(check.check(("u1", 2)))
    assert calls(r, mode) == before
    assert check.check(("u2", 1)).allowed  # type: ignore[union-attr]
    assert calls(r, mode) == before + 1
    assert check.check(("u1", 0)).allowed  # type: ignore[union-attr]
    assert calls(r, mode) == before + 2
    other = RateLimiter(r, [Limit("fixedwindow", 3, window=1_000_000, name="per-user")], key=lambda request: request[0])
    assert other.check(("u1", 1)).allowed  # type: ignore[union-attr]  # limit 3, not 2: its own entry
    assert calls(r, mode) == before + 3


def test_after_the_wait_redis_is_asked_again(r: redis.Redis, mode: str) -> None:
    check = RateLimiter(r, Limit("tokenbucket", 1, rate=5), key=lambda request: "fast")  # a token every 200 ms
    assert check.check().allowed  # type: ignore[union-attr]
    first = denied(check.check())
    assert 0 < first.retry_after_ms <= 200
    before = calls(r, mode)
    while True:
        decision = check.check()
        if decision is not None and decision.allowed:
            break
    assert calls(r, mode) == before + 1  # the first check after the wait, and only it, asked Redis


def test_denial_cache_0_asks_redis_every_time(r: redis.Redis, mode: str) -> None:
    check = limiter(r, denial_cache=0)
    for _ in range(2):
        check.check(("u1", 1))
    before = calls(r, mode)
    for _ in range(5):
        denied(check.check(("u1", 1)))
    assert calls(r, mode) == before + 5


def test_the_least_recently_used_denial_goes_first(r: redis.Redis, mode: str) -> None:
    check = limiter(r, denial_cache=2)
    for user in ("a", "b", "c"):
        for _ in range(2):
            check.check((user, 1))
    for user in ("a", "b"):
        denied(check.check((user, 1)))
    denied(check.check(("a", 1)))  # a is used again: b is the oldest
    denied(check.check(("c", 1)))  # c in, b out
    before = calls(r, mode)
    for user in ("a", "c"):
        denied(check.check((user, 1)))
    assert calls(r, mode) == before
    denied(check.check(("b", 1)))
    assert calls(r, mode) == before + 1
    assert len(check.core.denials.entries) == 2


def test_a_never_admissible_denial_is_kept_one_second(r: redis.Redis, mode: str) -> None:
    check = limiter(r)
    never = denied(check.check(("u1", 3)))  # 3 > the per-user limit of 2: never
    assert never.retry_after_ms == -1
    before = calls(r, mode)
    started = time.monotonic()
    assert denied(check.check(("u1", 5))).retry_after_ms == -1
    assert denied(check.check(("u1", 3))).retry_after_ms == -1
    if time.monotonic() - started < 0.9:
        assert calls(r, mode) == before
    assert check.check(("u1", 1)).allowed  # type: ignore[union-attr]  # a smaller cost asks Redis
    time.sleep(1.05)
    assert denied(check.check(("u1", 3))).retry_after_ms == -1
    assert calls(r, mode) == before + 2


def test_a_larger_cost_that_can_never_pass_is_not_given_a_wait(r: redis.Redis, mode: str) -> None:
    check = limiter(r)
    for _ in range(3):
        check.check(("u1", 1))
    assert denied(check.check(("u1", 1))).retry_after_ms > 0
    assert denied(check.check(("u1", 3))).retry_after_ms == -1  # Redis's answer


def test_the_asyncio_limiter_answers_denials_in_process(server: Server, r: redis.Redis, mode: str) -> None:
    async def run() -> int:
        client = redis.asyncio.Redis(port=server.port)
        check = AsyncRateLimiter(client, LIMITS, key=lambda request: request[0])
        for _ in range(2):
            await check.check(("u1", 1))
        denied(await check.check(("u1", 1)))
        before = calls(r, mode)
        for _ in range(50):
            denied(await check.check(("u1", 1)))
        await client.aclose()
        return calls(r, mode) - before

    assert asyncio.run(run()) == 0


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_a_bad_denial_cache_is_refused(r: redis.Redis, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"^denial_cache: must be an integer >= 0, the most denials kept \(0: off\) \(got "):
        limiter(r, denial_cache=bad)
