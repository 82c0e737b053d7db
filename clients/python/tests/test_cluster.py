"""RedisCluster, sync and asyncio, on a real 3-primary cluster, with the
module and without it (script mode: FCALL, the library loaded on each
node where it is missing): the limits
of one partition key go in one RL.MULTI to the node owning its slot; limits
of different partition keys go in one call each, and a denial by one gives
back what the others took."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster

from redis_ratelimit_client import AsyncRateLimiter, Limit, RateLimiter
from modes import calls, function_stats, libraries, peek_remaining, script_stats
from redis_ratelimit_client.script import function_name
from servers import Cluster, Server, wait_until


def cluster_call(node: Server, *args: object) -> Any:
    with node.client() as r:
        return r.execute_command("CLUSTER", *args)


def owner_of(node: Server, slot: int) -> int:
    """The port of the primary that `node` says serves `slot`."""
    for start, end, primary, *_ in cluster_call(node, "SLOTS"):
        if start <= slot <= end:
            return int(primary[1])
    raise AssertionError(f"{node.port} names no node for slot {slot}")


def multi_calls(cluster: Cluster, mode: str) -> int:
    """Limiter calls so far, all nodes."""
    total = 0
    for node in cluster.nodes:
        with node.client() as r:
            total += calls(r, mode)
    return total


def limits() -> list[Limit]:
    return [
        Limit("fixedwindow", 2, window=1_000_000, name="per-user", key=lambda request: f"user:{request}"),
        Limit("tokenbucket", 100, rate=0.001, name="per-ip", key=lambda request: "ip:203.0.113.7"),
        Limit("slidinglog", 10, window=1_000_000, name="per-user-log", key=lambda request: f"user:{request}"),
    ]


def test_sync_cluster_client(rc: redis.cluster.RedisCluster, cluster: Cluster, mode: str) -> None:
    limiter = RateLimiter(rc, limits())
    if mode == "script":  # each node starts without the library
        for node in cluster.nodes:
            with node.client() as r:
                r.function_flush()
                r.config_resetstat()
    before = multi_calls(cluster, mode)
    outcomes = [limiter.check(f"u{i % 30}") for i in range(60)]
    assert all(d is not None and d.allowed for d in outcomes)
    # Two partition keys a request: two RL.MULTI, the user's two limits in one.
    assert multi_calls(cluster, mode) - before == 60 * 2
    holding = [n.client().dbsize() for n in cluster.nodes]
    assert sum(holding) == 30 * 2 + 1 and all(count > 0 for count in holding), holding
    if mode == "script":  # each primary: one `Function not found`, the library loaded there once, FCALL from then on
        for node in cluster.nodes:
            with node.client() as r:
                fcall, missing, loaded = function_stats(r)
                assert (missing, loaded, script_stats(r)) == (1, 1, (0, 0, 0)) and fcall > 1
                assert libraries(r) == {function_name(): [function_name()]}

    denied = limiter.check("u0")
    assert denied is not None and not denied.allowed
    assert [(x.name, x.allowed, x.remaining) for x in denied.limits] == [
        ("per-user", False, 0), ("per-ip", True, 40), ("per-user-log", True, 8)]
    # The per-IP bucket took its unit in its own call, and gave it back.
    assert peek_remaining(rc, mode, "RL.PEEK", "ratelimit:{ip:203.0.113.7}:per-ip", "TOKENBUCKET", "100", "0.001", "*", "0") == 40


def test_asyncio_cluster_client(cluster: Cluster, rc: redis.cluster.RedisCluster) -> None:
    async def run() -> list[Any]:
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[1])
        limiter = AsyncRateLimiter(client, limits())
        out = [await limiter.check(f"u{i}") for i in range(20)] + [await limiter.check("u0") for _ in range(2)]
        peek = await limiter.peek("u0")
        await client.aclose()
        return [*out, peek]

    *checks, peek = asyncio.run(run())
    assert [d.allowed for d in checks] == [True] * 21 + [False]
    # 21 admitted requests took 21 units of the per-IP bucket; the denied one gave its unit back.
    assert [x.remaining for x in checks[-1].limits] == [0, 79, 8]
    # RL.PEEK: as if one more unit were taken.
    assert [(x.allowed, x.remaining) for x in peek.limits] == [(False, 0), (True, 78), (True, 7)]
    assert len(rc.keys(target_nodes=redis.cluster.RedisCluster.PRIMARIES)) == 20 * 2 + 1


def test_a_moved_slot_is_followed(rc: redis.cluster.RedisCluster, cluster: Cluster) -> None:
    """The limiters learned the slot map; the slot then moves to another
    node. The old owner answers MOVED (the command did not run there): the
    limiter refreshes the map and sends it to the new owner, once. Both
    RL.MULTI (check) and RL.PEEK (peek) are followed."""

    def move(key: str) -> int:
        """Moves the key's slot (holding just that key) to another node; its port."""
        slot = cluster_call(cluster.nodes[0], "KEYSLOT", key)
        owner = next(n for n in cluster.nodes if cluster_call(n, "COUNTKEYSINSLOT", slot) == 1)
        target = next(n for n in cluster.nodes if n is not owner)
        owner.client().delete(key)  # an empty slot: nothing to MIGRATE
        owner_id, target_id = (cluster_call(n, "MYID") for n in (owner, target))
        # The resharding steps, so that the target's claim wins (it bumps its epoch).
        cluster_call(target, "SETSLOT", slot, "IMPORTING", owner_id)
        cluster_call(owner, "SETSLOT", slot, "MIGRATING", target_id)
        for node in [target, owner, *(n for n in cluster.nodes if n not in (owner, target))]:
            cluster_call(node, "SETSLOT", slot, "NODE", target_id)
        # A gossip message the owner sent before its SETSLOT can still hand the
        # slot back for a moment: wait until every node names the target,
        # twice a cluster-bus beat apart.
        def agreed() -> bool:
            return all(owner_of(node, slot) == target.port for node in cluster.nodes)

        for _ in range(2):
            wait_until(f"every node names {target.port} for slot {slot}", agreed)
            time.sleep(0.2)
        return target.port

    def holds(port: int, key: str) -> int:
        with redis.Redis(port=port) as r:
            return int(r.exists(key))

    async def run_async() -> list[Any]:
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
        limiter = AsyncRateLimiter(client, Limit("tokenbucket", 5, rate=0.001, name="m"), key=lambda request: request)
        key = "ratelimit:{mover-async}:m"
        await limiter.check("mover-async")
        port = move(key)
        checked = await limiter.check("mover-async")
        held = holds(port, key)
        move(key)
        peeked = await limiter.peek("mover-async")
        await client.aclose()
        return [checked.limits[0].remaining if checked else None, held, peeked.limits[0].remaining if peeked else None]

    limiter = RateLimiter(rc, Limit("tokenbucket", 5, rate=0.001, name="m"), key=lambda request: request)
    assert limiter.check("mover") is not None
    port = move("ratelimit:{mover}:m")
    checked = limiter.check("mover")
    assert checked is not None and (checked.allowed, checked.limits[0].remaining) == (True, 4)
    assert holds(port, "ratelimit:{mover}:m") == 1
    move("ratelimit:{mover}:m")
    peeked = limiter.peek("mover")
    assert peeked is not None and peeked.limits[0].remaining == 4  # fresh there, as if it took 1
    assert asyncio.run(run_async()) == [4, 1, 4]


