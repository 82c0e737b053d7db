"""Sends one module command on a connection of the limiter's own, made
from the app's redis-py client (sync: its pool's connection class and
arguments; asyncio: a connection of the client's pool), without the
client's retry: a command that was sent is never sent
again (a replayed RL.MULTI would charge twice, or charge a request that was
already let through). On a timeout the connection is closed, so a command
still waiting in Redis (e.g. under CLIENT PAUSE) is dropped with it; the
next call opens a fresh connection.

On a cluster the command goes to the node owning its first key's slot; a
MOVED reply (the command did not run there) refreshes the slot map and
sends it once more; an ASK (the slot is being migrated and the key has left
already) sends it once to the importing node, after ASKING.

What is sent for a call depends on the mode (mode.py): the module command,
or the Lua library's EVALSHA (and EVAL after NOSCRIPT), on the same
connection, under the same timeout."""

from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
from typing import Any, Optional, Union, cast

import hiredis
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    RedisError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)
from redis.retry import Retry

from .deadlines import Deadlines
from .limits import ConfigurationError
from .mode import Mode, Talk, talk

SyncClient = Union[redis.Redis, redis.cluster.RedisCluster]
AsyncClient = Union[redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster]
# redis-py leaves much of its connection layer untyped: it is handled as Any here.

# Replies that mean "Redis can't answer now", not "the command is wrong".
UNAVAILABLE_REPLIES = ("LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "BUSY")


class Unavailable(Exception):
    """Redis unreachable, too slow, or not serving: the fail-open/closed case."""


def unavailable(error: BaseException) -> bool:
    # redis-py strips the code of the replies it maps to a class (LOADING is
    # a BusyLoadingError, a ConnectionError); BUSY keeps its code.
    if isinstance(error, (ConnectionError, TimeoutError, OSError, asyncio.TimeoutError, ClusterDownError, TryAgainError)):
        return True
    return isinstance(error, ResponseError) and str(error).split(" ", 1)[0] in UNAVAILABLE_REPLIES


def check_sync_client(client: object) -> SyncClient:
    if isinstance(client, (redis.Redis, redis.cluster.RedisCluster)):
        return client
    raise ConfigurationError(
        f"redis: must be a redis.Redis or redis.cluster.RedisCluster for RateLimiter (got {type(client).__name__};"
        " asyncio clients go with AsyncRateLimiter)"
    )


def check_async_client(client: object) -> AsyncClient:
    if isinstance(client, (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)):
        return client
    raise ConfigurationError(
        f"redis: must be a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster for AsyncRateLimiter"
        f" (got {type(client).__name__}; sync clients go with RateLimiter)"
    )


# Per client class: isinstance with redis-py's client classes (typing
# Protocols) costs microseconds, and every call asks.
_cluster_classes: dict[type, bool] = {}


def is_cluster(client: object) -> bool:
    cls = type(client)
    known = _cluster_classes.get(cls)
    if known is None:
        known = _cluster_classes[cls] = issubclass(cls, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))
    return known


