"""When Redis cannot answer (on_unavailable, outage.py), against a real
server that the tests stop and start again, in both modes: the policies,
failing at once, probing about once a second, resuming."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from typing import Any, Iterator

import pytest
import redis
import redis.asyncio

from redis_ratelimit_client import AsyncRateLimiter, ConfigurationError, Limit, RateLimiter, RateLimiterUnavailable
from servers import Server, wait_until

LIMIT = Limit("fixedwindow", 4, window=1_000_000)


def test_the_options_are_checked(own_server: Server) -> None:
    client = redis.Redis(port=own_server.port)
    with pytest.raises(ConfigurationError, match=r"^on_unavailable: must be one of open, closed, local \(got 'shut'\)$"):
        RateLimiter(client, LIMIT, on_unavailable="shut")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^fail_open: give on_unavailable or fail_open \(its old form\), not both$"):
        RateLimiter(client, LIMIT, on_unavailable="open", fail_open=True)
    for bad in (0, 1.5, True):
        with pytest.raises(ConfigurationError, match=r"^instances: must be an integer >= 1, the processes sharing the limits \(got "):
            RateLimiter(client, LIMIT, instances=bad)  # type: ignore[arg-type]
    assert RateLimiter(client, LIMIT, fail_open=False).core.options.on_unavailable == "closed"
    assert RateLimiter(client, LIMIT, fail_open=True).core.options.on_unavailable == "open"
    assert RateLimiter(client, LIMIT).core.options.on_unavailable == "open"


def test_local_limits_in_process_with_each_limit_divided_among_instances(own_server: Server) -> None:
    limiter = RateLimiter(redis.Redis(port=own_server.port), LIMIT, key=lambda request: request, on_unavailable="local", instances=2, timeout=2)
    assert limiter.check("a").limits[0].remaining == 3  # type: ignore[union-attr]  # Redis: the whole limit
    own_server.stop()
    started = time.monotonic()
    local = [limiter.check("a") for _ in range(3)]
    assert time.monotonic() - started < 1  # at once, not the 2 s timeout
    assert [(d.allowed, d.limits[0].remaining, d.limits[0].limit) for d in local if d] == [(True, 1, 2), (True, 0, 2), (False, 0, 2)]
    assert local[2] is not None and local[2].retry_after_ms > 0
    assert limiter.check("b").allowed  # type: ignore[union-attr]  # another key: its own local state
    own_server.start()
    back = time.monotonic()
    while True:  # Redis again within a second or so
        decision = limiter.check("a")
        assert decision is not None
        if decision.limits[0].limit == 4:
            break
        assert time.monotonic() - back < 2
        time.sleep(0.05)
    # The restarted server kept nothing (no persistence here), and the local checks wrote nothing to it.
    assert decision.allowed and decision.limits[0].remaining == 3
    # Nor does a refund of a decision made in process: its units were never taken in Redis.
    assert local[0] is not None and limiter.refund(local[0])
    assert limiter.check("a").limits[0].remaining == 2  # type: ignore[union-attr]


def test_the_asyncio_limiter_fails_at_once_and_answers_locally(own_server: Server) -> None:
    async def run() -> list[Any]:
        client = redis.asyncio.Redis(port=own_server.port)
        local = AsyncRateLimiter(client, LIMIT, key=lambda request: "k", on_unavailable="local", timeout=2)
        closed = AsyncRateLimiter(client, LIMIT, key=lambda request: "k", on_unavailable="closed", timeout=2)
        own_server.stop()
        out: list[Any] = []
        for _ in range(5):
            started = time.monotonic()
            decision = await local.check()
            out.append((decision is not None and decision.allowed, time.monotonic() - started < 1))
        started = time.monotonic()
        with pytest.raises(RateLimiterUnavailable):
            await closed.check()
        out.append(time.monotonic() - started < 1)
        await client.aclose()
        return out

    assert asyncio.run(run()) == [(True, True)] * 4 + [(False, True), True]


@pytest.fixture
def broken(own_server: Server) -> Iterator[list[int]]:
    """While the test runs, the server's port accepts connections and
    closes them at once (a broken connection); the list counts them."""
    own_server.stop()
    accepted: list[int] = []
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", own_server.port))
    listener.listen(16)
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except socket.timeout:
                continue
            accepted.append(1)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield accepted
    stop.set()
    thread.join(5)
    listener.close()
    own_server.start()


def test_redis_is_tried_again_about_once_a_second(own_server: Server, broken: list[int]) -> None:
    limiter = RateLimiter(redis.Redis(port=own_server.port), LIMIT, key=lambda request: "k", timeout=2)
    started = time.monotonic()
    calls = 0
    while time.monotonic() - started < 3.5:
        assert limiter.check() is None  # open: let through
        calls += 1
        time.sleep(0.01)
    # The first check, then a probe about once a second: 3 or 4, never one per check.
    assert calls > 100 and 3 <= len(broken) <= 5


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_a_probe_that_fails_unexpectedly_still_lets_limiting_resume(own_server: Server, flavour: str, caplog: pytest.LogCaptureFixture) -> None:
    """The probe tells the outage how it went whatever happens to it (its
    `finally`). Here the request that finds a probe due has a key that
    cannot be sent (a lone surrogate: hiredis raises UnicodeEncodeError,
    no Redis error): the probe fails, and the next one, a second later,
    still finds Redis back. (The sync limiter used to tell the outage
    only after a call that returned or raised a Redis error: it then
    waited for that probe forever, answering by its policy for good.)"""

    async def check(limiter: Any, key: str) -> Any:
        try:
            return await limiter.check(key) if flavour == "asyncio" else limiter.check(key)
        except RateLimiterUnavailable:
            return None

    async def run() -> Any:
        if flavour == "asyncio":
            client: Any = redis.asyncio.Redis(port=own_server.port)
            limiter: Any = AsyncRateLimiter(client, LIMIT, key=lambda request: request, on_unavailable="closed")
        else:
            client = redis.Redis(port=own_server.port)
            limiter = RateLimiter(client, LIMIT, key=lambda request: request, on_unavailable="closed")
        own_server.stop()
        assert await check(limiter, "k") is None  # the outage begins
        own_server.start()
        await asyncio.sleep(1.05)
        with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
            assert await check(limiter, "\udc80") is None  # the probe is due: it takes this request's key
            await asyncio.sleep(0.2)
        assert [m for m in caplog.messages if m.startswith("rate limiter: probe failed: UnicodeEncodeError(")]
        back = time.monotonic()
        decision = await check(limiter, "k")
        while decision is None and time.monotonic() - back < 3:
            await asyncio.sleep(0.05)
            decision = await check(limiter, "k")
        await client.aclose() if flavour == "asyncio" else client.close()
        return decision

    decision = asyncio.run(run())
    assert decision is not None and decision.limits[0].remaining == 3


SLOTS = Limit("concurrency", 5, lease=30, name="slots")
BURST = Limit("tokenbucket", 100, rate=1, name="burst")


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_a_concurrency_limit_holds_slots_in_process_while_the_limiter_is_open(own_server: Server, flavour: str) -> None:
    """By default (the limiter "open") a concurrency limit is "local": while
    Redis cannot answer, the process holds its share of the slots (5 among
    2 instances: 2) and the other limits pass unchecked, left out of the
    decision; a release gives the slot back in process."""

    async def run() -> list[Any]:
        if flavour == "asyncio":
            client: Any = redis.asyncio.Redis(port=own_server.port)
            limiter: Any = AsyncRateLimiter(client, [SLOTS, BURST], key=lambda request: "k", instances=2)
        else:
            client = redis.Redis(port=own_server.port)
            limiter = RateLimiter(client, [SLOTS, BURST], key=lambda request: "k", instances=2)

        async def call(name: str, *args: Any) -> Any:
            result = getattr(limiter, name)(*args)
            return await result if flavour == "asyncio" else result

        own_server.stop()
        try:
            decisions = [await call("check") for _ in range(3)]
            out: list[Any] = [[(d.local, d.allowed, d.retry_after_ms, [(x.name, x.limit, x.remaining, x.lease_id) for x in d.limits]) for d in decisions]]
            await call("release", decisions[0])
            again = await call("check")
            out.append((again.allowed, again.limits[0].lease_id))
        finally:
            own_server.start()
        await client.aclose() if flavour == "asyncio" else client.close()
        return out

    assert asyncio.run(run()) == [
        [
            (True, True, 0, [("slots", 2, 1, 1)]),
            (True, True, 0, [("slots", 2, 0, 2)]),
            (True, False, 1000, [("slots", 2, 0, 0)]),  # denied in process, told to retry after the hint
        ],
        (True, 3),
    ]


def test_each_limit_answers_by_its_own_policy(own_server: Server) -> None:
    """While Redis cannot answer: a request with a "closed" limit is refused
    (503), whatever the others say; one whose limits are all "open" passes
    (None); a concurrency limit set "open" takes no slot."""
    client = redis.Redis(port=own_server.port)

    def limiter(*limits: Limit, **options: Any) -> RateLimiter:
        return RateLimiter(client, list(limits), key=lambda request: "k", **options)

    closed_one = limiter(SLOTS, Limit("fixedwindow", 10, window=60, name="strict", on_unavailable="closed"))
    all_open = limiter(Limit("concurrency", 5, lease=30, name="slots", on_unavailable="open"), BURST)
    local_window = limiter(BURST, Limit("fixedwindow", 1, window=60, name="w", on_unavailable="local"), on_unavailable="closed")
    local_window_too = limiter(BURST, Limit("fixedwindow", 1, window=60, name="w", on_unavailable="local"))
    assert [x.options.policies for x in (closed_one.core, all_open.core, local_window.core)] == [
        {"slots": "local", "strict": "closed"}, {"slots": "open", "burst": "open"}, {"burst": "closed", "w": "local"}]
    own_server.stop()
    try:
        with pytest.raises(RateLimiterUnavailable):
            closed_one.check()
        with pytest.raises(RateLimiterUnavailable):
            closed_one.peek()
        assert [all_open.check() for _ in range(10)] == [None] * 10
        with pytest.raises(RateLimiterUnavailable):
            local_window.check()  # its bucket is closed
        decisions = [local_window_too.check() for _ in range(2)]
        assert [(d.allowed, [x.name for x in d.limits]) for d in decisions if d] == [(True, ["w"]), (False, ["w"])]
    finally:
        own_server.start()
    client.close()


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
@pytest.mark.parametrize(("mode", "script_call"), [("module", "auto"), ("script", "auto"), ("script", "evalsha")])
def test_a_primary_turned_replica_is_redis_unavailable(own_server: Server, mode: str, script_call: str, flavour: str, caplog: pytest.LogCaptureFixture) -> None:
    """READONLY, a primary demoted by a failover while the limiter still
    talks to it (here a replica of the test's primary, with its data and,
    in script mode, its copy of the Lua library): RL.MULTI, the FCALL, or
    the write in the EVAL of the library, refused. Redis unavailable,
    answered by on_unavailable with one log line; never a server error."""
    with own_server.client() as r:
        r.config_set("repl-diskless-sync-delay", 0)  # the replica syncs at once, not after 5 s
    primary = redis.Redis(port=own_server.port)
    first = RateLimiter(primary, LIMIT, key=lambda request: "k", script_call=script_call)  # type: ignore[arg-type]
    assert first.check().limits[0].remaining == 3  # type: ignore[union-attr]  # script mode: the library loaded on the primary
    primary.close()
    replica = Server("--replicaof", "127.0.0.1", str(own_server.port), module=mode == "module")

    async def checks(on_unavailable: str) -> list[Any]:
        """Three checks on the replica at once: each decision, or what was raised."""
        out: list[Any] = []
        if flavour == "asyncio":
            client: Any = redis.asyncio.Redis(port=replica.port)
            limiter: Any = AsyncRateLimiter(client, LIMIT, key=lambda request: "k", on_unavailable=on_unavailable, script_call=script_call)  # type: ignore[arg-type]
        else:
            client = redis.Redis(port=replica.port)
            limiter = RateLimiter(client, LIMIT, key=lambda request: "k", on_unavailable=on_unavailable, script_call=script_call)  # type: ignore[arg-type]
        for _ in range(3):
            try:
                out.append(await limiter.check() if flavour == "asyncio" else limiter.check())
            except Exception as error:
                out.append(f"{type(error).__name__}: {error}")
        await client.aclose() if flavour == "asyncio" else client.close()
        return out

    try:
        with replica.client() as r:
            wait_until("the replica's copy of the key", lambda: r.dbsize() == 1)
        with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
            refused = asyncio.run(checks("closed"))
            passed = asyncio.run(checks("open"))
        assert [x.split(": ", 1)[0] for x in refused] == ["RateLimiterUnavailable"] * 3, refused
        assert passed == [None] * 3
        # One line per limiter, for its first check: the next two did not call Redis.
        assert [m.split(": ", 2)[:2] for m in caplog.messages] == [
            ["rate limiter", f"Redis unavailable, answering by on_unavailable={policy!r} until it is back"] for policy in ("closed", "open")
        ], caplog.messages
        assert all("You can't write against a read only replica." in m for m in caplog.messages), caplog.messages
        with replica.client() as r:
            assert r.dbsize() == 1
    finally:
        replica.remove()
