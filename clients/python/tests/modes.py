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


def script_stats(client: Any) -> tuple[int, int, int]:
    """EVALSHA calls, of which failed (NOSCRIPT, in these tests), and EVAL calls."""
    stats = client.info("commandstats")
    evalsha, eval_ = stats.get("cmdstat_evalsha", {}), stats.get("cmdstat_eval", {})
    return int(evalsha.get("calls", 0)), int(evalsha.get("failed_calls", 0)), int(eval_.get("calls", 0))


def function_stats(client: Any) -> tuple[int, int, int]:
    """FCALL calls, of which failed (`Function not found`, in these tests), and FUNCTION LOAD calls."""
    stats = client.info("commandstats")
    fcall, load = stats.get("cmdstat_fcall", {}), stats.get("cmdstat_function|load", {})
    return int(fcall.get("calls", 0)), int(fcall.get("failed_calls", 0)), int(load.get("calls", 0))


#: The module's commands a check sends: one limit's own, or RL.MULTI of several.
TAKING = ("multi", "tokenbucket", "leakybucket", "fixedwindow", "slidingwindow", "slidinglog", "acquire")


def calls(client: Any, mode: str) -> int:
    """Limiter checks the server ran: the counters of the commands a check
    sends (module), the FCALL, EVALSHA and EVAL that ran the library
    (script; a `Function not found` or a NOSCRIPT did not)."""
    if mode == "module":
        info = client.info("ratelimit")
        return sum(int(info[f"ratelimit_{command}"]["calls"]) for command in TAKING)
    evalsha, noscript, eval_ = script_stats(client)
    fcall, missing, _ = function_stats(client)
    return evalsha - noscript + eval_ + fcall - missing


def libraries(client: Any) -> dict[str, list[str]]:
    """FUNCTION LIST: each library's name, and its functions' names (RESP2's flat lists, read)."""
    out = {}
    for entry in client.function_list():
        library = dict(zip(entry[0::2], entry[1::2]))
        out[library["library_name"]] = [dict(zip(f[0::2], f[1::2]))["name"] for f in library["functions"]]
    return out
