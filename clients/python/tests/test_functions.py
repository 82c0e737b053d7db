"""Script mode calls the Lua library as a Redis Function: FCALL
ratelimit_<v> (<v>: the first 12 hex digits of the copy's SHA1), loaded by
FUNCTION LOAD where a server answers `Function not found`; EVALSHA where
functions cannot be used (no FCALL, an ACL without it or without FUNCTION
LOAD, a replica), said once in the log, no request failing; `script_call`
picks one way only. Sync and asyncio, standalone and cluster."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest
import redis
import redis.asyncio
import redis.cluster

from modes import function_stats, libraries, script_stats
from redis_ratelimit_client import AsyncRateLimiter, ConfigurationError, Limit, RateLimiter
from redis_ratelimit_client.script import function_name, library, sha1, source
from servers import Cluster, Server, wait_until

LIMIT = Limit("tokenbucket", 5, rate=0.001)
KEY = "ratelimit:{k}:tokenbucket:5:0.001"
SRC = Path(__file__).resolve().parents[1] / "src"
FELL_BACK = "rate limiter: script mode calls the Lua library with EVALSHA at "


def remaining(decision: Any) -> int:
    assert decision is not None and decision.allowed
    return int(decision.limits[0].remaining)


@pytest.fixture
def clean(script_server: Server) -> Iterator[redis.Redis]:
    """The script server without data, functions, cached scripts or stats; users `limited` removed after."""
    with script_server.client() as admin:
        admin.flushall()
        admin.function_flush()
        admin.script_flush()
        admin.config_resetstat()
        yield admin
        admin.acl_deluser("limited")
        admin.function_flush()


def test_the_function_form_of_the_library() -> None:
    assert function_name() == f"ratelimit_{sha1()[:12]}"
    assert library() == f"#!lua name={function_name()}\nlocal RATELIMIT_FUNCTION = '{function_name()}'\n{source()}"


def test_script_mode_calls_the_library_as_a_function(script_server: Server, clean: redis.Redis) -> None:
    """The first call finds no function, loads the library (once), calls
    again; every call after that is one FCALL. EVALSHA is never sent."""
    limiter = RateLimiter(redis.Redis(port=script_server.port), LIMIT, key=lambda request: "k")
    assert [remaining(limiter.check()) for _ in range(3)] == [4, 3, 2]

    async def run() -> int:
        client = redis.asyncio.Redis(port=script_server.port)
        decision = await AsyncRateLimiter(client, LIMIT, key=lambda request: "k").check()
        await client.aclose()
        return remaining(decision)

    assert asyncio.run(run()) == 1
    assert libraries(clean) == {function_name(): [function_name()]}
    assert function_stats(clean) == (5, 1, 1)  # 4 checks, one `Function not found`; one FUNCTION LOAD
    assert script_stats(clean) == (0, 0, 0)


def test_function_flush_is_survived(script_server: Server, clean: redis.Redis) -> None:
    limiter = RateLimiter(redis.Redis(port=script_server.port), LIMIT, key=lambda request: "k")
    assert remaining(limiter.check()) == 4
    clean.function_flush()
    assert remaining(limiter.check()) == 3  # loaded again, and the call made once more
    assert function_stats(clean) == (4, 2, 2)
    assert libraries(clean) == {function_name(): [function_name()]}


#: A check by another version of the app: the package from this checkout
#: with a library copy of its own (one more line: another SHA1, another name).
OTHER_VERSION = """
import json, sys
import redis
from redis_ratelimit_client import Limit, RateLimiter
from redis_ratelimit_client.script import function_name
limiter = RateLimiter(redis.Redis(port=int(sys.argv[1])), Limit("tokenbucket", 5, rate=0.001), key=lambda request: "k")
print(json.dumps([function_name(), limiter.check().limits[0].remaining]))
"""


def test_two_versions_each_call_their_own_library(script_server: Server, clean: redis.Redis) -> None:
    """A rolling deploy: the other version loads its own library beside
    this one's and replaces nothing; this one's calls go on without loading
    again. Both keep the same state (the layout is the library's contract)."""
    limiter = RateLimiter(redis.Redis(port=script_server.port), LIMIT, key=lambda request: "k")
    assert remaining(limiter.check()) == 4
    with tempfile.TemporaryDirectory() as folder:
        package = Path(folder) / "redis_ratelimit_client"
        shutil.copytree(SRC / "redis_ratelimit_client", package)
        (package / "ratelimit.lua").write_text(source() + "-- the next version\n", encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", OTHER_VERSION, str(script_server.port)], env={**os.environ, "PYTHONPATH": folder},
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    other_name, other_remaining = json.loads(done.stdout)
    assert other_name != function_name() and other_remaining == 3
    assert remaining(limiter.check()) == 2
    assert libraries(clean) == {function_name(): [function_name()], other_name: [other_name]}
    assert function_stats(clean) == (5, 2, 2)  # each version: one `Function not found`, one load


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
@pytest.mark.parametrize("forbidden", ["-function", "-fcall"])
def test_a_user_who_may_not_use_functions_falls_back_to_evalsha(
    script_server: Server, clean: redis.Redis, flavour: str, forbidden: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Without FUNCTION LOAD (or FCALL): EVALSHA from then on, one warning
    per limiter saying why, and no request fails."""
    clean.acl_setuser("limited", enabled=True, passwords=["+secret"], keys=["~*"], commands=["+@all", forbidden])

    async def run() -> list[int]:
        if flavour == "asyncio":
            client: Any = redis.asyncio.Redis(port=script_server.port, username="limited", password="secret")
            limiter: Any = AsyncRateLimiter(client, LIMIT, key=lambda request: "k")
            out = [remaining(await limiter.check()) for _ in range(3)]
            await client.aclose()
            return out
        limiter = RateLimiter(redis.Redis(port=script_server.port, username="limited", password="secret"), LIMIT, key=lambda request: "k")
        return [remaining(limiter.check()) for _ in range(3)]

    with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
        assert asyncio.run(run()) == [4, 3, 2]
    said = [m for m in caplog.messages if m.startswith(FELL_BACK)]
    what = "FUNCTION LOAD was refused" if forbidden == "-function" else "FCALL was refused"
    assert len(said) == 1 and f"localhost:{script_server.port}, not as a function (FCALL): {what} (" in said[0], said
    assert libraries(clean) == {}
    assert script_stats(clean) == (3, 1, 1)  # NOSCRIPT, EVAL, then EVALSHA


def test_a_server_without_functions_falls_back_to_evalsha(caplog: pytest.LogCaptureFixture) -> None:
    """As Redis 6.2, which has no FCALL (here: FCALL and FUNCTION renamed away)."""
    server = Server("--rename-command", "FCALL", "", "--rename-command", "FUNCTION", "", module=False)
    try:
        limiter = RateLimiter(redis.Redis(port=server.port), LIMIT, key=lambda request: "k")
        with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
            assert [remaining(limiter.check()) for _ in range(2)] == [4, 3]
        said = [m for m in caplog.messages if m.startswith(FELL_BACK)]
        assert len(said) == 1 and "FCALL was refused (unknown command" in said[0], said
    finally:
        server.remove()


def test_a_replica_refuses_to_load_and_is_read_through_evalsha(script_server: Server, clean: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    """A read-only replica refuses FUNCTION LOAD (READONLY): a peek, which
    writes nothing, goes through EVALSHA there."""
    limiter = RateLimiter(redis.Redis(port=script_server.port), LIMIT, key=lambda request: "k", script_call="evalsha")
    assert remaining(limiter.check()) == 4  # the primary's state, through EVALSHA: no library on the primary
    replica = Server("--replicaof", "127.0.0.1", str(script_server.port), module=False)
    try:
        with replica.client() as r:
            wait_until("the replica's copy of the key", lambda: r.get(KEY) is not None)
        on_replica = RateLimiter(redis.Redis(port=replica.port), LIMIT, key=lambda request: "k")
        with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
            peeked = on_replica.peek()
        assert peeked is not None and peeked.limits[0].remaining == 3  # what would remain after this request
        said = [m for m in caplog.messages if m.startswith(FELL_BACK)]
        assert len(said) == 1 and "FUNCTION LOAD was refused (You can't write against a read only replica" in said[0], said
    finally:
        replica.remove()


def test_script_call_picks_one_way_only(script_server: Server, clean: redis.Redis) -> None:
    """"fcall": a refusal is an error that says so (nothing taken);
    "evalsha": functions are never used."""
    clean.acl_setuser("limited", enabled=True, passwords=["+secret"], keys=["~*"], commands=["+@all", "-function"])
    only_functions = RateLimiter(redis.Redis(port=script_server.port, username="limited", password="secret"), LIMIT, key=lambda request: "k", script_call="fcall")
    with pytest.raises(redis.ResponseError) as raised:
        only_functions.check()
    assert str(raised.value).startswith(
        f'script_call "fcall": the server at localhost:{script_server.port} cannot run the Lua library as a function:'
        " FUNCTION LOAD was refused ("
    ), str(raised.value)
    assert clean.exists(KEY) == 0
    never = RateLimiter(redis.Redis(port=script_server.port), LIMIT, key=lambda request: "k", script_call="evalsha")
    assert remaining(never.check()) == 4
    assert function_stats(clean)[0] == 1 and libraries(clean) == {}  # only the refused one's FCALL
    with pytest.raises(ConfigurationError, match=r"^script_call: must be one of auto, fcall, evalsha \(got 'eval'\)$"):
        RateLimiter(redis.Redis(port=script_server.port), LIMIT, script_call="eval")  # type: ignore[arg-type]


def test_on_a_cluster_a_user_who_may_not_load_falls_back_on_each_node(script_cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """The library is loaded on each primary a call goes to; a user who
    may not load it: EVALSHA there, one warning for the limiter."""
    for node in script_cluster.nodes:
        with node.client() as r:
            r.flushall()
            r.function_flush()
            r.acl_setuser("limited", enabled=True, passwords=["+secret"], keys=["~*"], commands=["+@all", "-function"])
    try:
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=script_cluster.ports[0], username="limited", password="secret")
        limiter = RateLimiter(client, [
            Limit("tokenbucket", 5, rate=0.001, name="user", key=lambda request: f"user:{request}"),
            Limit("fixedwindow", 100, window=1_000_000, name="ip", key=lambda request: "ip:203.0.113.7"),
        ])
        with caplog.at_level(logging.WARNING, logger="redis_ratelimit_client"):
            decisions = [limiter.check(f"u{i}") for i in range(12)]  # users on every node
        assert all(d is not None and d.allowed for d in decisions)
        assert [d.limits[1].remaining for d in decisions if d] == list(range(99, 87, -1))
        assert len([m for m in caplog.messages if m.startswith(FELL_BACK)]) == 1
        for node in script_cluster.nodes:
            with node.client() as r:
                assert libraries(r) == {} and script_stats(r)[0] > 0
        client.close()
    finally:
        for node in script_cluster.nodes:
            with node.client() as r:
                r.acl_deluser("limited")
