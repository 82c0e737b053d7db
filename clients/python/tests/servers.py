"""Real redis-server processes, with the module loaded or without it
(script mode), each on a free port in a folder of its own, stopped and
removed afterwards."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import redis

ROOT = Path(__file__).resolve().parents[3]
MODULE = os.environ.get("RATELIMIT_MODULE", str(ROOT / "target/release/libredis_ratelimit.so"))
LUA = ROOT / "lua/ratelimit.lua"
REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port() -> int:
    """A free port below 55536 whose cluster bus port (+10000) is free too."""
    while True:
        port = random.randrange(20000, 55000)
        if _bindable(port) and _bindable(port + 10000):
            return port


def wait_until(what: str, done: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


class Server:
    """One redis-server, with the module unless `module=False`; `stop()` and
    `start()` again on the same port (for the Redis-is-down tests), with or
    without the module (set `module` between the two)."""

    def __init__(self, *extra: str, module: bool = True) -> None:
        if not Path(MODULE).exists():
            raise RuntimeError(f"{MODULE} is missing: run `cargo build --release` at the repository root")
        self.port = free_port()
        self.folder = tempfile.mkdtemp(prefix="ratelimit-py-")
        self.extra = extra
        self.module = module
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.folder, *(["--loadmodule", MODULE] if self.module else []), *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_until(f"redis-server on {self.port}", self.answers)

    def answers(self) -> bool:
        try:
            with redis.Redis(port=self.port, socket_timeout=1) as r:
                return bool(r.ping())
        except redis.ConnectionError:
            return False

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class Cluster:
    """Three primaries, slots spread by `redis-cli --cluster create`, as
    tests/cluster.rs and scripts/cluster.sh make them."""

    def __init__(self, module: bool = True) -> None:
        args = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "3000")
        self.nodes = [Server(*args, module=module) for _ in range(3)]
        subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL,
        )
        for node in self.nodes:
            with node.client() as r:
                wait_until("cluster_state:ok", lambda: r.cluster("info")["cluster_state"] == "ok")

    @property
    def ports(self) -> list[int]:
        return [n.port for n in self.nodes]

    def remove(self) -> None:
        for node in self.nodes:
            node.remove()

