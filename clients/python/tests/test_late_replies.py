"""A check that timed out never charges later. Redis runs a command it has
read even after its client stopped waiting: a server busy with a slow
script from another client, or stopped (SIGSTOP), reads the limiter's
RL.MULTI when it gets to it. So the limiter keeps reading that call's reply
(a thread, or a task) and gives back at once what it took: here, after Redis
answers, every key is exactly as if the check never happened. Module and
script modes, sync and asyncio, standalone and cluster."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from typing import Any, Callable, Iterator

import pytest
import redis
import redis.asyncio
import redis.cluster

from modes import calls, function_stats, run
from redis_ratelimit_client import AsyncRateLimiter, Limit, RateLimiter, pipe, transport
from servers import Cluster, Server

#: Lua that keeps Redis busy for 1.5 s (another client's slow script).
BUSY = "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - s > 1500000"
STALL = 1.5
TIMEOUT = 1.0


def limits(user_key: Callable[[Any], str], ip_key: Callable[[Any], str]) -> list[Limit]:
    return [
        Limit("fixedwindow", 5, window=1_000_000, name="window", key=user_key),
        # "open": a timed-out check passes (None), the way these tests tell it timed out (a concurrency limit is "local" by default).
        Limit("concurrency", 2, lease=30, name="slots", key=ip_key, on_unavailable="open"),
    ]


def stall(server: Server, how: str) -> threading.Thread:
    """Redis unable to answer for STALL seconds from now, then answering again."""
    assert server.process is not None
    pid = server.process.pid

    def busy() -> None:
        with server.client() as other:
            other.eval(BUSY, 0)

    def stopped() -> None:
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(STALL)
        finally:
            os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=busy if how == "busy" else stopped, daemon=True)
    thread.start()
    time.sleep(0.2)  # the script runs, or the process is stopped
    return thread


def state(client: Any, mode: str, window_key: str, slots_key: str) -> tuple[int, int, int, int]:
    """The window's remaining units and free slots, and when each key expires (Unix ms)."""
    window = run(client, mode, "RL.PEEK", window_key, "FIXEDWINDOW", "5", "1000000", "*", "0")
    slots = run(client, mode, "RL.PEEK", slots_key, "CONCURRENCY", "2", "30", "*", "0")
    return int(window[1]), int(slots[1]), int(client.pexpiretime(window_key)), int(client.pexpiretime(slots_key))


