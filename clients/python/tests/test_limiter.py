"""The limiter against a real redis-server, with the module and without it
(script mode): several limits in one RL.MULTI, all or nothing, refunds,
peek, the headers and bodies of each outcome. Sync and asyncio clients give
the same decisions."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
import redis
import redis.asyncio

from redis_ratelimit_client import (
    NEVER_MESSAGE,
    AsyncRateLimiter,
    Limit,
    RateLimiter,
    denied_body,
    rate_limit_headers,
)
from modes import calls, peek_remaining
from servers import Server


def key(request: tuple[str, int]) -> str:
    return request[0]


def cost(request: tuple[str, int]) -> int:
    return request[1]


LIMITS = [
    Limit("tokenbucket", 3, rate=0.001, name="burst", cost=cost),
    Limit("slidinglog", 5, window=100000, name="daily"),
]


def test_two_limits_all_or_nothing_with_refund(r: redis.Redis, mode: str) -> None:
    limiter = RateLimiter(r, LIMITS, key=key)
    before = calls(r, mode)
    first = limiter.check(("alice", 1))
    assert calls(r, mode) == before + 1  # both limits, one RL.MULTI
    # mode "auto" picked the module where it is loaded: its type; else the script's string.
    assert r.type("ratelimit:{alice}:burst") == ("ratelimit" if mode == "module" else "string")
    assert first is not None and first.allowed and first.retry_after_ms == 0
    burst, daily = first.limits
    assert (burst.name, burst.key, burst.remaining, burst.limit, burst.retry_after_ms, burst.reset_after_ms, burst.cost) == (
        "burst", "ratelimit:{alice}:burst", 2, 3, 0, 1_000_000, 1)
    assert (daily.name, daily.key, daily.remaining, daily.limit, daily.retry_after_ms, daily.reset_after_ms) == (
        "daily", "ratelimit:{alice}:daily", 4, 5, 0, 100_000_000)
    assert rate_limit_headers(first) == {
        "RateLimit-Policy": '"burst";q=3;w=3000, "daily";q=5;w=100000',
        "RateLimit": '"burst";r=2;t=1000, "daily";r=4;t=100000',
    }

    second = limiter.check(("alice", 2))
    assert second is not None and second.allowed
    assert [x.remaining for x in second.limits] == [0, 3]

    denied = limiter.check(("alice", 1))
    assert denied is not None and not denied.allowed
    assert 998_000 < denied.retry_after_ms <= 1_000_000
    # Denied: nothing is taken anywhere; "daily" would admit alone, and
    # reports the state it keeps (3), as the RL.PEEK below finds it too.
    assert [(x.allowed, x.remaining) for x in denied.limits] == [(False, 0), (True, 3)]
    assert rate_limit_headers(denied) == {
        "RateLimit-Policy": '"burst";q=3;w=3000, "daily";q=5;w=100000',
        "RateLimit": '"burst";r=0;t=1000, "daily";r=3;t=100000',
        "Retry-After": "1000",
    }
    assert denied_body(denied) == {
        "error": "rate_limit_exceeded",
        "message": "Rate limit exceeded. Please try again later.",
        "retry_after_seconds": 1000,
    }
    # Denied: the daily limit took nothing either.
    assert peek_remaining(r, mode, "RL.PEEK", "ratelimit:{alice}:daily", "SLIDINGLOG", "5", "100000", "*", "0") == 3

    assert limiter.refund(denied)  # a denied request took nothing: nothing to give back
    assert peek_remaining(r, mode, "RL.PEEK", "ratelimit:{alice}:daily", "SLIDINGLOG", "5", "100000", "*", "0") == 3
    assert limiter.refund(second)
    # The refund gave burst its 2 back (0 -> 2) and daily its 1 (3 -> 4).
    # RL.PEEK replies as if the units were taken: 2 - 2 and 4 - 1 would remain.
    peeked = limiter.peek(("alice", 2))
    assert peeked is not None and peeked.allowed
    assert [x.remaining for x in peeked.limits] == [0, 3]

    never = limiter.check(("alice", 4))
    assert never is not None and never.never_allowed and never.retry_after_ms == -1
    assert rate_limit_headers(never) == {
        "RateLimit-Policy": '"burst";q=3;w=3000, "daily";q=5;w=100000',
        "RateLimit": '"burst";r=2, "daily";r=4;t=100000',
    }
    assert denied_body(never) == {"error": "rate_limit_exceeded", "message": NEVER_MESSAGE, "retry_after_seconds": None}


def test_reserve_then_refund_the_unused(r: redis.Redis, mode: str) -> None:
    """Units per policy name: only the named limit gets units back."""
    limits = [
        Limit("fixedwindow", 10, window=1_000_000, name="requests"),
        Limit("tokenbucket", 1000, rate=0.001, name="tokens", cost=lambda request: 800),
    ]
    limiter = RateLimiter(r, limits, key=lambda request: "user:7")
    reserved = limiter.check()
    assert reserved is not None and [x.remaining for x in reserved.limits] == [9, 200]
    assert limiter.refund(reserved, {"tokens": 650})
    assert peek_remaining(r, mode, "RL.PEEK", "ratelimit:{user:7}:tokens", "TOKENBUCKET", "1000", "0.001", "*", "0") == 850
    assert peek_remaining(r, mode, "RL.PEEK", "ratelimit:{user:7}:requests", "FIXEDWINDOW", "10", "1000000", "*", "0") == 9


def test_a_refund_that_is_not_units_per_limit_is_refused_and_gives_nothing(r: redis.Redis, mode: str) -> None:
    limits = [Limit("fixedwindow", 10, window=1_000_000, name="requests"), Limit("tokenbucket", 1000, rate=0.001, name="tokens", cost=800)]
    limiter = RateLimiter(r, limits, key=lambda request: "user:8")
    reserved = limiter.check()
    assert reserved is not None and reserved.allowed
    with pytest.raises(TypeError, match=r"^refund: units must be a mapping of policy name to units, e.g. \{'requests': 3\} \(got 650; a bare number was ambiguous: it gave that many back to every limit\)$"):
        limiter.refund(reserved, 650)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^refund: no limit named 'token' in the decision \(its limits: requests, tokens\)$"):
        limiter.refund(reserved, {"token": 650})
    with pytest.raises(ValueError, match=r"^refund\['tokens'\]: 801 is more than the 800 the request took$"):
        limiter.refund(reserved, {"requests": 1, "tokens": 801})
    with pytest.raises(ValueError, match=r"^refund\['tokens'\]: must be an integer from 0 to 9007199254740991 \(got 1.5\)$"):
        limiter.refund(reserved, {"requests": 1, "tokens": 1.5})  # type: ignore[dict-item]
    # Nothing was given back by any of them.
    assert peek_remaining(r, mode, "RL.PEEK", "ratelimit:{user:8}:tokens", "TOKENBUCKET", "1000", "0.001", "*", "0") == 200
    assert peek_remaining(r, mode, "RL.PEEK", "ratelimit:{user:8}:requests", "FIXEDWINDOW", "10", "1000000", "*", "0") == 9


ALL_FIVE = [
    Limit("tokenbucket", 3, rate=0.001, name="tb"),
    Limit("leakybucket", 3, rate=0.001, name="lb"),
    Limit("fixedwindow", 3, window=1_000_000, name="fw"),
    Limit("slidingwindow", 3, window=1_000_000, name="sw"),
    Limit("slidinglog", 3, window=1_000_000, name="sl"),
]


def test_all_five_algorithms_through_the_asyncio_client(server: Server, r: redis.Redis) -> None:
    async def run() -> None:
        client = redis.asyncio.Redis(port=server.port)

        async def async_key(request: Any) -> str:
            return "bob"

        async def async_cost(request: Any) -> int:
            return 0

        limiter = AsyncRateLimiter(client, ALL_FIVE, key=async_key)
        decisions = [await limiter.check() for _ in range(4)]
        looking = AsyncRateLimiter(client, Limit("slidinglog", 3, window=1_000_000, name="sl", cost=async_cost), key=async_key)
        looked = await looking.check()
        assert looked is not None and (looked.allowed, looked.limits[0].remaining, looked.limits[0].cost) == (True, 0, 0)
        await client.aclose()
        assert [d is not None and d.allowed for d in decisions] == [True, True, True, False]
        first, second, third, fourth = (d for d in decisions if d is not None)
        assert [x.remaining for x in first.limits] == [2, 2, 2, 2, 2]
        assert [x.remaining for x in third.limits] == [0, 0, 0, 0, 0]
        assert [x.allowed for x in fourth.limits] == [False] * 5
        assert (first.delay_ms, first.limit("lb").delay_ms, first.limit("tb").delay_ms) == (0, 0, None)
        assert 998_000 < second.delay_ms <= 1_000_000  # the leaky bucket's queue: 1/rate apart
        assert fourth.limit("tb").reset_after_ms > 0 and fourth.retry_after_ms > 0

    asyncio.run(run())
    assert sorted(r.keys()) == [f"ratelimit:{{bob}}:{name}" for name in ("fw", "lb", "sl", "sw", "tb")]


def test_keys_are_the_bytes_the_client_itself_sends(server: Server, r: redis.Redis, mode: str) -> None:
    """A limiter's key is found by the app's client under its string: the
    client's encoding (redis-py's asyncio client encodes with it; the sync
    one with hiredis sends UTF-8 whatever it is), packed by hiredis only
    where that gives the same bytes."""
    limit = Limit("fixedwindow", 5, window=1000, name="fw")
    found = []

    async def asyncio_checks() -> None:
        for encoding in ("utf-8", "latin-1"):
            client = redis.asyncio.Redis(port=server.port, encoding=encoding)
            partition = f"caf\u00e9-asyncio-{encoding}"
            await AsyncRateLimiter(client, limit, key=lambda request: partition).check()
            found.append(await client.exists(f"ratelimit:{{{partition}}}:fw"))
            await client.aclose()

    for encoding in ("utf-8", "latin-1"):
        client = redis.Redis(port=server.port, encoding=encoding)
        partition = f"caf\u00e9-sync-{encoding}"
        RateLimiter(client, limit, key=lambda request: partition).check()
        found.append(client.exists(f"ratelimit:{{{partition}}}:fw"))
    asyncio.run(asyncio_checks())
    assert found == [1, 1, 1, 1]
    raw = redis.Redis(port=server.port)
    assert len(raw.keys()) == 4
    # The asyncio latin-1 client's key is latin-1, not UTF-8.
    assert raw.exists("ratelimit:{caf\u00e9-asyncio-latin-1}:fw".encode("latin-1")) == 1
    raw.close()


def test_module_errors_are_server_errors_not_passes(r: redis.Redis) -> None:
    r.set("ratelimit:{carol}:tokenbucket:3:1", "a string")
    limiter = RateLimiter(r, Limit("tokenbucket", 3, rate=1), key=lambda request: "carol")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        limiter.check()


def test_a_bad_cost_at_request_time_is_a_server_error(r: redis.Redis) -> None:
    limiter = RateLimiter(r, Limit("tokenbucket", 3, rate=1, cost=cast(Any, lambda request: 1.5)), key=lambda request: "dave")
    with pytest.raises(ValueError, match=r"^default.cost: must be an integer from 0 to 9007199254740991 \(got 1.5\)$"):
        limiter.check()
    assert r.keys() == []


def test_a_limit_per_plan(r: redis.Redis) -> None:
    """`limit` as a function of the request: the quota of the caller's plan."""
    plans = {"free": 2, "pro": 5}
    limiter = RateLimiter(r, Limit("tokenbucket", lambda request: plans[request], rate=0.001), key=lambda request: request)
    free = [limiter.check("free") for _ in range(3)]
    pro = limiter.check("pro")
    assert [d is not None and d.allowed for d in free] == [True, True, False]
    assert pro is not None and (pro.limits[0].limit, pro.limits[0].remaining) == (5, 4)
    assert rate_limit_headers(pro)["RateLimit-Policy"] == '"default";q=5;w=5000'
    plans["free"] = 0
    with pytest.raises(ValueError, match=r"^default.limit: must be an integer from 1 to 9007199254740991 \(got 0\)$"):
        limiter.check("free")


