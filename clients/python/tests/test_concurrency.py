"""Concurrency limits in the limiter, against real servers in both modes:
`Limit("concurrency", n, lease=s)` takes a lease in the request's RL.MULTI,
`limiter.release(decision)` frees it once (RL.RELEASE), refunds leave it
alone, a denial is never answered in process, a cluster's give-back
releases it, and on_unavailable="local" keeps leases in process."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster

from redis_ratelimit_client import AsyncRateLimiter, ConfigurationError, Decision, Limit, RateLimiter, RateLimiterUnavailable, concurrency, denied_body, rate_limit_headers
from modes import calls, function_stats, peek_remaining
from servers import Server

R = redis.Redis(port=1)  # never connected: options are checked before any call
SLOTS = Limit("concurrency", 2, lease=30, name="slots")
BURST = Limit("tokenbucket", 5, rate=0.001, name="burst")


@pytest.mark.parametrize(
    "limit, message",
    [
        (Limit("concurrency", 10), "limits.lease: required for concurrency (seconds)"),
        (Limit("concurrency", 10, rate=1), "limits.rate: not an option of concurrency (it takes lease)"),
        (Limit("concurrency", 10, window=30), "limits.window: not an option of concurrency (it takes lease)"),
        (Limit("tokenbucket", 10, rate=1, lease=30), "limits.lease: not an option of tokenbucket (it takes rate)"),
        (Limit("fixedwindow", 10, window=60, lease=30), "limits.lease: not an option of fixedwindow (it takes window)"),
        (Limit("concurrency", 10, lease=0.0001), "limits.lease: must be a number of seconds from 0.001 to 1e12 (got 0.0001)"),
        (Limit("concurrency", 10, lease=2e12), "limits.lease: must be a number of seconds from 0.001 to 1e12 (got 2000000000000.0)"),
        (Limit("concurrency", 0, lease=30), "limits.limit: must be an integer from 1 to 9007199254740991 (got 0)"),
        (Limit("concurrency", 10, lease=30, quota_unit="content-bytes"), "limits.quota_unit: a concurrency limit counts concurrent-requests (got 'content-bytes')"),
    ],
)
def test_a_bad_concurrency_limit_raises_naming_the_option(limit: Limit, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        RateLimiter(R, limit)
    assert str(raised.value) == message


def test_the_shorthand_and_the_unnamed_key() -> None:
    assert concurrency(10, 30) == Limit("concurrency", 10, lease=30)
    limiter = RateLimiter(R, Limit("concurrency", 10, lease=0.5), key=lambda request: "ip:203.0.113.7")
    assert [c.key for c in limiter.charges(None)] == ["ratelimit:{ip:203.0.113.7}:concurrency:10:0.5"]
    # The unit is implied: saying it changes neither the key nor the headers.
    said = RateLimiter(R, Limit("concurrency", 10, lease=0.5, quota_unit="concurrent-requests"), key=lambda request: "ip:203.0.113.7")
    assert [c.key for c in said.charges(None)] == ["ratelimit:{ip:203.0.113.7}:concurrency:10:0.5"]


def release_calls(r: redis.Redis, mode: str) -> int:
    """RL.RELEASE calls the server ran (script mode: every FCALL)."""
    if mode == "module":
        return int(r.info("ratelimit")["ratelimit_release"]["calls"])
    return function_stats(r)[0]


def slots_free(r: Any, mode: str, key: str = "ratelimit:{k}:slots") -> int:
    return peek_remaining(r, mode, "RL.PEEK", key, "CONCURRENCY", "2", "30", "*", "0")


def test_a_lease_is_taken_then_released_once(r: redis.Redis, mode: str) -> None:
    limiter = RateLimiter(r, [SLOTS, BURST], key=lambda request: "k")
    first, second = limiter.check(), limiter.check()
    assert first is not None and second is not None
    assert [(x.name, x.allowed, x.remaining, x.limit, x.retry_after_ms, x.reset_after_ms, x.lease_id) for x in first.limits] == [
        ("slots", True, 1, 2, 0, 30000, 1), ("burst", True, 4, 5, 0, first.limits[1].reset_after_ms, None)]
    assert (second.limits[0].remaining, second.limits[0].lease_id) == (0, 2)
    assert first.leases == (first.limits[0],)

    denied = limiter.check()
    assert denied is not None and not denied.allowed and denied.leases == ()
    slots = denied.limits[0]
    assert (slots.allowed, slots.remaining, slots.lease_id) == (False, 0, 0)
    # Its wait: the limit's retry_after hint (1 s), not the first lease's end (about 30 s); its reset: the last lease's end.
    assert (denied.retry_after_ms, slots.retry_after_ms) == (1000, 1000) and 29000 < slots.reset_after_ms <= 30000
    before = calls(r, mode)
    assert limiter.check() is not None and calls(r, mode) == before + 1  # asked Redis: never answered in process

    before = release_calls(r, mode)
    limiter.release(first)
    assert release_calls(r, mode) == before + 1
    assert slots_free(r, mode) == 1
    limiter.release(first)  # again: no call
    limiter.release(denied)  # took nothing: no call
    assert release_calls(r, mode) == before + 1
    third = limiter.check()
    assert third is not None and third.allowed and third.limits[0].lease_id == 3

    # A refund gives back the other limits' units, never a lease.
    burst_before = peek_remaining(r, mode, "RL.PEEK", "ratelimit:{k}:burst", "TOKENBUCKET", "5", "0.001", "*", "0")
    assert limiter.refund(third)
    assert peek_remaining(r, mode, "RL.PEEK", "ratelimit:{k}:burst", "TOKENBUCKET", "5", "0.001", "*", "0") == burst_before + 1
    assert slots_free(r, mode) == 0
    with pytest.raises(TypeError, match=r"^refund\['slots'\]: a concurrency limit takes no refund: its lease is freed by limiter.release\(decision\)$"):
        limiter.refund(third, {"slots": 1})
    limiter.release(second)
    limiter.release(third)
    assert slots_free(r, mode) == 2
    assert r.keys("ratelimit:{k}:slots") == []  # the last release deleted the key


def test_headers_and_body_of_a_concurrency_limit(r: redis.Redis) -> None:
    limiter = RateLimiter(r, Limit("concurrency", 1, lease=2.5), key=lambda request: "k")
    taken = limiter.check()
    assert taken is not None
    assert rate_limit_headers(taken) == {"RateLimit-Policy": '"default";q=1;qu="concurrent-requests"', "RateLimit": '"default";r=0;t=3'}
    denied = limiter.check()
    assert denied is not None and not denied.allowed
    assert rate_limit_headers(denied) == {"RateLimit-Policy": '"default";q=1;qu="concurrent-requests"', "RateLimit": '"default";r=0;t=1', "Retry-After": "1"}
    assert denied_body(denied)["retry_after_seconds"] == 1
    never = RateLimiter(r, Limit("concurrency", 1, lease=2.5, cost=2), key=lambda request: "k2").check()
    assert never is not None and never.never_allowed and never.limits[0].lease_id == 0


def test_a_release_redis_refuses_is_logged_not_raised(r: redis.Redis, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    limiter = RateLimiter(r, SLOTS, key=lambda request: "k")
    taken = limiter.check()
    assert taken is not None and taken.allowed
    r.set("ratelimit:{k}:slots", "not a lease")  # WRONGTYPE for the release
    with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
        limiter.release(taken)
    assert [m for m in caplog.messages if m.startswith("rate limiter: lease not released, it runs out by itself: WRONGTYPE")]


def test_a_holder_that_never_releases_frees_its_slot_when_the_lease_runs_out(r: redis.Redis, mode: str) -> None:
    limiter = RateLimiter(r, Limit("concurrency", 1, lease=0.3), key=lambda request: "k")
    held = limiter.check()
    assert held is not None and held.allowed
    denied = limiter.check()
    assert denied is not None and not denied.allowed and 0 < denied.retry_after_ms <= 300
    time.sleep(denied.retry_after_ms / 1000 + 0.05)
    again = limiter.check()
    assert again is not None and again.allowed and again.limits[0].lease_id == 1  # the key had gone: ids start again


def test_renew_keeps_a_lease_held_past_its_first_end(own_server: Server, mode: str) -> None:
    r = redis.Redis(port=own_server.port, decode_responses=True)
    limiter = RateLimiter(r, [Limit("concurrency", 1, lease=3, name="slots"), BURST], key=lambda request: "k", timeout=0.5)
    held = limiter.check()
    assert held is not None and [x.lease_id for x in held.limits] == [1, None]
    time.sleep(1.5)
    assert limiter.renew(held) is True
    assert 2000 < r.pttl("ratelimit:{k}:slots") <= 3000  # 3 s from the renewal: more than the 1.5 s left of the first
    time.sleep(1.8)  # past the first end, before the renewed one
    denied = limiter.check()
    assert denied is not None and [(x.allowed, x.remaining) for x in denied.limits] == [(False, 0), (True, 4)]
    assert limiter.renew(denied) is False  # a denial holds no lease
    limiter.release(held)
    assert limiter.renew(held) is False  # released
    unleased = RateLimiter(r, BURST, key=lambda request: "k2").check()
    assert unleased is not None and limiter.renew(unleased) is False
    again = limiter.check()
    assert again is not None and again.limits[0].lease_id == 1  # the key went with the last lease: ids start again
    own_server.stop()
    try:
        with pytest.raises(RateLimiterUnavailable):
            limiter.renew(again)
        with pytest.raises(RateLimiterUnavailable):  # at once while Redis waits for its next try
            limiter.renew(again)
    finally:
        own_server.start()
    r.close()


def test_the_asyncio_limiter_renews(server: Server, r: redis.Redis, mode: str) -> None:
    async def run() -> list[Any]:
        client = redis.asyncio.Redis(port=server.port)
        limiter = AsyncRateLimiter(client, Limit("concurrency", 1, lease=30), key=lambda request: "k")
        held = await limiter.check()
        assert held is not None
        r.pexpire("ratelimit:{k}:concurrency:1:30", 5000)  # the key's expiry moved early: a renewal sets it again
        out = [await limiter.renew(held), r.pttl("ratelimit:{k}:concurrency:1:30") > 29000]
        await limiter.release(held)
        out.append(await limiter.renew(held))
        await client.aclose()
        return out

    assert asyncio.run(run()) == [True, True, False]


def test_the_asyncio_limiter_releases_once(server: Server, r: redis.Redis, mode: str) -> None:
    async def run() -> list[Any]:
        client = redis.asyncio.Redis(port=server.port)
        limiter = AsyncRateLimiter(client, SLOTS, key=lambda request: "k")
        first, second = await limiter.check(), await limiter.check()
        assert first is not None and second is not None
        denied = await limiter.check()
        assert denied is not None
        before = release_calls(r, mode)
        await limiter.release(first)
        await limiter.release(first)
        out = [(first.limits[0].lease_id, second.limits[0].lease_id, denied.allowed), release_calls(r, mode) - before, slots_free(r, mode)]
        await client.aclose()
        return out

    assert asyncio.run(run()) == [(1, 2, False), 1, 1]


def test_local_leases_while_redis_is_down(own_server: Server) -> None:
    limiter = RateLimiter(redis.Redis(port=own_server.port), Limit("concurrency", 5, lease=30), key=lambda request: "k", on_unavailable="local", instances=2, timeout=2)
    own_server.stop()
    try:
        local = [limiter.check() for _ in range(3)]  # 5 slots among 2 instances: 2 here
        assert [(d.local, d.allowed, d.limits[0].remaining, d.limits[0].limit, d.limits[0].lease_id) for d in local if d] == [
            (True, True, 1, 2, 1), (True, True, 0, 2, 2), (True, False, 0, 2, 0)]
        assert limiter.renew(local[1]) is True  # type: ignore[arg-type]  # in process, as it was taken
        limiter.release(local[0])  # type: ignore[arg-type]
        limiter.release(local[0])  # type: ignore[arg-type]  # once
        assert limiter.renew(local[0]) is False  # type: ignore[arg-type]
        again = [limiter.check() for _ in range(2)]
        assert [(d.allowed, d.limits[0].lease_id) for d in again if d] == [(True, 3), (False, 0)]
    finally:
        own_server.start()


def test_a_cluster_gives_back_a_lease_when_another_slot_denies(rc: redis.cluster.RedisCluster, mode: str) -> None:
    limits = [
        Limit("concurrency", 2, lease=30, name="slots", key=lambda request: f"user:{request}"),
        Limit("fixedwindow", 1, window=1_000_000, name="per-ip", key=lambda request: "ip:203.0.113.7"),
    ]
    limiter = RateLimiter(rc, limits)
    first = limiter.check("a")
    assert first is not None and first.allowed and first.limits[0].lease_id == 1
    denied = limiter.check("b")  # user:b's call took a lease, then the per-IP call denied
    assert denied is not None and not denied.allowed
    assert [(x.name, x.allowed, x.remaining, x.lease_id) for x in denied.limits] == [("slots", True, 2, 0), ("per-ip", False, 0, None)]
    assert slots_free(rc, mode, "ratelimit:{user:b}:slots") == 2
    limiter.release(denied)  # nothing left to release
    limiter.release(first)
    assert slots_free(rc, mode, "ratelimit:{user:a}:slots") == 2


def test_a_concurrency_denial_waits_the_hint_or_the_modules_figure_when_shorter(r: redis.Redis, mode: str) -> None:
    """Slots free as requests end, not when leases run out: a denial's wait
    is the limit's retry_after (default 1 s), or the module's figure when
    that is shorter; never (-1) stays never. The decision waits its denying
    limits' longest."""

    def denial(limit: Limit, *more: Limit, key: str = "k") -> Decision:
        limiter = RateLimiter(r, [limit, *more], key=lambda request: key)
        while (decision := limiter.check()) is not None and decision.allowed:
            pass
        assert decision is not None
        return decision

    hinted = denial(Limit("concurrency", 1, lease=30, retry_after=5, name="slots"))
    assert (hinted.retry_after_ms, hinted.limits[0].retry_after_ms) == (5000, 5000)
    assert rate_limit_headers(hinted)["Retry-After"] == "5"
    shorter = denial(Limit("concurrency", 1, lease=0.5, retry_after=5, name="slots"), key="k2")
    assert 0 < shorter.retry_after_ms == shorter.limits[0].retry_after_ms <= 500  # the lease runs out sooner than the hint
    never = RateLimiter(r, Limit("concurrency", 1, lease=30, cost=2), key=lambda request: "k3").check()
    assert never is not None and (never.retry_after_ms, never.limits[0].retry_after_ms) == (-1, -1)
    # Slots held and a bucket emptied for 1000 s: the decision waits the longest of its denying limits.
    RateLimiter(r, Limit("concurrency", 1, lease=30, name="slots"), key=lambda request: "k4").check()
    both = RateLimiter(r, [Limit("concurrency", 1, lease=30, name="slots"), Limit("tokenbucket", 1, rate=0.001, name="b", cost=2)], key=lambda request: "k4").check()
    assert both is not None and both.retry_after_ms == -1  # the bucket can never admit 2
    empty = RateLimiter(r, Limit("tokenbucket", 1, rate=0.001, name="b"), key=lambda request: "k4")
    assert empty.check() is not None
    both = RateLimiter(r, [Limit("concurrency", 1, lease=30, name="slots"), Limit("tokenbucket", 1, rate=0.001, name="b")], key=lambda request: "k4").check()
    assert both is not None and [x.retry_after_ms for x in both.limits][0] == 1000 and 999_000 < both.retry_after_ms == both.limits[1].retry_after_ms


@pytest.mark.parametrize(
    "limit, message",
    [
        (Limit("tokenbucket", 10, rate=1, retry_after=1), "limits.retry_after: not an option of tokenbucket (a concurrency limit's hint)"),
        (Limit("concurrency", 10, lease=30, retry_after=0), "limits.retry_after: must be a number of seconds from 0.001 to 1e12 (got 0)"),
        (Limit("concurrency", 10, lease=30, retry_after="1"), "limits.retry_after: must be a number of seconds from 0.001 to 1e12 (got '1')"),  # type: ignore[arg-type]
        (Limit("concurrency", 10, lease=30, on_unavailable="shut"), "limits.on_unavailable: must be one of open, closed, local (got 'shut')"),  # type: ignore[arg-type]
    ],
)
def test_bad_retry_after_and_on_unavailable_raise_naming_the_option(limit: Limit, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        RateLimiter(R, limit)
    assert str(raised.value) == message
