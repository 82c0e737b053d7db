"""redis-py: pyproject.toml states the range the tests cover, from the
lowest release (make test-clients runs the suite with it in a second venv)
to the newest major's (requirements.lock pins the newest), and the
redis-py under test is one of those two."""

from __future__ import annotations

import re
from pathlib import Path

import redis
from packaging.requirements import Requirement
from packaging.version import Version

PACKAGE = Path(__file__).resolve().parents[1]


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
