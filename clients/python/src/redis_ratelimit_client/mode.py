"""The mode: the module's commands, or the same calls to the Lua library
(script mode, for a Redis without the module). `auto` asks each
connection's server once, after it connects, whether RL.MULTI exists
(COMMAND INFO; an empty entry means no module) and asks again after a
reconnect: the server may have restarted with or without the module.

Script mode calls the library as a Redis Function (FCALL ratelimit_<v>,
script.py) where the server has Functions, loading it (FUNCTION LOAD) the
first time a server answers `Function not found`; where the server has
none, or the user may not call or load them, or loading is refused (a
replica), it uses EVALSHA (and EVAL after NOSCRIPT) on that connection from
then on, and says why once per limiter. `script_call` picks one way only.
Both choices are kept per connection and forgotten when it reconnects.

What goes over one connection for one call is written once, as a
generator of the commands to send, for the sync and the asyncio
transports alike: the transport sends each command it yields and sends
the reply back in (or throws the error reply in); what the generator
returns is the module call's reply."""

from __future__ import annotations

import logging
import weakref
from typing import Any, Generator, Generic, Literal, Optional, TypeVar

from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from .decision import Once
from .limits import ConfigurationError
from .script import SCRIPT_CALLS, ScriptCall, library, script_args

log = logging.getLogger("redis_ratelimit_client")

Mode = Literal["auto", "module", "script"]
MODES: tuple[Mode, ...] = ("auto", "module", "script")
#: Yields commands, receives their replies, returns the module call's reply.
Talk = Generator[list[str], Any, Any]


#: Commands a talk sends before the call itself (mode lookup, redirects, loading the library).
_SETUP = frozenset(("COMMAND", "ASKING", "FUNCTION"))


def takes(command: list[str]) -> bool:
    """Whether `command` is the call itself (the module command, or the
    script call that runs it), which may take units, not one that sets it up."""
    return command[0] not in _SETUP


class Calls:
    """How a limiter calls each server: its `mode` and, in script mode,
    its `script_call`; the fall back to EVALSHA is logged once."""

    def __init__(self, mode: object, script_call: object) -> None:
        if mode not in MODES:
            raise ConfigurationError(f"mode: must be one of {', '.join(MODES)} (got {mode!r})")
        if script_call not in SCRIPT_CALLS:
            raise ConfigurationError(f"script_call: must be one of {', '.join(SCRIPT_CALLS)} (got {script_call!r})")
        self.mode: Mode = mode
        self.script_call: ScriptCall = script_call
        self.logged = Once()

    def fell_back(self, connection: Any, why: str) -> None:
        if self.logged.first():
            log.warning("rate limiter: script mode calls the Lua library with EVALSHA at %s, not as a function (FCALL): %s", _where(connection), why)


T = TypeVar("T")


class _PerConnection(Generic[T]):
    """What was found out about each connection's server, forgotten when the
    connection connects again (redis-py calls back on every connect)."""

    def __init__(self) -> None:
        self.by_connection: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()

    def get(self, connection: Any) -> Optional[T]:
        return self.by_connection.get(connection)

    def remember(self, connection: Any, found: T) -> None:
        connection.register_connect_callback(self.forget)
        self.by_connection[connection] = found

    def forget(self, connection: Any) -> None:
        self.by_connection.pop(connection, None)


#: `auto`'s choice of mode, and script mode's way to call the library ("fcall" or "evalsha").
decisions: _PerConnection[Mode] = _PerConnection()
forms: _PerConnection[str] = _PerConnection()


def talk(calls: Calls, connection: Any, args: list[str], asking: bool = False) -> Talk:
    """The module call `args` on `connection` as `calls` says. `asking`:
    ASKING goes before each command that touches the key (it admits one command)."""
    mode = calls.mode
    if mode == "auto":
        mode = decisions.get(connection) or (yield from _decide(connection))
    if mode == "module":
        return (yield from _module_call(connection, args, asking))
    return (yield from _script_call(calls, connection, args, asking))


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


class _Refused(Exception):
    """The server cannot run the library as a function: why."""


def _script_call(calls: Calls, connection: Any, args: list[str], asking: bool) -> Talk:
    form = "evalsha" if calls.script_call == "evalsha" else forms.get(connection)
    if form != "evalsha":
        try:
            reply = yield from _function_call(connection, args, asking)
        except _Refused as refused:
            if calls.script_call == "fcall":
                raise ResponseError(
                    f'script_call "fcall": the server at {_where(connection)} cannot run the Lua library as a'
                    f' function: {refused}; allow it, or set script_call to "auto" (EVALSHA where functions cannot be used)'
                ) from refused.__cause__
            calls.fell_back(connection, str(refused))
            forms.remember(connection, "evalsha")
        else:
            if form is None:
                forms.remember(connection, "fcall")
            return reply
    return (yield from _evalsha_call(connection, args, asking))


def _function_call(connection: Any, args: list[str], asking: bool) -> Talk:
    """FCALL ratelimit_<v>; on `Function not found` (a new server, a
    restart without persistence, FUNCTION FLUSH: the call did not run) the
    library is loaded, "already exists" meaning another process did, and
    the call sent again, once. _Refused where functions cannot be used."""
    call = script_args(args, "FCALL")
    try:
        return (yield from _send(call, asking))
    except ResponseError as error:
        if "function not found" not in str(error).lower():
            _refusal(error, "FCALL")
            raise
    try:
        yield ["FUNCTION", "LOAD", library()]
    except ResponseError as error:
        if "already exists" not in str(error).lower():
            raise _Refused(f"FUNCTION LOAD was refused ({error})") from error
    try:
        return (yield from _send(call, asking))
    except ResponseError as error:
        _refusal(error, "FCALL")
        raise


def _refusal(error: ResponseError, command: str) -> None:
    """Raises _Refused when `error` is the server refusing `command` (no
    such command, the user's ACL), not the library's own reply. READONLY
    is not one: a primary demoted by a failover, Redis unavailable."""
    message = str(error)
    if isinstance(error, NoPermissionError) or "unknown command" in message.lower():
        raise _Refused(f"{command} was refused ({message})") from error


def _evalsha_call(connection: Any, args: list[str], asking: bool) -> Talk:
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
            " Lua library as a function (FCALL, and FUNCTION LOAD once) or else with EVALSHA and EVAL, which"
            " this user's ACL forbids: allow +fcall +function|load, or +evalsha +eval, or load the module there"
        ) from error
