"""Concurrent asyncio checks on a standalone Redis share one connection,
and the calls made in one turn of the event loop go out together in one
write (pipe.py), as node-redis sends them: counted by the server, in the
connections it accepted, the reads it made and the calls it ran."""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio

from modes import calls
from redis_ratelimit_client import AsyncRateLimiter, Limit
from servers import Server

BURST = Limit("tokenbucket", 100, rate=0.001, name="burst")


class _Seen:
    """One INFO of every section, read as modes.calls reads the server."""

    def __init__(self, r: redis.Redis) -> None:
        self.everything = r.info("everything")

    def info(self, section: str) -> Any:
        return self.everything


def stats(r: redis.Redis, mode: str) -> tuple[int, int, int]:
    """Connections accepted, reads made (this INFO's own among them) and limiter calls run."""
    seen = _Seen(r)
    return int(seen.everything["total_connections_received"]), int(seen.everything["total_reads_processed"]), calls(seen, mode)


def test_twenty_checks_at_once_share_one_connection_in_one_write(server: Server, r: redis.Redis, mode: str) -> None:
    async def scenario() -> tuple[list[Any], tuple[int, int, int], tuple[int, int, int]]:
        client = redis.asyncio.Redis(port=server.port)
        limiter = AsyncRateLimiter(client, [BURST], key=lambda request: "alice")
        assert (await limiter.check()) is not None  # connects (and auto mode asks the server what it has)
        before = stats(r, mode)
        decisions = await asyncio.gather(*(limiter.check() for _ in range(20)))
        after = stats(r, mode)
        await client.aclose()
        return decisions, before, after

    decisions, before, after = asyncio.run(scenario())
    assert sorted(d.limits[0].remaining for d in decisions) == list(range(79, 99))
    connections, reads, checks = (b - a for a, b in zip(before, after))
    assert connections == 0  # the first check's connection
    assert checks == 20
    # The twenty calls in one write (the first, finding the connection idle,
    # waits for the end of the loop's turn, where the others make theirs),
    # and the second stats()'s INFO.
    assert reads == 2


def test_a_call_cancelled_before_its_write_is_still_sent_and_its_reply_goes_to_late(server: Server, r: redis.Redis) -> None:
    """A call alone on the pipe waits for the end of the loop's turn before
    its write; cancelled there, the writer still sends it (other calls made
    in that turn may be in the same write) and its reply goes to `late`."""
    from redis_ratelimit_client.pipe import Pipe

    async def scenario() -> tuple[list[Any], Any]:
        connection: Any = redis.asyncio.Connection(port=server.port)  # redis-py leaves connect() untyped
        await connection.connect()
        given_back: list[Any] = []
        pipe = Pipe(connection, given_back.append)
        late: list[Any] = []
        first = asyncio.ensure_future(pipe.call(["INCR", "cancelled"], late.append))
        await asyncio.sleep(0)  # the call is made, and waits for the turn's end
        first.cancel()
        second = await asyncio.wait_for(pipe.call(["INCR", "cancelled"]), 5)  # written after it, on the same connection
        for _ in range(100):
            if late:
                break
            await asyncio.sleep(0.01)
        await connection.disconnect()
        return late, second

    late, second = asyncio.run(scenario())
    assert late == [1]
    assert second == 2
    assert r.get("cancelled") == "2"
