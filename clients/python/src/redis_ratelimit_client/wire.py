"""What the transports share about one connection of the limiter's own:
how a command is packed, how an asyncio connection is made ready, and how
long a timed-out call's reply is still waited for."""

from __future__ import annotations

import inspect
from typing import Any

import hiredis
import redis.asyncio
from redis.exceptions import ConnectionError, TimeoutError

#: Seconds a timed-out call's reply is still waited for, to undo what it took.
LATE = 60.0

GAVE_UP = f"rate limiter: no reply within {LATE:.0f} s to a check that timed out: its connection closed (if it ever runs, what it takes stays until the limits' own expiry)"
NOT_UNDONE = "rate limiter: what a check that timed out took was not given back: %s"

# redis-py's default encoding, which hiredis packs with.
_UTF8 = ("utf-8", "utf8", "UTF-8", "UTF8")


def packed(connection: Any, command: list[str]) -> Any:
    """The command as RESP, packed by hiredis in C where that gives the
    bytes redis-py would (str as strict UTF-8, its default): redis-py's
    asyncio connections pack in Python, 4.6 against 0.6 us for an RL.MULTI."""
    encoder = connection.encoder
    if encoder.encoding in _UTF8 and encoder.encoding_errors == "strict":
        return [hiredis.pack_command(tuple(command))]  # type: ignore[arg-type]  # its stub takes one-item tuples only
    return connection.pack_command(*command)


async def connected(connection: Any) -> None:
    """Connected before the mode is looked up (a connect forgets it). As
    the sync transport's: a socket the server closed (a restart) reads as
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
