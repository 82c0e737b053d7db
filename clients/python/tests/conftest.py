"""Fixtures: each test that takes a server runs twice, once per mode
(`mode`: "module", a redis-server with the module; "script", one without
it). One server and one 3-primary cluster of each kind for the whole run
(started when first needed, stopped at the end); each test gets clean
databases and its own clients."""

from __future__ import annotations

import gc
from typing import Iterator

import pytest
import redis
import redis.cluster

from modes import MODES
from servers import Cluster, Server


@pytest.fixture(autouse=True)
def collected() -> Iterator[None]:
    """Garbage collected after each test, so a connection a test left open
    warns (ResourceWarning, an error under -W error) in that test."""
    yield
    gc.collect()


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _server(module: bool) -> Iterator[Server]:
    s = Server(module=module)
    yield s
    s.remove()


@pytest.fixture(scope="session")
def module_server() -> Iterator[Server]:
    yield from _server(True)


@pytest.fixture(scope="session")
def script_server() -> Iterator[Server]:
    yield from _server(False)


def _cluster(module: bool) -> Iterator[Cluster]:
    c = Cluster(module=module)
    yield c
    c.remove()


@pytest.fixture(scope="session")
def module_cluster() -> Iterator[Cluster]:
    yield from _cluster(True)


@pytest.fixture(scope="session")
def script_cluster() -> Iterator[Cluster]:
    yield from _cluster(False)


@pytest.fixture
def server(mode: str, request: pytest.FixtureRequest) -> Server:
    """The session's server of the test's mode."""
    s: Server = request.getfixturevalue(f"{mode}_server")
    return s


@pytest.fixture
def cluster(mode: str, request: pytest.FixtureRequest) -> Cluster:
    """The session's cluster of the test's mode."""
    c: Cluster = request.getfixturevalue(f"{mode}_cluster")
    return c


@pytest.fixture
def own_server(mode: str) -> Iterator[Server]:
    """A server of the test's own (it may stop and restart it), of its mode."""
    yield from _server(mode == "module")


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