def test_draft_6_and_legacy_fields_carry_the_limit_closest_to_denial(r: redis.Redis, mode: str) -> None:
    """One limit in those forms: on a denial the denying limit that waits
    longest, else the one with the fewest remaining, the first on a tie;
    RateLimit-Reset its `t` (on a denial, Retry-After); X-RateLimit-Reset
    the clock rounded up plus that."""
    burst = Limit("tokenbucket", 3, rate=0.001, name="burst")  # a unit back in 1000 s
    limiter = RateLimiter(r, [burst, Limit("slidinglog", 3, window=100_000, name="daily")], key=lambda request: "k")
    tied = limiter.check()
    assert tied is not None and [x.remaining for x in tied.limits] == [2, 2]  # a tie: the first
    assert rate_limit_headers(tied, "draft-6") == {"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "1000"}
    assert rate_limit_headers(tied, "legacy", clock=lambda: 1764806400.2) == {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": str(1764806401 + 1000)}
    fewer = RateLimiter(r, [burst, Limit("slidinglog", 2, window=100_000, name="daily")], key=lambda request: "k2").check()
    assert fewer is not None and [x.remaining for x in fewer.limits] == [2, 1]
    assert rate_limit_headers(fewer, "draft-6") == {"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "100000"}
    for _ in range(2):
        limiter.check()
    denied = limiter.check()  # burst (1000 s to its next unit) and daily (100000 s) deny: daily waits longest
    assert denied is not None and [x.allowed for x in denied.limits] == [False, False]
    assert rate_limit_headers(denied, "draft-6") == {"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "100000", "Retry-After": "100000"}
    assert rate_limit_headers(denied, False) == {"Retry-After": "100000"}