def same(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """The same units and slots, and the same expiries within 50 ms: a
    write sets a key's expiry from a reset_after_ms rounded up to the ms,
    from the command's start (script mode: the script's run time is in
    it). A lease left held would have moved the slots key's by the stall."""
    return a[:2] == b[:2] and all(abs(x - y) <= 50 for x, y in zip(a[2:], b[2:]))


def limiter_calls(admin: redis.Redis, mode: str) -> int:
    """RL.MULTI calls (module), or every FCALL: the limiter's script calls (the test's own are EVAL)."""
    return calls(admin, mode) if mode == "module" else function_stats(admin)[0]


async def check(limiter: Any) -> Any:
    return await limiter.check() if isinstance(limiter, AsyncRateLimiter) else limiter.check()


async def warm(limiter: Any) -> Any:
    """The first check (it connects, and auto mode asks each server what it
    has), tried again after the next probe should it time out on a loaded machine."""
    deadline = time.monotonic() + 10
    decision = await check(limiter)
    while decision is None and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        decision = await check(limiter)
    return decision


async def after_stall(limiter: Any, read: Callable[[], tuple[int, int, int, int]], stalled: threading.Thread, before: tuple[int, int, int, int]) -> list[Any]:
    """The timed-out check's decision and how long it waited, then the
    state the moment Redis answers again and once it settles (the
    undo runs in the loop that made the check: it keeps running here)."""
    started = time.monotonic()
    decision = await check(limiter)
    waited = time.monotonic() - started
    while stalled.is_alive():
        await asyncio.sleep(0.01)
    answering = time.monotonic()
    now = read()
    while not same(now, before) and time.monotonic() - answering < 1:
        await asyncio.sleep(0.02)
        now = read()
    return [decision, TIMEOUT <= waited < STALL, now]


@pytest.fixture(params=["busy", "stopped"])
def how(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_a_timed_out_check_gives_back_what_it_took_once_redis_answers(own_server: Server, mode: str, how: str, flavour: str) -> None:
    admin = own_server.client()
    window_key, slots_key = "ratelimit:{u}:window", "ratelimit:{u}:slots"

    async def scenario() -> list[Any]:
        client: Any = redis.asyncio.Redis(port=own_server.port) if flavour == "asyncio" else redis.Redis(port=own_server.port)
        kind: Any = AsyncRateLimiter if flavour == "asyncio" else RateLimiter
        limiter = kind(client, limits(lambda request: "u", lambda request: "u"), timeout=TIMEOUT)
        held = await warm(limiter)  # one unit and one lease taken, the connection made
        assert held is not None and held.allowed and held.limits[1].lease_id == 1
        before = state(admin, mode, window_key, slots_key)
        ran = limiter_calls(admin, mode)
        out = await after_stall(limiter, lambda: state(admin, mode, window_key, slots_key), stall(own_server, how), before)
        out += [before, limiter_calls(admin, mode) - ran]
        await client.aclose() if flavour == "asyncio" else client.close()
        return out

    decision, waited_the_timeout, after, before, ran = asyncio.run(scenario())
    assert before[:2] == (4, 1)
    # Failed open; Redis did run that RL.MULTI, late (script mode: and the RL.REFUND and RL.RELEASE that undid it).
    assert (decision, waited_the_timeout, ran) == (None, True, 1 if mode == "module" else 3)
    assert same(after, before), (after, before)  # its unit refunded, its lease (id 2) released: the first lease's end is the key's again
    admin.close()


def keys_on_two_nodes(cluster: Cluster) -> tuple[str, str, Server]:
    """Two partition keys whose slots two different nodes own, and the second's node."""
    with cluster.nodes[0].client() as any_node:
        owners = {int(start): (int(end), int(primary[1])) for start, end, primary, *_ in any_node.cluster("slots")}

        def owner(partition: str) -> int:
            slot = int(any_node.cluster("keyslot", partition))
            return next(port for start, (end, port) in owners.items() if start <= slot <= end)

        candidates = [f"ip:203.0.113.{i}" for i in range(1, 50)]
        second = next(c for c in candidates if owner(c) != owner("user:a"))
        port = owner(second)
    return "user:a", second, next(n for n in cluster.nodes if n.port == port)


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_on_a_cluster_the_call_that_timed_out_is_undone_on_its_node(cluster: Cluster, rc: redis.cluster.RedisCluster, mode: str, flavour: str) -> None:
    """Two partition keys, two calls on two nodes: the second node stops
    after the first call took its unit. The first is given back at once
    (the request failed open), the second's late reply is undone on its
    node when it answers."""
    user, ip, stopped_node = keys_on_two_nodes(cluster)
    window_key, slots_key = f"ratelimit:{{{user}}}:window", f"ratelimit:{{{ip}}}:slots"

    async def scenario() -> list[Any]:
        if flavour == "asyncio":
            client: Any = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
            limiter: Any = AsyncRateLimiter(client, limits(lambda request: user, lambda request: ip), timeout=TIMEOUT)
        else:
            client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
            limiter = RateLimiter(client, limits(lambda request: user, lambda request: ip), timeout=TIMEOUT)
        held = await warm(limiter)
        assert held is not None and held.allowed
        before = state(rc, mode, window_key, slots_key)
        out = await after_stall(limiter, lambda: state(rc, mode, window_key, slots_key), stall(stopped_node, "stopped"), before)
        await client.aclose() if flavour == "asyncio" else client.close()
        return [*out, before]

    decision, waited_the_timeout, after, before = asyncio.run(scenario())
    assert before[:2] == (4, 1)
    assert (decision, waited_the_timeout) == (None, True)
    assert same(after, before), (after, before)


@pytest.fixture
def stopped_then_killed(own_server: Server) -> Iterator[Server]:
    yield own_server
    if own_server.process is not None and own_server.process.poll() is None:
        os.kill(own_server.process.pid, signal.SIGCONT)
    own_server.stop()
    own_server.start()


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_a_late_reader_whose_connection_is_lost_gives_up_and_says_so(stopped_then_killed: Server, flavour: str, caplog: pytest.LogCaptureFixture) -> None:
    """The server stopped, then killed while the reader waits: it closes the
    connection, logs why nothing was given back, and the limiter goes on
    once Redis is back."""
    server = stopped_then_killed
    assert server.process is not None

    async def scenario() -> Any:
        client: Any = redis.asyncio.Redis(port=server.port) if flavour == "asyncio" else redis.Redis(port=server.port)
        kind: Any = AsyncRateLimiter if flavour == "asyncio" else RateLimiter
        limiter = kind(client, limits(lambda request: "u", lambda request: "u"), timeout=0.3)
        assert (await check(limiter)) is not None
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
            assert (await check(limiter)) is None
            server.stop()  # SIGKILL: the reader's connection is reset
            deadline = time.monotonic() + 5
            while not [m for m in caplog.messages if m.startswith("rate limiter: what a check that timed out took was not given back")]:
                assert time.monotonic() < deadline, caplog.messages
                await asyncio.sleep(0.02)
        server.start()
        await asyncio.sleep(1.1)  # the next probe
        decision = await check(limiter)
        while decision is None and time.monotonic() - deadline < 3:
            await asyncio.sleep(0.05)
            decision = await check(limiter)
        await client.aclose() if flavour == "asyncio" else client.close()
        return decision

    decision = asyncio.run(scenario())
    assert decision is not None and [r.remaining for r in decision.limits] == [4, 1]  # a fresh server


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_no_reply_within_late_closes_the_connection_and_what_redis_runs_after_stays(
    stopped_then_killed: Server, flavour: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stopped past the reader's wait (LATE, 60 s; 0.6 s here):
    the reader logs that it gives up and closes its connection. Redis,
    resumed, still runs the command it had read: what it took stays until
    the window's own end, and the next check goes on from there."""
    server = stopped_then_killed
    assert server.process is not None
    monkeypatch.setattr(transport, "LATE", 0.6)
    monkeypatch.setattr(pipe, "LATE", 0.6)
    window = [Limit("fixedwindow", 5, window=1_000_000, name="window", key=lambda request: "u", on_unavailable="open")]

    async def scenario() -> tuple[Any, Any]:
        client: Any = redis.asyncio.Redis(port=server.port) if flavour == "asyncio" else redis.Redis(port=server.port)
        kind: Any = AsyncRateLimiter if flavour == "asyncio" else RateLimiter
        limiter = kind(client, window, timeout=0.3)
        first = await warm(limiter)
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
                assert (await check(limiter)) is None
                deadline = time.monotonic() + 5
                while not [m for m in caplog.messages if m.startswith("rate limiter: no reply within")]:
                    assert time.monotonic() < deadline, caplog.messages
                    await asyncio.sleep(0.02)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        after = await warm(limiter)  # once the limiter's next probe finds Redis back
        await client.aclose() if flavour == "asyncio" else client.close()
        return first, after

    first, after = asyncio.run(scenario())
    # 4 left after the first check; the timed-out one ran once Redis resumed, unrefunded: 3; this one: 2.
    assert [r.remaining for r in first.limits] == [4]
    assert after is not None and [r.remaining for r in after.limits] == [2]
    assert len([m for m in caplog.messages if m.startswith("rate limiter: no reply within")]) == 1
