"""Script mode's Lua library (lua/ratelimit.lua, the one source; the
package holds a copy made when it is built) and the mechanical turn of a
module call into a call of that library, as a Redis Function (FCALL) or a
script (EVALSHA, EVAL):

    RL.MULTI 2 k1 k2 * ALG a b n ...  ->  FCALL ratelimit_<v> 2 k1 k2 RL.MULTI * ALG a b n ...
    RL.PEEK k ALG a b * n             ->  EVALSHA <sha1> 1 k RL.PEEK ALG a b * n

KEYS are the module command's keys, ARGV[1] its name, then its own
arguments without the keys (and, for RL.MULTI, numkeys). <v> is the first
12 hex digits of the copy's SHA1: the library and its one function are
both named ratelimit_<v>, so two versions of an app each call their own."""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from pathlib import Path
from typing import Literal

FILE = "ratelimit.lua"

#: How script mode calls the library: FCALL where it can, else EVALSHA; or only one of them.
ScriptCall = Literal["auto", "fcall", "evalsha"]
SCRIPT_CALLS: tuple[ScriptCall, ...] = ("auto", "fcall", "evalsha")


@functools.cache
def source() -> str:
    packaged = resources.files(__package__).joinpath(FILE)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # A source checkout (the tests run from src/) has no copy: it reads the one source.
    return (Path(__file__).resolve().parents[4] / "lua" / FILE).read_text(encoding="utf-8")


@functools.cache
def sha1() -> str:
    return hashlib.sha1(source().encode("utf-8")).hexdigest()


@functools.cache
def function_name() -> str:
    """The library's and its function's name: ratelimit_<first 12 hex digits of the SHA1>."""
    return f"ratelimit_{sha1()[:12]}"


@functools.cache
def library() -> str:
    """The copy as a function library for FUNCTION LOAD: a header naming
    the library and a line naming its function (the file registers it)."""
    name = function_name()
    return f"#!lua name={name}\nlocal RATELIMIT_FUNCTION = '{name}'\n{source()}"


def script_args(args: list[str], command: str) -> list[str]:
    """`args`, a module call, as FCALL (the function), EVALSHA (the SHA1) or EVAL (the source)."""
    if args[0].upper() == "RL.MULTI":
        count = int(args[1])
        keys, rest = args[2 : 2 + count], args[2 + count :]
    else:
        count, keys, rest = 1, args[1:2], args[2:]
    body = function_name() if command == "FCALL" else sha1() if command == "EVALSHA" else source()
    return [command, body, str(count), *keys, args[0], *rest]
