"""A real redis-server with the module loaded, on a free port."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[3]
MODULE = os.environ.get("RATELIMIT_MODULE", str(ROOT / "target/release/libredis_ratelimit.so"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def client():
    port, folder = free_port(), tempfile.mkdtemp(prefix="ratelimit-py-")
    server = subprocess.Popen(
        [os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", folder, "--loadmodule", MODULE],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    connection = redis.Redis(port=port, decode_responses=True)
    try:
        for _ in range(200):
            try:
                connection.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.025)
        else:
            raise RuntimeError(f"redis-server with {MODULE} did not start")
        yield connection
    finally:
        connection.close()
        server.kill()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)
