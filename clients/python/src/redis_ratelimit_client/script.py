"""Script mode's Lua library (lua/ratelimit.lua, the one source; the
package holds a copy made when it is built) and the mechanical turn of a
module call into a call of that script:

    RL.MULTI 2 k1 k2 * ALG a b n ...  ->  EVALSHA <sha1> 2 k1 k2 RL.MULTI * ALG a b n ...
    RL.PEEK k ALG a b * n             ->  EVALSHA <sha1> 1 k RL.PEEK ALG a b * n

KEYS are the module command's keys, ARGV[1] its name, then its own
arguments without the keys (and, for RL.MULTI, numkeys)."""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from pathlib import Path

FILE = "ratelimit.lua"
# A source checkout (the tests run from src/) has no copy: it reads the one source.
SOURCE = Path(__file__).resolve().parents[4] / "lua" / FILE


@functools.cache
def source() -> str:
    packaged = resources.files(__package__).joinpath(FILE)
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return SOURCE.read_text(encoding="utf-8")


@functools.cache
def sha1() -> str:
    return hashlib.sha1(source().encode("utf-8")).hexdigest()


def script_args(args: list[str], command: str) -> list[str]:
    """`args`, a module call, as EVALSHA (with the SHA1) or EVAL (with the source)."""
    if args[0].upper() == "RL.MULTI":
        count = int(args[1])
        keys, rest = args[2 : 2 + count], args[2 + count :]
    else:
        count, keys, rest = 1, args[1:2], args[2:]
    body = sha1() if command == "EVALSHA" else source()
    return [command, body, str(count), *keys, args[0], *rest]
