"""Every bad option raises when the limiter is made, naming the option."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.asyncio

from redis_ratelimit_client import AsyncRateLimiter, ConfigurationError, Limit, RateLimiter, by_ip, by_user
from redis_ratelimit_client.http import HttpOptions

R = redis.Redis(port=1)  # never connected: options are checked before any call


def make(*limits: Any, **options: Any) -> RateLimiter:
    return RateLimiter(R, list(limits), **options)


@pytest.mark.parametrize(
    "limit, message",
    [
        (Limit("tokenbucket", 60), "limits[0].rate: required for tokenbucket (units per second)"),
        (Limit(rate=1), "limits[0].limit: required"),
        (Limit("fixedwindow", 60), "limits[0].window: required for fixedwindow (seconds)"),
        (Limit("tokenbucket", 0, rate=1), "limits[0].limit: must be an integer from 1 to 9007199254740991 (got 0)"),
        (Limit("tokenbucket", 2.5, rate=1), "limits[0].limit: must be an integer from 1 to 9007199254740991 (got 2.5)"),  # type: ignore[arg-type]
        (Limit("tokenbucket", 2**53, rate=1), "limits[0].limit: must be an integer from 1 to 9007199254740991 (got 9007199254740992)"),
        (Limit("fixedwindow", 10, rate=1), "limits[0].rate: not an option of fixedwindow (it takes window)"),
        (Limit("leakybucket", 10, window=1), "limits[0].window: not an option of leakybucket (it takes rate)"),
        (Limit("tokenbucket", 10, rate=0), "limits[0].rate: must be a number from 0.000001 to 1e12 (got 0)"),
        (Limit("tokenbucket", 10, rate=float("nan")), "limits[0].rate: must be a number from 0.000001 to 1e12 (got nan)"),
        (Limit("tokenbucket", 10**7, rate=0.000001), "limits[0].rate: limit / rate must be at most 1e12 seconds"),
        (Limit("slidinglog", 10, window=0.0001), "limits[0].window: must be a number of seconds from 0.001 to 1e12 (got 0.0001)"),
        (Limit("slidingwindow", 10, window=60, cost=-1), "limits[0].cost: must be an integer from 0 to 9007199254740991 (got -1)"),
        (Limit("tokenbucket", 10, rate=1, name="bürst"), "limits[0].name: must be 1 to 64 printable ASCII characters (got 'bürst')"),
        (Limit("tokenbucket", 10, rate=1, name="a\nb"), "limits[0].name: must be 1 to 64 printable ASCII characters (got 'a\\nb')"),
        (Limit("tokenbucket", 10, rate=1, key="ip"), "limits[0].key: must be a function of the request (got 'ip')"),  # type: ignore[arg-type]
        (Limit("tokenbucket", 10, rate=1, quota_unit="bytes"), "limits[0].quota_unit: must be one of requests, content-bytes, concurrent-requests (got 'bytes')"),  # type: ignore[arg-type]
        (Limit("tokenbucket2", 10, rate=1), "limits[0].algorithm: must be one of tokenbucket, leakybucket, fixedwindow, slidingwindow, slidinglog, concurrency (got 'tokenbucket2')"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_limit_raises_naming_the_option(limit: Limit, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        make(limit)
    assert str(raised.value) == message


def test_one_limit_alone_is_named_limits_in_errors() -> None:
    with pytest.raises(ConfigurationError, match=r"^limits\.rate: required for tokenbucket \(units per second\)$"):
        RateLimiter(R, Limit("tokenbucket", 60))


def test_names_are_unique_and_required_with_several_limits() -> None:
    with pytest.raises(ConfigurationError, match=r"^limits\[1\]\.name: required when the limiter has more than one limit$"):
        make(Limit("tokenbucket", 10, rate=1, name="a"), Limit("fixedwindow", 10, window=60))
    with pytest.raises(ConfigurationError, match=r'^limits\[1\]\.name: duplicate policy name "burst"$'):
        make(Limit("tokenbucket", 10, rate=1, name="burst"), Limit("fixedwindow", 10, window=60, name="burst"))
    assert make(Limit("tokenbucket", 10, rate=1)).core.options.names == ["default"]
    assert make(Limit(limit=10, rate=1)).core.options.limits[0][0].algorithm == "tokenbucket"


def test_unknown_option_names_are_errors() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'windwo'"):
        Limit("fixedwindow", 10, windwo=60)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'fail_opne'"):
        make(Limit("tokenbucket", 10, rate=1), fail_opne=False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'skip_failed'"):
        HttpOptions(skip_failed=True)  # type: ignore[call-arg]


def test_limiter_options() -> None:
    ok = Limit("tokenbucket", 10, rate=1)
    with pytest.raises(ConfigurationError, match=r"^limits: must be a non-empty list of Limit$"):
        make()
    with pytest.raises(ConfigurationError, match=r"^prefix: must be a string without \{ or \} \(got 'a\{b'\)$"):
        make(ok, prefix="a{b")
    with pytest.raises(ConfigurationError, match=r"^timeout: must be seconds above 0 and at most 60 \(got 0\)$"):
        make(ok, timeout=0)
    with pytest.raises(ConfigurationError, match=r"^fail_open: must be True or False \(got 'no'\)$"):
        make(ok, fail_open="no")
    with pytest.raises(ConfigurationError, match=r"^mode: must be one of auto, module, script \(got 'lua'\)$"):
        make(ok, mode="lua")
    assert [make(ok, mode=mode).with_limits().core.options.mode for mode in ("auto", "module", "script")] == ["auto", "module", "script"]
    assert make(ok).core.options.mode == "auto"
    with pytest.raises(ConfigurationError, match=r"^ipv6_subnet: must be an integer from 1 to 128, or False \(got 0\)$"):
        by_ip(ipv6_subnet=0)
    with pytest.raises(ConfigurationError, match=r"^trusted_proxies: must be an integer >= 0 \(got -1\)$"):
        by_ip(trusted_proxies=-1)
    with pytest.raises(ConfigurationError, match=r"^get: must be a function of the request"):
        by_user("user")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^status_code: must be an HTTP error status 400..599 \(got 200\)$"):
        HttpOptions(status_code=200)
    with pytest.raises(ConfigurationError, match=r"^throttle: must be True or False \(got 1\)$"):
        HttpOptions(throttle=1)  # type: ignore[arg-type]
    for bad in (1, "draft-7", "Draft-10", None):
        with pytest.raises(ConfigurationError, match=r"^headers: must be True, 'draft-10', 'draft-6', 'legacy' or False \(got "):
            HttpOptions(headers=bad)  # type: ignore[arg-type]
    assert [HttpOptions(headers=choice).headers for choice in (True, "draft-10", "draft-6", "legacy", False)] == [True, "draft-10", "draft-6", "legacy", False]


def test_clients_and_async_functions_match_the_limiter() -> None:
    ok = Limit("tokenbucket", 10, rate=1)

    async def key(request: object) -> str:
        return "k"

    with pytest.raises(ConfigurationError, match=r"^redis: must be a redis.Redis or redis.cluster.RedisCluster for RateLimiter \(got Redis; asyncio clients go with AsyncRateLimiter\)$"):
        RateLimiter(redis.asyncio.Redis(port=1), ok)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^redis: must be a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster for AsyncRateLimiter \(got Redis; sync clients go with RateLimiter\)$"):
        AsyncRateLimiter(R, ok)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^key: an async key function needs AsyncRateLimiter$"):
        make(ok, key=key)
    with pytest.raises(ConfigurationError, match=r"^limits\[0\]: async key, cost or limit functions need AsyncRateLimiter$"):
        make(Limit("tokenbucket", 10, rate=1, cost=key))  # type: ignore[arg-type]
    assert AsyncRateLimiter(redis.asyncio.Redis(port=1), ok, key=key).core.options.key is key
