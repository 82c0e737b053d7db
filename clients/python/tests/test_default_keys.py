"""The Redis key of a limit without a name: it says what the limit is
(algorithm, limit, rate or window, quota unit), so unnamed limiters that
differ never share state and identical ones do. The policy name in the
headers stays "default"."""

from __future__ import annotations

import redis
import redis.asyncio
from fastapi import Depends, FastAPI
from fastapi.responses import PlainTextResponse

from redis_ratelimit_client import AsyncRateLimiter, Limit, RateLimiter, by_ip
from redis_ratelimit_client.fastapi import RateLimit, RateLimitExceeded, RateLimitHeadersMiddleware, rate_limit_exceeded_handler
from redis_ratelimit_client.limits import number_text
from servers import Server
from web import get, serve_asgi
from windows import wait_for_window_with


def remaining(headers: dict[str, str]) -> str:
    """The RateLimit field without `t` (a fixed window's `t` is the time
    left in the current window, which depends on the clock)."""
    return headers["ratelimit"].split(";t=")[0]


def two_apis_app(server: Server) -> FastAPI:
    """Four routes, each with a limiter of its own and one unnamed limit:
    /login and /api differ only in the limit, /search in the algorithm,
    /other is the same limit as /login."""
    app = FastAPI()
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)

    def dependency(limit: Limit) -> RateLimit:
        client = redis.asyncio.Redis(port=server.port)
        return RateLimit(AsyncRateLimiter(client, limit, key=by_ip(trusted_proxies=1)))

    for path, limit in [
        ("/login", Limit("fixedwindow", 2, window=1000)),
        ("/api", Limit("fixedwindow", 5, window=1000)),
        ("/search", Limit("tokenbucket", 5, rate=0.001)),
        ("/other", Limit("fixedwindow", 2, window=1000)),
    ]:

        async def route() -> str:
            return "ok"

        app.get(path, response_class=PlainTextResponse, dependencies=[Depends(dependency(limit))])(route)
    return app


def test_two_unnamed_limiters_over_http(server: Server, r: redis.Redis) -> None:
    wait_for_window_with(r, 1000)
    with serve_asgi(two_apis_app(server)) as port:
        client = "203.0.113.1"
        for expected in ('"default";r=1', '"default";r=0'):
            status, headers, _ = get(port, "/login", client)
            assert (status, remaining(headers)) == (200, expected)
        assert get(port, "/login", client)[0] == 429

        # A different limit of the same algorithm has its own budget: the
        # logins took nothing from it.
        status, headers, _ = get(port, "/api", client)
        assert (status, headers["ratelimit-policy"], remaining(headers)) == (200, '"default";q=5;w=1000', '"default";r=4')

        # Another algorithm: its own key, never the other's state (WRONGTYPE).
        status, headers, _ = get(port, "/search", client)
        assert (status, headers["ratelimit"]) == (200, '"default";r=4;t=1000')

        # The identical limit of another limiter shares the login budget.
        assert get(port, "/other", client)[0] == 429
        assert get(port, "/other", "203.0.113.2")[0] == 200
        assert get(port, "/login", "203.0.113.2")[0] == 200
        assert get(port, "/other", "203.0.113.2")[0] == 429

    assert sorted(r.keys()) == [
        "ratelimit:{ip:203.0.113.1}:fixedwindow:2:1000",
        "ratelimit:{ip:203.0.113.1}:fixedwindow:5:1000",
        "ratelimit:{ip:203.0.113.1}:tokenbucket:5:0.001",
        "ratelimit:{ip:203.0.113.2}:fixedwindow:2:1000",
    ]


def test_the_key_of_an_unnamed_limit(r: redis.Redis) -> None:
    """The same key texts as the Node client's (test/limiter.test.ts), so
    both clients share the state of the same limit."""

    def key_of(limit: Limit, request: object = None) -> str:
        decision = RateLimiter(r, limit, key=lambda request: "user:7").check(request)
        assert decision is not None and decision.limits[0].name == "default"
        return decision.limits[0].key

    assert key_of(Limit("tokenbucket", 10, rate=0.5)) == "ratelimit:{user:7}:tokenbucket:10:0.5"
    assert key_of(Limit("leakybucket", 3, rate=1000)) == "ratelimit:{user:7}:leakybucket:3:1000"
    assert key_of(Limit("slidingwindow", 100, window=0.25)) == "ratelimit:{user:7}:slidingwindow:100:0.25"
    assert key_of(Limit("slidinglog", 9007199254740991, window=1e12)) == "ratelimit:{user:7}:slidinglog:9007199254740991:1000000000000"
    assert key_of(Limit("tokenbucket", 1000, rate=10, quota_unit="content-bytes")) == "ratelimit:{user:7}:tokenbucket:1000:10:content-bytes"
    assert key_of(Limit("tokenbucket", 10, rate=0.5, name="default")) == "ratelimit:{user:7}:default"  # a name is the key
    # A limit per request (a quota per plan): the key holds the limit this request resolved to.
    plans = {"free": 5, "pro": 50}
    per_plan = Limit("fixedwindow", lambda request: plans[request], window=60)
    assert key_of(per_plan, "free") == "ratelimit:{user:7}:fixedwindow:5:60"
    assert key_of(per_plan, "pro") == "ratelimit:{user:7}:fixedwindow:50:60"


def test_parameter_text_rounds_half_up_as_the_module() -> None:
    # The float's exact value, six decimals, half up (as Node's toFixed and
    # the module's own reading): 1/128 = 0.0078125 exactly, so every client
    # keys an unnamed limit of that rate alike.
    cases = {1 / 128: "0.007813", 0.5078125: "0.507813", 1 / 3: "0.333333", 0.0000015: "0.000002",
             0.000001: "0.000001", 0.1: "0.1", 2.5: "2.5", 60: "60", 86400: "86400", 10**12: "1000000000000"}
    assert {value: number_text(value) for value in cases} == cases