def test_an_error_in_one_slot_gives_back_the_others(rc: redis.cluster.RedisCluster, mode: str) -> None:
    """The per-user call admits and takes its units; the per-IP call gets an
    error reply (its key holds a string). The error is raised, a server
    error, and the per-user units are given back."""
    rc.set("ratelimit:{ip:203.0.113.7}:per-ip", "not a limiter")
    limiter = RateLimiter(rc, limits())
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        limiter.check("erin")
    for name, spec in (("per-user", ["FIXEDWINDOW", "2", "1000000"]), ("per-user-log", ["SLIDINGLOG", "10", "1000000"])):
        assert rc.type(f"ratelimit:{{user:erin}}:{name}") == "none", name  # given back: fresh again, so no key (rc.exists: redis-py 6.2 warns inside)
        assert peek_remaining(rc, mode, "RL.PEEK", f"ratelimit:{{user:erin}}:{name}", *spec, "*", "0") == int(spec[1])


def test_a_migrating_slot_is_followed_with_asking(rc: redis.cluster.RedisCluster, cluster: Cluster) -> None:
    """Mid-resharding: the slot is MIGRATING from its owner, IMPORTING on
    the target, and the limiter's key has been migrated already. The owner
    answers ASK; the limiter sends ASKING and the command to the target,
    which holds the key: the check goes on from the migrated state."""

    def migrate(key: str) -> int:
        slot = cluster_call(cluster.nodes[0], "KEYSLOT", key)
        owner = next(n for n in cluster.nodes if cluster_call(n, "COUNTKEYSINSLOT", slot) == 1)
        target = next(n for n in cluster.nodes if n is not owner)
        owner_id, target_id = (cluster_call(n, "MYID") for n in (owner, target))
        cluster_call(target, "SETSLOT", slot, "IMPORTING", owner_id)
        cluster_call(owner, "SETSLOT", slot, "MIGRATING", target_id)
        with owner.client() as r:
            r.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", key)
        finishing.append((slot, target_id, target, owner))
        return target.port

    def finish() -> None:
        for slot, target_id, target, owner in finishing:
            for node in [target, owner, *(n for n in cluster.nodes if n not in (owner, target))]:
                cluster_call(node, "SETSLOT", slot, "NODE", target_id)

    async def run_async() -> list[Any]:
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
        limiter = AsyncRateLimiter(client, Limit("tokenbucket", 5, rate=0.001, name="m"), key=lambda request: request)
        await limiter.check("asker-async")
        port = migrate("ratelimit:{asker-async}:m")
        checked = await limiter.check("asker-async")
        await client.aclose()
        held = importing_holds(port, "ratelimit:{asker-async}:m")
        return [checked.limits[0].remaining if checked else None, held]

    def importing_holds(port: int, key: str) -> int:
        """EXISTS on a node importing the key's slot (ASKING first, on one connection)."""
        with redis.Redis(port=port, single_connection_client=True) as r:
            r.execute_command("ASKING")
            return int(r.exists(key))

    finishing: list[Any] = []
    try:
        limiter = RateLimiter(rc, Limit("tokenbucket", 5, rate=0.001, name="m"), key=lambda request: request)
        assert limiter.check("asker") is not None
        port = migrate("ratelimit:{asker}:m")
        checked = limiter.check("asker")
        assert checked is not None and (checked.allowed, checked.limits[0].remaining) == (True, 3)
        assert importing_holds(port, "ratelimit:{asker}:m") == 1
        assert asyncio.run(run_async()) == [3, 1]
    finally:
        finish()
