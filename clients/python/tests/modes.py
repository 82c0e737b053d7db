"""The two modes the tests run in: `module` (a server with the module) and
`script` (a server without it, where the limiter's default mode, auto,
picks the Lua library). A module call made as each mode makes it, to read
state beside the limiter, and how many limiter calls a server ran."""

from __future__ import annotations

from typing import Any

from servers import LUA

MODES = ("module", "script")


def run(client: Any, mode: str, *args: str) -> Any:
    """The module call `args`: the command itself, or the repository's Lua
    file through EVAL (KEYS: the command's keys; ARGV: its name and the rest)."""
    if mode == "module":
        return client.execute_command(*args)
    if args[0].upper() == "RL.MULTI":
        keys, rest = args[2 : 2 + int(args[1])], args[2 + int(args[1]) :]
    else:
        keys, rest = args[1:2], args[2:]
    return client.eval(LUA.read_text(), len(keys), *keys, args[0], *rest)


def peek_remaining(client: Any, mode: str, *args: str) -> int:
    """`remaining` of an RL.PEEK reply."""
    return int(run(client, mode, *args)[1])


def calls(client: Any, mode: str) -> int:
    """Limiter calls the server ran: RL.MULTI's counter (module), the
    EVALSHA and EVAL that ran the script (script; a NOSCRIPT did not)."""
    if mode == "module":
        return int(client.info("ratelimit")["ratelimit_multi"]["calls"])
    stats = client.info("commandstats")
    ran = [stats.get(f"cmdstat_{name}", {}) for name in ("evalsha", "eval")]
    return sum(int(s.get("calls", 0)) - int(s.get("failed_calls", 0)) for s in ran)
