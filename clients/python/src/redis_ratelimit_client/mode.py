"""The mode: the module's commands, or the same calls to the Lua library
(script mode, for a Redis without the module). `auto` asks each
connection's server once, after it connects, whether RL.MULTI exists
(COMMAND INFO; an empty entry means no module) and asks again after a
reconnect: the server may have restarted with or without the module.

What goes over one connection for one call is written once, as a
generator of the commands to send, for the sync and the asyncio
transports alike: the transport sends each command it yields and sends
the reply back in (or throws the error reply in); what the generator
returns is the module call's reply."""

from __future__ import annotations

import weakref
from typing import Any, Generator, Literal, Optional

from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from .limits import ConfigurationError
from .script import script_args

Mode = Literal["auto", "module", "script"]
MODES: tuple[Mode, ...] = ("auto", "module", "script")
#: Yields commands, receives their replies, returns the module call's reply.
Talk = Generator[list[str], Any, Any]


#: Commands a talk sends before the call itself (mode lookup, redirects).
_SETUP = frozenset(("COMMAND", "ASKING"))


def takes(command: list[str]) -> bool:
    """Whether `command` is the call itself (the module command, or the
    script call that runs it), which may take units, not one that sets it up."""
    return command[0] not in _SETUP


def check_mode(mode: object) -> Mode:
    if mode not in MODES:
        raise ConfigurationError(f"mode: must be one of {', '.join(MODES)} (got {mode!r})")
    return mode


class _Decisions:
    """The mode `auto` chose for each connection's server, forgotten when the
    connection connects again (redis-py calls back on every connect)."""

    def __init__(self) -> None:
        self.by_connection: weakref.WeakKeyDictionary[Any, Mode] = weakref.WeakKeyDictionary()

    def get(self, connection: Any) -> Optional[Mode]:
        return self.by_connection.get(connection)

    def remember(self, connection: Any, mode: Mode) -> None:
        connection.register_connect_callback(self.forget)
        self.by_connection[connection] = mode

    def forget(self, connection: Any) -> None:
        self.by_connection.pop(connection, None)


decisions = _Decisions()


def talk(mode: Mode, connection: Any, args: list[str], asking: bool = False) -> Talk:
    """The module call `args` on `connection` in `mode`. `asking`: ASKING
    goes before each command that touches the key (it admits one command)."""
    if mode == "auto":
        mode = decisions.get(connection) or (yield from _decide(connection))
    if mode == "module":
        return (yield from _module_call(connection, args, asking))
    return (yield from _script_call(connection, args, asking))


def _where(connection: Any) -> str:
    host = getattr(connection, "host", None)
    return f"{host}:{getattr(connection, 'port', '')}" if host else str(getattr(connection, "path", "the server"))


def _decide(connection: Any) -> Generator[list[str], Any, Mode]:
    try:
        entry = yield ["COMMAND", "INFO", "RL.MULTI"]
    except NoPermissionError as error:
        raise NoPermissionError(
            f"{error}: mode \"auto\" asks COMMAND INFO RL.MULTI whether the redis-ratelimit module is loaded at"
            f' {_where(connection)}; allow it to the user (+command|info), or set mode to "module" or "script"'
        ) from error
    mode: Mode = "module" if entry and entry[0] else "script"
    decisions.remember(connection, mode)
    return mode


def _send(command: list[str], asking: bool) -> Talk:
    if asking:
        yield ["ASKING"]
    return (yield command)


def _module_call(connection: Any, args: list[str], asking: bool) -> Talk:
    try:
        return (yield from _send(args, asking))
    except ResponseError as error:
        message = str(error)
        if message.startswith("WRONGTYPE"):
            raise ResponseError(
                f"{message} (module mode: the key holds another Redis type, another algorithm's state,"
                " or script mode's state, the Lua library's layout; give each mode its own key prefix)"
            ) from error
        if message.startswith("unknown command"):
            raise ResponseError(
                f'mode "module": the server at {_where(connection)} has no {args[0]} (the redis-ratelimit module'
                ' is not loaded there): load it, or set mode to "auto" or "script" (the Lua library, any Redis)'
            ) from error
        raise


def _script_call(connection: Any, args: list[str], asking: bool) -> Talk:
    try:
        try:
            return (yield from _send(script_args(args, "EVALSHA"), asking))
        except NoScriptError:  # not in this server's script cache (a restart, SCRIPT FLUSH): it did not run
            return (yield from _send(script_args(args, "EVAL"), asking))
    except NoPermissionError as error:
        message = str(error)
        if "'evalsha' command" not in message.lower() and "'eval' command" not in message.lower():
            raise
        raise NoPermissionError(
            f"{message}: script mode (the redis-ratelimit module is not used at {_where(connection)}) runs the"
            " Lua library with EVALSHA and EVAL, which this user's ACL forbids: allow them (+evalsha +eval),"
            " or load the module there"
        ) from error
