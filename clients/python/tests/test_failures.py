"""Redis unreachable or too slow: fail open (the request passes, one log
line) or closed (RateLimiterUnavailable). A check that timed out never
charges later: its connection is closed, and nothing resends it. In both
modes (the fixture `own_server`: with the module, and without it)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from typing import Any

import pytest
import redis
import redis.asyncio

from redis_ratelimit_client import AsyncRateLimiter, Limit, RateLimiter, RateLimiterUnavailable
from servers import Server

LIMIT = Limit("tokenbucket", 3, rate=0.001)


def test_stopped_redis_fails_open_with_one_log_line(own_server: Server, caplog: pytest.LogCaptureFixture) -> None:
    limiter = RateLimiter(redis.Redis(port=own_server.port), LIMIT, key=lambda request: "k")
    assert limiter.check() is not None
    own_server.stop()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
        assert limiter.check() is None
        for _ in range(100):  # the outage is known: answered by the policy, without Redis, no more log lines
            assert limiter.check() is None
    assert time.monotonic() - started < 0.5  # refused at once: no connect retries with backoff
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith("rate limiter: Redis unavailable, answering by on_unavailable='open' until it is back: ")


def resumed(check: Any) -> Any:
    """The first decision within 2 s of Redis coming back (a probe runs about once a second)."""
    back = time.monotonic()
    while time.monotonic() - back < 2:
        try:
            decision = check()
        except RateLimiterUnavailable:
            decision = None
        if decision is not None:
            return decision
        time.sleep(0.05)
    raise AssertionError("limiting did not resume within 2 s")


def test_stopped_redis_fails_closed(own_server: Server) -> None:
    limiter = RateLimiter(redis.Redis(port=own_server.port), LIMIT, key=lambda request: "k", fail_open=False)
    own_server.stop()
    with pytest.raises(RateLimiterUnavailable):
        limiter.check()
    own_server.start()  # the same limiter works again once Redis is back
    assert resumed(limiter.check).limits[0].remaining == 2


def pause(server: Server, ms: int) -> None:
    with server.client() as admin:
        admin.execute_command("CLIENT", "PAUSE", str(ms), "WRITE")


def test_a_timed_out_check_never_charges_later(own_server: Server) -> None:
    client = redis.Redis(port=own_server.port)
    limiter = RateLimiter(client, LIMIT, key=lambda request: "slow", timeout=0.2)
    pause(own_server, 1000)
    started = time.monotonic()
    assert limiter.check() is None
    assert 0.2 <= time.monotonic() - started < 0.9
    time.sleep(1.2)  # the pause is over: a resent or queued command would have run by now
    with own_server.client() as admin:
        assert admin.exists("ratelimit:{slow}:tokenbucket:3:0.001") == 0
    assert resumed(limiter.check).limits[0].remaining == 2


def test_asyncio_timeout_and_stop(own_server: Server) -> None:
    async def run() -> list[Any]:
        client = redis.asyncio.Redis(port=own_server.port)
        open_limiter = AsyncRateLimiter(client, LIMIT, key=lambda request: "slow", timeout=0.2)
        closed_limiter = AsyncRateLimiter(client, LIMIT, key=lambda request: "slow", timeout=0.2, fail_open=False)
        pause(own_server, 1000)
        timed_out = await open_limiter.check()
        await asyncio.sleep(1.2)
        with own_server.client() as admin:
            charged = admin.exists("ratelimit:{slow}:tokenbucket:3:0.001")
        back = time.monotonic()
        after = await open_limiter.check()
        while after is None and time.monotonic() - back < 2:  # resumed within a second or so
            await asyncio.sleep(0.05)
            after = await open_limiter.check()
        own_server.stop()
        stopped = await open_limiter.check()
        try:
            await closed_limiter.check()
            closed = "passed"
        except RateLimiterUnavailable:
            closed = "unavailable"
        await client.aclose()
        return [timed_out, charged, after.limits[0].remaining if after else None, stopped, closed]

    assert asyncio.run(run()) == [None, 0, 2, None, "unavailable"]


def test_busy_and_clusterdown_replies_mean_unavailable(mode: str) -> None:
    """BUSY (a script holds the server) and CLUSTERDOWN (no node serves the
    slot) are Redis unable to answer now, not a wrong command."""
    busy = Server("--busy-reply-threshold", "100", module=mode == "module")
    no_slots = Server("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", module=mode == "module")
    try:
        script = subprocess.Popen(["redis-cli", "-p", str(busy.port), "EVAL", "while true do end", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            open_limiter = RateLimiter(redis.Redis(port=busy.port), LIMIT, key=lambda request: "k")
            closed_limiter = RateLimiter(redis.Redis(port=busy.port), LIMIT, key=lambda request: "k", fail_open=False)
            assert open_limiter.check() is None
            with pytest.raises(RateLimiterUnavailable, match="^BUSY "):
                closed_limiter.check()
        finally:
            with busy.client() as admin:
                admin.script_kill()
            script.wait(5)
        closed = RateLimiter(redis.Redis(port=no_slots.port), LIMIT, key=lambda request: "k", fail_open=False)
        with pytest.raises(RateLimiterUnavailable, match="Hash slot not served"):
            closed.check()
        with pytest.raises(RateLimiterUnavailable, match="Hash slot not served"):
            closed.peek()
    finally:
        busy.remove()
        no_slots.remove()


def test_limiters_with_their_own_timeouts_on_one_client_keep_them(own_server: Server) -> None:
    """The limiter's connections are kept per client and timeout: one made
    by a limiter that waits 3 s is not lent to one that waits 0.2 s."""
    client = redis.Redis(port=own_server.port)
    patient = RateLimiter(client, LIMIT, key=lambda request: "a", timeout=3)
    quick = RateLimiter(client, LIMIT, key=lambda request: "b", timeout=0.2)
    assert patient.check() is not None  # its connection is idle now
    pause(own_server, 1000)
    started = time.monotonic()
    assert quick.check() is None
    assert time.monotonic() - started < 0.9
    client.close()
