"""redis-py: pyproject.toml states the range the tests cover, from the
lowest release (make test-clients runs the suite with it in a second venv)
to the newest major's (requirements.lock pins the newest), and the
redis-py under test is one of those two."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import redis
import redis.asyncio
from packaging.requirements import Requirement
from packaging.version import Version

from redis_ratelimit_client import AsyncRateLimiter, Limit, RateLimiter
from servers import Server

PACKAGE = Path(__file__).resolve().parents[1]
LIMIT = Limit("tokenbucket", 3, rate=0.001)


def test_redis_py_is_the_lowest_or_the_newest_of_the_stated_range() -> None:
    pyproject = (PACKAGE / "pyproject.toml").read_text()
    (stated,) = [Requirement(text) for text in re.findall(r'"(redis[<>=~!][^"]*)"', pyproject)]
    bounds = {spec.operator: Version(spec.version) for spec in stated.specifier}
    assert sorted(bounds) == ["<", ">="], f"redis-py needs a lowest and an upper bound in pyproject.toml (got {stated})"
    match = re.search(r"^redis==(\S+)$", (PACKAGE / "requirements.lock").read_text(), re.M)
    assert match is not None
    newest = Version(match.group(1))
    # The upper bound admits the newest tested major and no later one.
    assert bounds["<"] == Version(f"{newest.major + 1}"), (stated, newest)
    assert stated.specifier.contains(newest)
    assert Version(redis.__version__) in (bounds[">="], newest), f"redis-py {redis.__version__} is neither the lowest ({bounds['>=']}) nor the newest ({newest})"


def test_closing_the_app_client_closes_the_limiters_connections(own_server: Server) -> None:
    """The limiter's own connections go when the app closes its client
    (close(), aclose(): the pool's disconnect()), not when the garbage
    collector finds them (an open socket till then, and redis-py 6's
    ResourceWarning "unclosed Connection")."""
    admin = own_server.client()

    def others(expected: int) -> int:
        """Other clients than this one, once the server saw the closes coming (1 s at most)."""
        deadline = time.monotonic() + 1
        while len(admin.client_list()) - 1 != expected and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(admin.client_list()) - 1

    async def run() -> list[int]:
        seen = []
        sync = redis.Redis(port=own_server.port)
        assert RateLimiter(sync, LIMIT, key=lambda request: "k").check() is not None
        seen.append(others(1))
        sync.close()
        seen.append(others(0))
        asynchronous = redis.asyncio.Redis(port=own_server.port)
        assert await AsyncRateLimiter(asynchronous, LIMIT, key=lambda request: "k").check() is not None
        seen.append(others(1))
        await asynchronous.aclose()
        seen.append(others(0))
        return seen

    assert asyncio.run(run()) == [1, 0, 1, 0]
    admin.close()
