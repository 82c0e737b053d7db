"""Every code block of the README, run as it stands against a real
redis-server (REDIS_URL names it), also with that server stopped. The
Starlette and FastAPI examples are served in test_readme.py; this file
runs the others and fails when the README gains a block no test runs."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import types
import tomllib
from pathlib import Path
from typing import Any, Callable

import pytest
import redis

from modes import peek_remaining
from servers import Server
from test_readme import README, example, post
from web import close_redis_connections, get, rate_headers, serve_asgi, serve_wsgi
from windows import wait_for_window_with



PACKAGE = README.parent
SCOPE = {"type": "http", "client": ("203.0.113.7", 5000), "headers": []}

#: The first line that tells each block apart, and what runs it.
BLOCKS = {
    "pip install redis-ratelimit-client": "test_the_install_lines_name_this_package_and_its_extras",
    "from redis_ratelimit_client import Limit, RateLimiter, by_user, denied_body, rate_limit_headers": "test_the_limiter_example",
    "llm = AsyncRateLimiter(": "test_the_reserve_then_give_back_example",
    "exports = AsyncRateLimiter(": "test_the_concurrency_example",
    "from starlette.applications import Starlette": "test_readme.py::test_the_starlette_example",
    "from fastapi import Depends, FastAPI": "test_readme.py::test_the_fastapi_example",
    "from litestar import Litestar, get": "test_the_litestar_example",
    "from flask import Flask": "test_the_flask_example",
    "# myproject/limits.py": "test_the_django_example",
}


def test_every_block_is_run_by_a_test() -> None:
    every = re.findall(r"```(\w*)\n(.*?)```", README.read_text(), re.S)
    blocks = [(lang, block) for lang, block in every if lang]  # untagged: a benchmark's output, not code
    assert [lang for lang, _ in blocks] == ["sh"] + ["python"] * 8
    assert all("checks/s" in block or "requests/s" in block for lang, block in every if not lang)
    for _, block in blocks:
        assert [marker for marker in BLOCKS if marker in block] != [], block[:80]
    assert len(blocks) == len(BLOCKS)


def test_the_repository_readme_shows_a_block_of_this_readme() -> None:
    # The repository's README shows the Flask example as this README has
    # it, word for word, so the block there is the one test_the_flask_example runs.
    root = (PACKAGE.parent.parent / "README.md").read_text()
    shown = re.findall(r"```python\n(.*?)```", root, re.S)
    ours = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(shown) == 1 and shown[0] in ours and "from flask import Flask" in shown[0]


def test_the_install_lines_name_this_package_and_its_extras() -> None:
    (block,) = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    assert lines[0] == f"pip install {project['name']}"
    assert lines[1] == f"pip install '{project['name']}[fastapi]'"
    named = set(re.findall(r"\[(\w+)\]", block))
    assert named == extras == {"fastapi", "starlette", "litestar", "flask", "django", "otel"}


def run_block(marker: str, port: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The block run as a module of its own (Litestar reads its handlers' module)."""
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}")
    module = types.ModuleType("readme_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(example(marker), str(README), "exec"), module.__dict__)
    return module.__dict__


def test_the_limiter_example(own_server: Server, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    wait_for_window_with(own_server.client(), 86400)  # its daily limit is a fixed window
    ns = run_block("from redis_ratelimit_client import Limit, RateLimiter, by_user, denied_body, rate_limit_headers", own_server.port, monkeypatch)
    handle: Callable[..., Any] = ns["handle"]
    status, headers, body = handle(SCOPE, lambda: "ok")
    assert (status, body, headers["RateLimit-Policy"]) == (200, "ok", '"burst";q=10;w=10, "daily";q=1000;w=86400')
    assert headers["RateLimit"].startswith('"burst";r=9;t=')

    def fails() -> str:
        raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError):
        handle(SCOPE, fails)  # its units are given back
    admitted = 1
    for _ in range(30):  # the bucket's 10, and what refills while the test runs
        status, headers, body = handle(SCOPE, lambda: "ok")
        denied_at = time.monotonic()
        if status != 200:
            break
        admitted += 1
    assert status == 429 and headers["Retry-After"] == "1"
    assert body == {"error": "rate_limit_exceeded", "message": "Rate limit exceeded. Please try again later.", "retry_after_seconds": 1}
    assert 10 <= admitted < 30
    if time.monotonic() - denied_at < 0.5:  # no token has refilled yet
        assert ns["would_pass"](SCOPE) is False
    assert ns["would_pass"]({**SCOPE, "client": ("203.0.113.8", 5000)}) is True
    client = own_server.client()
    daily = "ratelimit:{ip:203.0.113.7}:daily"
    assert sorted(client.keys()) == ["ratelimit:{ip:203.0.113.7}:burst", daily]
    # The daily window counted the admitted requests, not the refused or the refunded one.
    assert peek_remaining(client, mode, "RL.PEEK", daily, "FIXEDWINDOW", "1000", "86400", "*", "0") == 1000 - admitted

    own_server.stop()  # Redis down: the example fails open; the client just denied stays denied, in process
    try:
        other = {**SCOPE, "client": ("203.0.113.9", 5000)}
        assert handle(other, lambda: "ok") == (200, {}, "ok")
        assert ns["would_pass"](other) is False
        if time.monotonic() - denied_at < 0.5:
            assert handle(SCOPE, lambda: "ok")[0] == 429
    finally:
        own_server.start()


def test_the_reserve_then_give_back_example(own_server: Server, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run_block("llm = AsyncRateLimiter(", own_server.port, monkeypatch)

    async def model(prompt: str) -> tuple[str, int]:
        return f"echo {prompt}", 1500

    async def twice() -> list[Any]:
        started = time.monotonic()
        answers = [await ns["complete"](SCOPE, "hi", model)]
        remaining = peek_remaining(own_server.client(), mode, "RL.PEEK", "ratelimit:{ip:203.0.113.7}:tokens", "TOKENBUCKET", "100000", "1000", "*", "0")
        # 4000 reserved, 2500 given back: 1500 taken (plus the refill of 1000 a second, capped at the capacity)
        assert 98_500 <= remaining <= min(100_000, 98_500 + int((time.monotonic() - started + 0.01) * 1000))
        own_server.stop()
        try:
            answers.append(await ns["complete"](SCOPE, "down", model))  # Redis down: failing open, nothing to give back
        finally:
            own_server.start()
        await close_redis_connections()  # the example's client, as the app's shutdown closes it
        return answers

    assert asyncio.run(twice()) == ["echo hi", "echo down"]


def test_the_concurrency_example(own_server: Server, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run_block("exports = AsyncRateLimiter(", own_server.port, monkeypatch)
    client = own_server.client()

    def free() -> int:
        return peek_remaining(client, mode, "RL.PEEK", "ratelimit:{tenant:acme}:exports", "CONCURRENCY", "3", "60", "*", "0")

    async def exports() -> list[Any]:
        done = asyncio.Event()

        async def slow_export() -> str:
            await done.wait()
            return "exported"

        async def failing_export() -> str:
            raise RuntimeError("the export failed")

        running = [asyncio.ensure_future(ns["export"]("acme", slow_export)) for _ in range(3)]
        while free() > 0:
            await asyncio.sleep(0.01)
        fourth = await ns["export"]("acme", slow_export)  # all 3 slots held: refused at once
        other = await ns["export"]("globex", lambda: asyncio.sleep(0, "other tenant"))
        done.set()
        finished = await asyncio.gather(*running)
        after = free()
        with pytest.raises(RuntimeError):
            await ns["export"]("acme", failing_export)
        await close_redis_connections()  # the example's client, as the app's shutdown closes it
        return [fourth, other, finished, after, free()]

    assert asyncio.run(exports()) == [None, "other tenant", ["exported"] * 3, 3, 3]


def test_the_litestar_example(server: Server, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run_block("from litestar import Litestar, get", server.port, monkeypatch)
    with serve_asgi(ns["app"]) as port:
        for remaining in (99, 98):
            status, headers, body = get(port, "/search", "203.0.113.1")
            assert (status, body) == (200, {"ok": True})
            assert headers["ratelimit-policy"] == '"default";q=100;w=60'
            assert headers["ratelimit"].startswith(f'"default";r={remaining};t=')  # t: the sliding window's reset
    assert r.keys() == ["ratelimit:{ip:203.0.113.1}:slidingwindow:100:60"]  # uvicorn trusts X-Forwarded-For from 127.0.0.1


def test_the_flask_example(own_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = run_block("from flask import Flask", own_server.port, monkeypatch)
    with serve_wsgi(ns["app"]) as port:
        for remaining in range(4, -1, -1):
            status, headers, text = post(port, "/login")
            assert (status, text, headers["ratelimit-policy"]) == (200, "welcome", '"burst";q=20;w=10, "login";q=5;w=60')
            assert f'"login";r={remaining};t=' in headers["ratelimit"]
        status, headers, text = post(port, "/login")
        assert status == 429 and json.loads(text)["error"] == "rate_limit_exceeded"
        status, headers, body = get(port, "/health", "203.0.113.1")
        assert (status, body, rate_headers(headers)) == (200, "ok", {})
        own_server.stop()
        try:  # Redis down: the client just denied for a minute stays denied, in process; the other view fails open
            status, headers, text = post(port, "/login")
            assert status == 429 and json.loads(text)["error"] == "rate_limit_exceeded"
            status, headers, body = get(port, "/health", "203.0.113.1")
            assert (status, body, rate_headers(headers)) == (200, "ok", {})
        finally:
            own_server.start()


DJANGO_RUN = """
import json, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "myproject.settings"
import django
django.setup()
from django.test import Client
client = Client()
out = [client.post("/login").status_code for _ in range(6)]
out.append(client.get("/health").status_code)
out.append(client.get("/health").has_header("RateLimit"))
print(json.dumps(out))
"""

DJANGO_SETTINGS = """
SECRET_KEY = "only-for-this-test"
ALLOWED_HOSTS = ["testserver"]
ROOT_URLCONF = "myproject.urls"
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions"]
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
"""

DJANGO_URLS = """
from django.urls import path
from myproject import views
urlpatterns = [path("login", views.login), path("health", views.health)]
"""


def test_the_django_example(own_server: Server) -> None:
    """The block's three files, with what a project has beside them
    (SECRET_KEY, INSTALLED_APPS, urls.py), run in a process of their own
    (Django's settings are once per process)."""
    files = re.split(r"^# (myproject/\w+\.py)\n", example("# myproject/limits.py"), flags=re.M)[1:]
    written = dict(zip(files[0::2], files[1::2]))
    assert sorted(written) == ["myproject/limits.py", "myproject/settings.py", "myproject/views.py"]
    written["myproject/settings.py"] += DJANGO_SETTINGS
    written["myproject/urls.py"] = DJANGO_URLS
    written["myproject/__init__.py"] = ""
    with tempfile.TemporaryDirectory() as folder:
        for name, text in written.items():
            (Path(folder) / name).parent.mkdir(exist_ok=True)
            (Path(folder) / name).write_text(text)
        env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{own_server.port}", "PYTHONPATH": f"{folder}:{PACKAGE / 'src'}"}

        def run() -> Any:
            done = subprocess.run([sys.executable, "-c", DJANGO_RUN], env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        assert run() == [200, 200, 200, 200, 200, 429, 200, False]
        own_server.stop()
        try:  # Redis down: failing open
            assert run() == [200, 200, 200, 200, 200, 200, 200, False]
        finally:
            own_server.start()


def test_the_django_middleware_list_pasted_whole_passes_djangos_check() -> None:
    """A project made by `django-admin startproject`, its MIDDLEWARE list
    replaced by the README's and the README's limits.py and RATE_LIMIT
    added: `manage.py check` finds no issue (the admin it installs needs
    the session, auth and messages middleware: admin.E408-E410)."""
    block = example("# myproject/limits.py")
    middleware = re.search(r"^MIDDLEWARE = \[.*?^\]\n", block, re.S | re.M)
    rate_limit = re.search(r"^RATE_LIMIT = .*\n", block, re.M)
    limits = re.search(r"# myproject/limits.py\n(.*?)\n# myproject/settings.py", block, re.S)
    assert middleware and rate_limit and limits
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PYTHONPATH": str(PACKAGE / "src")}
        subprocess.run([sys.executable, "-m", "django", "startproject", "myproject", folder], check=True, env=env)
        settings = Path(folder) / "myproject" / "settings.py"
        text, replaced = re.subn(r"^MIDDLEWARE = \[\n.*?^\]\n", lambda _: middleware.group(0), settings.read_text(), flags=re.S | re.M)
        assert replaced == 1
        settings.write_text(text + rate_limit.group(0))
        (Path(folder) / "myproject" / "limits.py").write_text(limits.group(1))
        done = subprocess.run([sys.executable, "manage.py", "check"], cwd=folder, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "System check identified no issues (0 silenced)."), done.stderr
