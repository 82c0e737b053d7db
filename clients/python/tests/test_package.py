"""The package as a user gets it: mypy --strict finds nothing, and
`pip install ./clients/python` builds a wheel in a fresh venv (with
py.typed) without writing into the source tree. The wheel and the sdist
ship a copy of lua/ratelimit.lua, made when they are built: a copy that
differs from the repository's file fails here."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Iterator

import pytest

from servers import LUA

PACKAGE = Path(__file__).resolve().parents[1]


def test_mypy_strict_is_clean() -> None:
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "src", "tests"], cwd=PACKAGE, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("Success: no issues found")


def tree_state() -> str:
    """Every file git sees under the package, ignored ones too, but the
    caches that running these tests writes."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "."], cwd=PACKAGE, capture_output=True, text=True, check=True
    ).stdout
    return "\n".join(line for line in out.splitlines() if "__pycache__" not in line and ".pytest_cache" not in line and ".mypy_cache" not in line and ".venv/" not in line)


@pytest.fixture(scope="module")
def venv() -> Iterator[Path]:
    """A fresh venv, in a folder of its own, for this file's tests."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        yield path


def test_pip_install_builds_a_wheel_without_touching_the_source_tree(venv: Path) -> None:
    before = tree_state()
    folder = str(venv.parent)
    install = subprocess.run([str(venv / "bin/pip"), "install", "-q", str(PACKAGE)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    show = subprocess.run([str(venv / "bin/pip"), "show", "-f", "redis-ratelimit-client"], capture_output=True, text=True, check=True).stdout
    assert "Name: redis-ratelimit-client" in show
    assert "redis_ratelimit_client/py.typed" in show
    probe = "import redis_ratelimit_client as m; print(m.__file__.startswith(%r), sorted(m.__all__)[:3])" % folder
    imported = subprocess.run([str(venv / "bin/python"), "-c", probe], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "True ['Algorithm', 'AsyncRateLimiter', 'ConfigurationError']"
    # The copy of the Lua library in the installed package is what script mode runs.
    probe = "from redis_ratelimit_client import script; import sys; sys.stdout.write(script.source())"
    shipped = subprocess.run([str(venv / "bin/python"), "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "redis_ratelimit_client/ratelimit.lua" in show
    assert shipped == LUA.read_text()
    assert tree_state() == before


def test_the_sdist_ships_the_lua_library_and_its_wheel_too(venv: Path) -> None:
    """A wheel built from the sdist (away from the repository) takes the
    sdist's copy."""
    before = tree_state()
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([str(venv / "bin/pip"), "install", "-q", "hatchling>=1.25"], check=True)
        dist = Path(folder) / "dist"
        subprocess.run([str(venv / "bin/hatchling"), "build", "-t", "sdist", "-d", str(dist)], cwd=PACKAGE, check=True, capture_output=True)
        (sdist,) = dist.glob("*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(Path(folder) / "unpacked", filter="data")
            member = archive.extractfile(f"{sdist.name[: -len('.tar.gz')]}/src/redis_ratelimit_client/ratelimit.lua")
            assert member is not None and member.read() == LUA.read_bytes()
        (unpacked,) = (Path(folder) / "unpacked").iterdir()
        wheels = Path(folder) / "wheels"
        subprocess.run([str(venv / "bin/pip"), "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(unpacked)], check=True)
        (wheel,) = wheels.glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            assert archive.read("redis_ratelimit_client/ratelimit.lua") == LUA.read_bytes()
    assert tree_state() == before
