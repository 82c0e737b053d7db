"""The `mode` option: auto picks per server and decides again after a
reconnect; script mode loads the script again after SCRIPT FLUSH (NOSCRIPT:
EVAL); clear errors for a missing module, an ACL without EVAL or COMMAND,
and a key in the other mode's layout (which stays unchanged); the
mechanical turn of a module call into a script call."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Iterator, cast

import pytest
import redis
import redis.asyncio

from redis_ratelimit_client import AsyncRateLimiter, Limit, Mode, RateLimiter
from redis_ratelimit_client.script import script_args, sha1
from modes import script_stats
from servers import Server

LIMIT = Limit("tokenbucket", 3, rate=0.001)


def remaining(decision: Any) -> int:
    assert decision is not None
    return int(decision.limits[0].remaining)


def test_a_module_call_becomes_a_script_call_mechanically() -> None:
    assert script_args(["RL.MULTI", "2", "k1", "k2", "*", "TOKENBUCKET", "10", "1", "1", "FIXEDWINDOW", "5", "60", "1"], "EVALSHA") == [
        "EVALSHA", sha1(), "2", "k1", "k2", "RL.MULTI", "*", "TOKENBUCKET", "10", "1", "1", "FIXEDWINDOW", "5", "60", "1"]
    assert script_args(["RL.PEEK", "k", "TOKENBUCKET", "10", "1", "*", "1"], "EVALSHA") == [
        "EVALSHA", sha1(), "1", "k", "RL.PEEK", "TOKENBUCKET", "10", "1", "*", "1"]
    evaluated = script_args(["RL.REFUND", "k", "FIXEDWINDOW", "5", "60", "*", "2"], "EVAL")
    assert evaluated[0] == "EVAL" and evaluated[1].startswith("-- redis-ratelimit, script mode")
    assert evaluated[2:] == ["1", "k", "RL.REFUND", "FIXEDWINDOW", "5", "60", "*", "2"]


def test_auto_decides_again_after_a_reconnect() -> None:
    """The server restarts on the same port without the module, then with
    it: sync and asyncio limiters follow, each call on the mode the server
    has now (the key's type says which ran)."""
    server = Server()

    async def run() -> list[tuple[int, int, str, str]]:
        sync = RateLimiter(redis.Redis(port=server.port), LIMIT, key=lambda request: "sync")
        client = redis.asyncio.Redis(port=server.port)
        asynchronous = AsyncRateLimiter(client, LIMIT, key=lambda request: "async")
        seen = []
        for module in (True, False, True):
            if server.module != module:
                server.stop()
                server.module = module
                server.start()
                await asyncio.sleep(0.05)  # as an app's event loop would, it reads the old connection's close
            taken = (remaining(sync.check()), remaining(await asynchronous.check()))
            taken = (remaining(sync.check()), remaining(await asynchronous.check()))  # the decision, cached
            with server.client() as r:
                seen.append((*taken, r.type("ratelimit:{sync}:tokenbucket:3:0.001"), r.type("ratelimit:{async}:tokenbucket:3:0.001")))
        await client.aclose()
        return seen

    try:
        assert asyncio.run(run()) == [(1, 1, "ratelimit", "ratelimit"), (1, 1, "string", "string"), (1, 1, "ratelimit", "ratelimit")]
    finally:
        server.remove()


def test_script_mode_sends_the_script_again_after_script_flush(script_server: Server) -> None:
    """The EVALSHA form (script_call="evalsha", or where functions cannot be used)."""
    with script_server.client() as r:
        r.flushall()
        r.script_flush()
        r.config_resetstat()
        sync = RateLimiter(redis.Redis(port=script_server.port), LIMIT, key=lambda request: "k", script_call="evalsha")
        first, second = remaining(sync.check()), remaining(sync.check())
        assert script_stats(r) == (2, 1, 1)  # NOSCRIPT, EVAL; then EVALSHA finds it
        r.script_flush()

        async def run() -> int:
            client = redis.asyncio.Redis(port=script_server.port)
            decision = await AsyncRateLimiter(client, LIMIT, key=lambda request: "k", script_call="evalsha").check()
            await client.aclose()
            return remaining(decision)

        third = asyncio.run(run())
        assert script_stats(r) == (3, 2, 2)
        fourth = sync.check()
        assert script_stats(r) == (4, 2, 2)
        assert (first, second, third) == (2, 1, 0)
        assert fourth is not None and (fourth.allowed, remaining(fourth)) == (False, 0)


@pytest.fixture
def limited_user(server: Server) -> Iterator[redis.Redis]:
    """The test's server, clean, with a user `limited` it may configure; removed afterwards."""
    with server.client() as admin:
        admin.flushall()
        yield admin
        admin.acl_deluser("limited")


def test_an_acl_without_functions_or_eval_is_told_so(server: Server, mode: str, limited_user: redis.Redis) -> None:
    limited_user.acl_setuser("limited", enabled=True, passwords=["+secret"], keys=["~*"], commands=["+@all", "-eval", "-evalsha", "-fcall", "-function"])
    client = redis.Redis(port=server.port, username="limited", password="secret")
    limiter = RateLimiter(client, LIMIT, key=lambda request: "k")
    if mode == "module":  # the module needs no EVAL
        assert remaining(limiter.check()) == 2
        return
    with pytest.raises(redis.exceptions.NoPermissionError) as raised:
        limiter.check()
    # The server's own words first (they vary by version), then what to do.
    assert re.fullmatch(
        r"(this user|User limited) has no permissions to run the 'evalsha' command: script mode \(the redis-ratelimit"
        rf" module is not used at localhost:{server.port}\) runs the Lua library as a function \(FCALL, and FUNCTION"
        r" LOAD once\) or else with EVALSHA and EVAL, which this user's ACL forbids: allow \+fcall \+function\|load, or"
        r" \+evalsha \+eval, or load the module there",
        str(raised.value),
    ), str(raised.value)
    assert limited_user.keys() == []


def test_auto_without_command_info_is_told_so(server: Server, mode: str, limited_user: redis.Redis) -> None:
    limited_user.acl_setuser("limited", enabled=True, passwords=["+secret"], keys=["~*"], commands=["+@all", "-command"])
    client = redis.Redis(port=server.port, username="limited", password="secret")
    with pytest.raises(redis.exceptions.NoPermissionError) as raised:
        RateLimiter(client, LIMIT, key=lambda request: "k").check()
    assert re.fullmatch(
        r"(this user|User limited) has no permissions to run the 'command\|info' command: mode \"auto\" asks COMMAND"
        rf" INFO RL.MULTI whether the redis-ratelimit module is loaded at localhost:{server.port}; allow it to the"
        r' user \(\+command\|info\), or set mode to "module" or "script"',
        str(raised.value),
    ), str(raised.value)
    chosen = RateLimiter(client, LIMIT, key=lambda request: "k", mode=cast(Mode, mode))  # a mode given: nothing to ask
    assert remaining(chosen.check()) == 2


def test_module_mode_without_the_module_is_a_clear_error(script_server: Server) -> None:
    limiter = RateLimiter(redis.Redis(port=script_server.port), LIMIT, key=lambda request: "k", mode="module")
    expected = (
        f'mode "module": the server at localhost:{script_server.port} has no RL.TOKENBUCKET (the redis-ratelimit module is'
        ' not loaded there): load it, or set mode to "auto" or "script" (the Lua library, any Redis)'
    )
    with pytest.raises(redis.ResponseError) as raised:
        limiter.check()
    assert str(raised.value) == expected

    async def run() -> None:
        client = redis.asyncio.Redis(port=script_server.port)
        try:
            await AsyncRateLimiter(client, LIMIT, key=lambda request: "k", mode="module").check()
        finally:
            await client.aclose()

    with pytest.raises(redis.ResponseError) as raised:
        asyncio.run(run())
    assert str(raised.value) == expected


def test_a_key_of_the_other_mode_is_refused_naming_both_modes(module_server: Server) -> None:
    """On a server with the module, mode "script" and mode "module" each
    make a key; each mode then meets the other's key: an error naming both
    modes, for a check and for a peek, and both keys stay as they were."""
    r = redis.Redis(port=module_server.port)
    r.flushall()

    def limiter(partition: str, mode: Mode) -> RateLimiter:
        return RateLimiter(r, LIMIT, key=lambda request: partition, mode=mode)

    assert remaining(limiter("s", "script").check()) == 2
    assert remaining(limiter("m", "module").check()) == 2
    keys = [b"ratelimit:{s}:tokenbucket:3:0.001", b"ratelimit:{m}:tokenbucket:3:0.001"]
    assert [r.type(k) for k in keys] == [b"string", b"ratelimit"]
    before = [(r.dump(k), r.pexpiretime(k.decode())) for k in keys]

    module_message = (
        "WRONGTYPE Operation against a key holding the wrong kind of value (module mode: the key holds another"
        " Redis type, another algorithm's state, or script mode's state, the Lua library's layout; give each"
        " mode its own key prefix)"
    )
    script_message = (
        "WRONGTYPE the key holds module-mode state (the redis-ratelimit module's type); script mode cannot use"
        " it: give each mode its own key prefix"
    )
    crossings: list[tuple[str, Mode, str]] = [("s", "module", module_message), ("s", "auto", module_message), ("m", "script", script_message)]
    for partition, mode, message in crossings:
        with pytest.raises(redis.ResponseError) as raised:
            limiter(partition, mode).check()
        assert str(raised.value) == message, mode
        with pytest.raises(redis.ResponseError) as raised:
            limiter(partition, mode).peek()
        assert str(raised.value) == message, mode
    assert [(r.dump(k), r.pexpiretime(k.decode())) for k in keys] == before
    r.close()