class _OwnConnections:
    """Sync connections made like the client's own (its pool's connection
    class and arguments: address, auth, TLS, database) but without retries,
    and with `timeout` for connecting and reading: redis-py retries a failed
    connect with backoff by default, which would hold every request for
    seconds while Redis is down. Kept per pool, reused, dropped on error."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.free: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()

    def take(self, pool: Any, timeout: float) -> Any:
        with self.lock:
            free = self.free.setdefault(pool, [])
            connection = free.pop() if free else None
        if connection is None:
            kwargs = dict(pool.connection_kwargs)
            connect_timeout = kwargs.get("socket_connect_timeout")
            kwargs.update(
                retry=Retry(NoBackoff(), 0),
                socket_timeout=timeout,
                socket_connect_timeout=timeout if connect_timeout is None else min(connect_timeout, timeout),
            )
            connection = pool.connection_class(**kwargs)
        else:
            try:  # a closed socket reads as ready: Redis went away since; reconnect before sending
                if connection.can_read():
                    connection.disconnect()
            except (ConnectionError, TimeoutError, OSError):
                connection.disconnect()
        connection.connect()
        return connection

    def give_back(self, pool: Any, connection: Any) -> None:
        with self.lock:
            self.free.setdefault(pool, []).append(connection)


_own = _OwnConnections()


# redis-py's default encoding, which hiredis packs with.
_UTF8 = ("utf-8", "utf8", "UTF-8", "UTF8")


def _packed(connection: Any, command: list[str]) -> Any:
    """The command as RESP, packed by hiredis in C where that gives the
    bytes redis-py would (str as strict UTF-8, its default): redis-py's
    asyncio connections pack in Python, 4.6 against 0.6 us for an RL.MULTI."""
    encoder = connection.encoder
    if encoder.encoding in _UTF8 and encoder.encoding_errors == "strict":
        return [hiredis.pack_command(tuple(command))]  # type: ignore[arg-type]  # its stub takes one-item tuples only
    return connection.pack_command(*command)


def _run_sync(connection: Any, commands: Talk) -> Any:
    """Sends each command the talk yields, hands it the reply or the error reply; its result."""
    try:
        command = next(commands)
        while True:
            connection.send_packed_command(_packed(connection, command))
            try:
                reply = connection.read_response()
            except ResponseError as error:
                command = commands.throw(error)
            else:
                command = commands.send(reply)
    except StopIteration as done:
        return done.value


async def _run_async(connection: Any, commands: Talk) -> Any:
    """As _run_sync, on an asyncio connection."""
    try:
        command = next(commands)
        while True:
            await connection.send_packed_command(_packed(connection, command))
            try:
                reply = await connection.read_response()
            except ResponseError as error:
                command = commands.throw(error)
            else:
                command = commands.send(reply)
    except StopIteration as done:
        return done.value


def _send_sync(pool: Any, args: list[str], timeout: float, mode: Mode, asking: bool = False) -> Any:
    connection = _own.take(pool, timeout)
    try:  # asking: the slot is being imported there; ASKING lets the next command in
        reply = _run_sync(connection, talk(mode, connection, args, asking))
    except ResponseError:
        _own.give_back(pool, connection)
        raise
    except BaseException:
        connection.disconnect()
        raise
    _own.give_back(pool, connection)
    return reply


def _sync_node(cluster: Any, key: str, ask: Optional[AskError]) -> Any:
    """The node to send to: the slot's owner, or where an ASK pointed."""
    if ask is None:
        return cluster.get_node_from_key(key)
    node = cluster.get_node(host=ask.host, port=ask.port)
    if node is None:
        cluster.nodes_manager.initialize()
        node = cluster.get_node(host=ask.host, port=ask.port)
    if node is None:
        raise Unavailable(f"ASK to {ask.host}:{ask.port}, a node the cluster does not list")
    return node


def call_sync(client: SyncClient, args: list[str], timeout: float, mode: Mode = "auto") -> Any:
    """The reply to the module call `args`, made in `mode`; ResponseError for
    an error reply; Unavailable when Redis is unreachable or does not answer
    within `timeout` seconds."""
    try:
        ask: Optional[AskError] = None
        for attempt in (1, 2):
            if isinstance(client, redis.cluster.RedisCluster):
                cluster: Any = client
                node = _sync_node(cluster, args[_first_key(args)], ask)
                pool: Any = cluster.get_redis_connection(node).connection_pool
            else:
                pool = client.connection_pool
            try:
                return _send_sync(pool, args, timeout, mode, asking=ask is not None)
            except AskError as redirect:  # MOVED (a subclass) or ASK: the command did not run
                if attempt == 2 or not isinstance(client, redis.cluster.RedisCluster):
                    raise
                if isinstance(redirect, MovedError):
                    client.nodes_manager.initialize()
                else:
                    ask = redirect
    except RedisError as error:
        if unavailable(error):
            raise Unavailable(str(error) or type(error).__name__) from error
        raise
    except OSError as error:
        raise Unavailable(str(error)) from error
    raise AssertionError("unreachable")


