"""RedisCluster, sync and asyncio, on a real 3-primary cluster: the limits
of one partition key go in one RL.MULTI to the node owning its slot; limits
of different partition keys go in one call each, and a denial by one gives
back what the others took."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio.cluster
import redis.cluster

from redis_ratelimit_client import AsyncRateLimiter, Limit, RateLimiter
from servers import Cluster
from test_limiter import peek_remaining


def limits() -> list[Limit]:
    return [
        Limit("fixedwindow", 2, window=1_000_000, name="per-user", key=lambda request: f"user:{request}"),
        Limit("tokenbucket", 100, rate=0.001, name="per-ip", key=lambda request: "ip:203.0.113.7"),
        Limit("slidinglog", 10, window=1_000_000, name="per-user-log", key=lambda request: f"user:{request}"),
    ]


def test_sync_cluster_client(rc: redis.cluster.RedisCluster, cluster: Cluster) -> None:
    limiter = RateLimiter(rc, limits())
    outcomes = [limiter.check(f"u{i % 30}") for i in range(60)]
    assert all(d is not None and d.allowed for d in outcomes)
    holding = [n.client().dbsize() for n in cluster.nodes]
    assert sum(holding) == 30 * 2 + 1 and all(count > 0 for count in holding), holding

    denied = limiter.check("u0")
    assert denied is not None and not denied.allowed
    assert [(x.name, x.allowed, x.remaining) for x in denied.limits] == [
        ("per-user", False, 0), ("per-ip", True, 40), ("per-user-log", True, 8)]
    # The per-IP bucket took its unit in its own call, and gave it back.
    assert peek_remaining(rc, "RL.PEEK", "ratelimit:{ip:203.0.113.7}:per-ip", "TOKENBUCKET", "100", "0.001", "*", "0") == 40


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
