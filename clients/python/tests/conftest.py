"""Fixtures: one redis-server with the module and one 3-primary cluster for
the whole run (started here, stopped at the end); each test gets clean
databases and its own clients."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import redis
import redis.cluster

from servers import Cluster, Server


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.remove()


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.remove()


@pytest.fixture
def r(server: Server) -> Iterator[redis.Redis]:
    """A sync client on the clean standalone server."""
    if server.process is None:
        server.start()
    client = redis.Redis(port=server.port, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def rc(cluster: Cluster) -> Iterator["redis.cluster.RedisCluster"]:
    """A sync cluster client on the clean cluster."""
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0], decode_responses=True)
    for node in cluster.nodes:
        with node.client() as n:
            n.flushall()
    yield client
    client.close()
