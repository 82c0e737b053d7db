"""The package as a user gets it: mypy --strict finds nothing, and
`pip install ./clients/python` builds a wheel in a fresh venv (with
py.typed) without writing into the source tree."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

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


def test_pip_install_builds_a_wheel_without_touching_the_source_tree() -> None:
    before = tree_state()
    with tempfile.TemporaryDirectory() as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        install = subprocess.run([str(venv / "bin/pip"), "install", "-q", str(PACKAGE)], capture_output=True, text=True)
        assert install.returncode == 0, install.stderr
        show = subprocess.run([str(venv / "bin/pip"), "show", "-f", "redis-ratelimit-client"], capture_output=True, text=True, check=True).stdout
        assert "Name: redis-ratelimit-client" in show
        assert "redis_ratelimit_client/py.typed" in show
        probe = "import redis_ratelimit_client as m; print(m.__file__.startswith(%r), sorted(m.__all__)[:3])" % folder
        imported = subprocess.run([str(venv / "bin/python"), "-c", probe], capture_output=True, text=True, check=True).stdout
        assert imported.strip() == "True ['Algorithm', 'AsyncRateLimiter', 'ConfigurationError']"
    assert tree_state() == before