async def _connected(connection: Any) -> None:
    """Connected before the mode is looked up (a connect forgets it). As
    _OwnConnections.take: a socket the server closed (a restart) reads as
    ready, so it reconnects first (redis-py's pool skips this check while its
    maintenance notifications are on, as they are by default)."""
    if connection.is_connected:
        try:
            # can_read (redis-py 7+); 6.x has only can_read_destructive, which drops
            # what it reads: nothing is pending on an idle connection, and it reconnects if so.
            can_read = getattr(connection, "can_read", None) or connection.can_read_destructive
            if not await can_read():
                return
        except (ConnectionError, TimeoutError, OSError):
            pass
        await connection.disconnect()
    if _CONNECT_ONCE:  # without the connection's retry (a cluster node's connections have the client's)
        await connection.connect_check_health(check_health=True, retry_socket_connect=False)
    else:
        await connection.connect()


_CONNECT_ONCE = "retry_socket_connect" in inspect.signature(
    getattr(redis.asyncio.connection.AbstractConnection, "connect_check_health", lambda: None)
).parameters

class _OwnAsyncConnections:
    """Asyncio connections made like the client's pool's own (its connection
    class and arguments) but without retries: redis-py's pool connects (and
    retries a refused connect with backoff) before it hands a connection
    out, so every check waited the whole timeout while Redis was down. Kept
    per pool, idle ones reused; one that failed is dropped. (A list, not a
    redis.asyncio.ConnectionPool: its locking and bookkeeping cost more
    than the rest of a check.)"""

    def __init__(self) -> None:
        self.free: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()

    def take(self, pool: Any) -> Any:
        free = self.free.get(pool)
        if free:
            return free.pop()
        # No socket timeout of their own: the limiter's bounds the whole call
        # (deadlines.py), and redis-py's made a task and a timeout per command.
        return pool.connection_class(**{**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0), "socket_timeout": None})

    def give_back(self, pool: Any, connection: Any) -> None:
        free = self.free.get(pool)
        if free is None:
            free = self.free[pool] = []
        free.append(connection)


_own_async = _OwnAsyncConnections()


async def _send_async_standalone(client: redis.asyncio.Redis, args: list[str], mode: Mode) -> Any:
    pool: Any = client.connection_pool
    connection = _own_async.take(pool)
    try:
        await _connected(connection)
        reply = await _run_async(connection, talk(mode, connection, args))
    except ResponseError:
        _own_async.give_back(pool, connection)
        raise
    except BaseException:
        await asyncio.shield(connection.disconnect())
        raise
    _own_async.give_back(pool, connection)
    return reply


async def _send_async_cluster(client: Any, args: list[str], mode: Mode) -> Any:
    ask: Optional[AskError] = None
    for attempt in (1, 2):
        await client.initialize()
        key = args[_first_key(args)]
        node = client.get_node_from_key(key) if ask is None else client.get_node(host=ask.host, port=ask.port)
        if node is None:
            raise Unavailable(f"no node serves the slot of {key!r}" if ask is None else f"ASK to {ask.host}:{ask.port}, an unknown node")
        connection = node.acquire_connection()
        try:
            await _connected(connection)
            # After an ASK the slot is being imported there: ASKING lets the next command in.
            return await _run_async(connection, talk(mode, connection, args, asking=ask is not None))
        except AskError as redirect:  # MOVED (a subclass) or ASK: the command did not run
            if attempt == 2:
                raise
            if isinstance(redirect, MovedError):
                await client.nodes_manager.initialize()
            else:
                ask = redirect
        except ResponseError:
            raise
        except BaseException:
            await asyncio.shield(connection.disconnect())
            raise
        finally:
            node.release(connection)
    raise AssertionError("unreachable")


async def call_async(client: AsyncClient, args: list[str], deadlines: Deadlines, mode: Mode = "auto") -> Any:
    """As call_sync, for the asyncio clients, within the deadlines' time."""
    try:
        if is_cluster(client):
            return await deadlines.within(_send_async_cluster(client, args, mode))
        return await deadlines.within(_send_async_standalone(cast(redis.asyncio.Redis, client), args, mode))
    except RedisError as error:
        if unavailable(error):
            raise Unavailable(str(error) or type(error).__name__) from error
        raise
    except (OSError, asyncio.TimeoutError) as error:
        raise Unavailable(str(error) or "timed out") from error


def _first_key(args: list[str]) -> int:
    # RL.MULTI numkeys key ...: the first key is the third word; the others
    # (RL.PEEK, RL.REFUND) name theirs second.
    return 2 if args[0].upper() == "RL.MULTI" else 1
