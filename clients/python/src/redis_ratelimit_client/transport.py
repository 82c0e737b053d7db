"""Sends one module call on a connection of the limiter's own, made from
the app's redis-py client (its pool's connection class and arguments),
without the client's retry: a command that was sent is never sent again (a
replayed RL.MULTI or RL.TOKENBUCKET would charge twice, or charge a
request that was already let through). The app's close() / aclose() of
its pool closes these connections too. An asyncio limiter on a standalone
server shares one such connection among its concurrent calls, written
together (pipe.py); the sync limiter, and each call on a cluster, take a
connection for the call.

A call that takes (RL.MULTI, or one limit's own command) and gets no
answer in time is not forgotten: Redis runs a command it has read even
when its client has gone (a busy or stopped server reads the socket
later), so its connection goes to a reader (a thread, or a task) that
waits up to 60 s for the reply and then undoes, on the same connection,
what the call took (its Call.undo: units refunded, leases released). No
reply within 60 s: the connection is closed. Other calls that time out
take nothing: a connection of their own is closed at once (a shared one
reads their replies and goes back).

On a cluster the call goes to the node owning its first key's slot; a
MOVED reply (the command did not run there) refreshes the slot map and
sends it once more; an ASK (the slot is being migrated and the key has left
already) sends it once to the importing node, after ASKING.

What is sent for a call depends on the mode (mode.py): the module command,
or the Lua library's FCALL (FUNCTION LOAD first where it is missing) or
EVALSHA (and EVAL after NOSCRIPT), on the same connection, under the same
timeout."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import weakref
from typing import Any, Callable, Optional, Union, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)
from redis.retry import Retry

from .commands import Call, Undo
from .deadlines import Deadlines
from .limits import ConfigurationError
from .mode import Calls, Talk, takes, talk
from .pipe import Pipe, converse
from .wire import GAVE_UP, LATE, NOT_UNDONE, connected, packed

log = logging.getLogger("redis_ratelimit_client")

SyncClient = Union[redis.Redis, redis.cluster.RedisCluster]
AsyncClient = Union[redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster]
# redis-py leaves much of its connection layer untyped: it is handled as Any here.

# Replies that mean "Redis can't answer now", not "the command is wrong".
# READONLY: a primary demoted by a failover (the command did not run there).
UNAVAILABLE_REPLIES = ("LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "BUSY", "READONLY")



class Unavailable(Exception):
    """Redis unreachable, too slow, or not serving: the fail-open/closed case."""


def unavailable(error: BaseException) -> bool:
    # redis-py strips the code of the replies it maps to a class (LOADING is
    # a BusyLoadingError, a ConnectionError; READONLY a ReadOnlyError) and
    # ERR: a write the Lua library was refused comes as "ERR READONLY ...
    # script: ..." on Redis 7.0 (its re-raise prefixed), read "READONLY ...".
    # BUSY keeps its code.
    if isinstance(error, (ConnectionError, TimeoutError, OSError, asyncio.TimeoutError, ClusterDownError, TryAgainError, ReadOnlyError)):
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


class _Own:
    """The limiter's own connections to each pool's server, the idle ones
    kept for reuse by their socket timeout (a limiter's `timeout`; None for
    asyncio's), in plain lists: a redis-py pool's locking and bookkeeping
    cost more than the rest of a check. The pool's disconnect(), which the
    app's close() and aclose() call, closes them too."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: weakref.WeakKeyDictionary[Any, dict[Optional[float], list[Any]]] = weakref.WeakKeyDictionary()
        self.made: weakref.WeakKeyDictionary[Any, weakref.WeakSet[Any]] = weakref.WeakKeyDictionary()

    def take(self, pool: Any, timeout: Optional[float]) -> Any:
        """An idle connection to the pool's server with this socket timeout, or None."""
        idle = self.idle.get(pool)
        same = idle.get(timeout) if idle else None
        return same.pop() if same else None  # list.pop: atomic among threads

    def new(self, pool: Any, **options: Any) -> Any:
        """A connection like the pool's own (address, auth, TLS, database), with `options`."""
        connection = pool.connection_class(**{**pool.connection_kwargs, **options})
        with self.lock:
            made = self.made.get(pool)
            if made is None:
                made = self.made[pool] = weakref.WeakSet()
                self.idle[pool] = {}
                _closing_ours_too(pool, made, self.idle[pool])
            made.add(connection)
        return connection

    def give_back(self, pool: Any, connection: Any, timeout: Optional[float]) -> None:
        self.idle[pool].setdefault(timeout, []).append(connection)


def _closing_ours_too(pool: Any, made: weakref.WeakSet[Any], idle: dict[Optional[float], list[Any]]) -> None:
    """Makes the pool's disconnect() close the limiter's connections to it as well."""
    own_disconnect = pool.disconnect
    if inspect.iscoroutinefunction(own_disconnect):

        async def disconnect(*args: Any, **kwargs: Any) -> Any:
            ours = list(made)  # held here: the idle lists are the only other references
            await asyncio.gather(*(c.disconnect() for c in ours), return_exceptions=True)
            for same in idle.values():
                same.clear()
            return await own_disconnect(*args, **kwargs)

    else:

        def disconnect(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            for connection in list(made):
                connection.disconnect()
            for same in idle.values():
                same.clear()
            return own_disconnect(*args, **kwargs)

    pool.disconnect = disconnect


_own = _Own()


class _Late(Exception):
    """The call's reply did not come in time: its connection went to a late reader."""


# The sync transport.


def _take_sync(pool: Any, timeout: float) -> Any:
    """A connection without retries, with `timeout` for connecting and
    reading: redis-py retries a failed connect with backoff by default,
    which would hold every request for seconds while Redis is down."""
    connection = _own.take(pool, timeout)
    if connection is None:
        connect_timeout = pool.connection_kwargs.get("socket_connect_timeout")
        connection = _own.new(
            pool,
            retry=Retry(NoBackoff(), 0),
            socket_timeout=timeout,
            socket_connect_timeout=timeout if connect_timeout is None else min(connect_timeout, timeout),
        )
    else:
        try:  # a closed socket reads as ready: Redis went away since; reconnect before sending
            if connection.can_read():
                connection.disconnect()
        except (ConnectionError, TimeoutError, OSError):
            connection.disconnect()
    connection.connect()
    return connection


def _run_sync(connection: Any, commands: Talk, late: bool = False) -> Any:
    """Sends each command the talk yields, hands it the reply or the error
    reply; its result. `late`: a call that takes and times out raises _Late
    with its connection left as it is (its reply still to come)."""
    try:
        command = next(commands)
        while True:
            connection.send_packed_command(packed(connection, command))
            try:
                reply = connection.read_response(disconnect_on_error=False)
            except ResponseError as error:
                command = commands.throw(error)
            except TimeoutError as error:
                if late and takes(command):
                    raise _Late() from error
                raise
            else:
                command = commands.send(reply)
    except StopIteration as done:
        return done.value


def _send_sync(pool: Any, call: Call, timeout: float, calls: Calls, asking: bool = False) -> Any:
    connection = _take_sync(pool, timeout)
    try:  # asking: the slot is being imported there; ASKING lets the next command in
        reply = _run_sync(connection, talk(calls, connection, call.args, asking), call.undo is not None)
    except ResponseError:
        _own.give_back(pool, connection, timeout)
        raise
    except _Late as late:
        reader = threading.Thread(target=_undo_late_sync, args=(pool, connection, timeout, call.undo, calls, asking), name="redis-ratelimit-late", daemon=True)
        reader.start()
        raise cast(BaseException, late.__cause__) from None
    except BaseException:
        connection.disconnect()
        raise
    _own.give_back(pool, connection, timeout)
    return reply


def _undo_late_sync(pool: Any, connection: Any, timeout: float, undo: Undo, calls: Calls, asking: bool) -> None:
    """Waits up to LATE for the reply of a call that timed out, then gives
    back what it took, on the same connection (the same node)."""
    deadline = time.monotonic() + LATE
    try:
        while not connection.can_read(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                connection.disconnect()
                log.warning(GAVE_UP)
                return
        try:
            reply = connection.read_response(disconnect_on_error=False)
        except ResponseError:  # an error reply took nothing
            reply = None
        for args in undo(reply) if reply is not None else []:
            _run_sync(connection, talk(calls, connection, args, asking))
    except Exception as error:
        connection.disconnect()
        log.warning(NOT_UNDONE, error)
        return
    _own.give_back(pool, connection, timeout)


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


def call_sync(client: SyncClient, call: Call, timeout: float, calls: Calls) -> Any:
    """The reply to the module call, made as `calls` says; ResponseError for an
    error reply; Unavailable when Redis is unreachable or does not answer
    within `timeout` seconds."""
    try:
        ask: Optional[AskError] = None
        for attempt in (1, 2):
            if isinstance(client, redis.cluster.RedisCluster):
                cluster: Any = client
                node = _sync_node(cluster, call.args[_first_key(call.args)], ask)
                pool: Any = cluster.get_redis_connection(node).connection_pool
            else:
                pool = client.connection_pool
            try:
                return _send_sync(pool, call, timeout, calls, asking=ask is not None)
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


# The asyncio transport.


def _take_async(pool: Any) -> Any:
    """A connection without retries and without a socket timeout of its own:
    the limiter's bounds the whole call (deadlines.py), and redis-py's made a
    task and a timeout per command."""
    connection = _own.take(pool, None)
    if connection is None:  # an asyncio Retry: redis-py 8.2 warns about (and converts) a sync one
        connection = _own.new(pool, retry=AsyncRetry(NoBackoff(), 0), socket_timeout=None)
    return connection


class _LateReader:
    """Where a call that takes sends its connection when it is cancelled
    (its deadline, or its task cancelled) while its reply is pending: a task
    that reads the reply (up to LATE) and undoes what the call took, then
    gives the connection back (`done`)."""

    tasks: set[asyncio.Future[None]] = set()  # references, or the loop may drop them

    def __init__(self, connection: Any, undo: Undo, calls: Calls, asking: bool, done: Callable[[Any], None]) -> None:
        self.connection, self.undo, self.calls, self.asking, self.done = connection, undo, calls, asking, done
        self.started = False

    def start(self) -> None:
        self.started = True
        task = asyncio.ensure_future(self.read())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def read(self) -> None:
        connection = self.connection
        try:
            await asyncio.wait_for(self._undo(), LATE)
        except asyncio.TimeoutError:
            await asyncio.shield(connection.disconnect())
            log.warning(GAVE_UP)
            return
        except BaseException as error:
            await asyncio.shield(connection.disconnect())
            log.warning(NOT_UNDONE, error or type(error).__name__)
            if isinstance(error, asyncio.CancelledError):
                raise
            return
        self.done(connection)

    async def _undo(self) -> None:
        try:
            reply = await self.connection.read_response(disconnect_on_error=False)
        except ResponseError:  # an error reply took nothing
            return
        for args in self.undo(reply):
            await _run_async(self.connection, talk(self.calls, self.connection, args, self.asking))


async def _run_async(connection: Any, commands: Talk, late: Optional[_LateReader] = None) -> Any:
    """As _run_sync, on an asyncio connection. `late`: a call that takes,
    cancelled while its reply is pending, hands its connection to it."""
    try:
        command = next(commands)
        while True:
            await connection.send_packed_command(packed(connection, command))
            try:
                reply = await connection.read_response(disconnect_on_error=False)
            except ResponseError as error:
                command = commands.throw(error)
            except asyncio.CancelledError:
                if late is not None and takes(command):
                    late.start()
                raise
            else:
                command = commands.send(reply)
    except StopIteration as done:
        return done.value


# Each pool's pipe (pipe.py): the one its limiters' asyncio checks share.
_pipes: weakref.WeakKeyDictionary[Any, Pipe] = weakref.WeakKeyDictionary()


def _pipe(pool: Any) -> Pipe:
    pipe = _pipes.get(pool)
    if pipe is not None and pipe.usable:
        if pipe.loop is asyncio.get_running_loop():
            return pipe
        pipe.abandon()
    pipe = _pipes[pool] = Pipe(_take_async(pool), lambda connection: _own.give_back(pool, connection, None))
    return pipe


async def _send_async_standalone(client: redis.asyncio.Redis, call: Call, calls: Calls) -> Any:
    return await converse(_pipe(client.connection_pool), calls, call.args, call.undo)


async def _send_async_cluster(client: Any, call: Call, calls: Calls) -> Any:
    ask: Optional[AskError] = None
    for attempt in (1, 2):
        await client.initialize()
        key = call.args[_first_key(call.args)]
        node = client.get_node_from_key(key) if ask is None else client.get_node(host=ask.host, port=ask.port)
        if node is None:
            raise Unavailable(f"no node serves the slot of {key!r}" if ask is None else f"ASK to {ask.host}:{ask.port}, an unknown node")
        connection = node.acquire_connection()
        # After an ASK the slot is being imported there: ASKING lets the next command in.
        late = None if call.undo is None else _LateReader(connection, call.undo, calls, ask is not None, node.release)
        try:
            await connected(connection)
            reply = await _run_async(connection, talk(calls, connection, call.args, asking=ask is not None), late)
        except AskError as redirect:  # MOVED (a subclass) or ASK: the command did not run
            node.release(connection)
            if attempt == 2:
                raise
            if isinstance(redirect, MovedError):
                await client.nodes_manager.initialize()
            else:
                ask = redirect
            continue
        except ResponseError:
            node.release(connection)
            raise
        except BaseException:
            if late is None or not late.started:
                await asyncio.shield(connection.disconnect())
                node.release(connection)
            raise
        node.release(connection)
        return reply
    raise AssertionError("unreachable")


async def call_async(client: AsyncClient, call: Call, deadlines: Deadlines, calls: Calls) -> Any:
    """As call_sync, for the asyncio clients, within the deadlines' time."""
    try:
        if is_cluster(client):
            return await deadlines.within(_send_async_cluster(client, call, calls))
        return await deadlines.within(_send_async_standalone(cast(redis.asyncio.Redis, client), call, calls))
    except RedisError as error:
        if unavailable(error):
            raise Unavailable(str(error) or type(error).__name__) from error
        raise
    except (OSError, asyncio.TimeoutError) as error:
        raise Unavailable(str(error) or "timed out") from error


def _first_key(args: list[str]) -> int:
    # RL.MULTI numkeys key ...: the first key is the third word; the others
    # (RL.TOKENBUCKET and the other single limits, RL.PEEK, RL.REFUND)
    # name theirs second.
    return 2 if args[0].upper() == "RL.MULTI" else 1
