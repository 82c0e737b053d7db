"""`make bench-http` (Python part): the FastAPI apps of bench/http_apps.py
(no limiter, ours, slowapi), each under its own uvicorn process on one
redis-server with the module, loaded over keep-alive HTTP/1.1 by this
process. The cases take turns in every round (interleaved); each case's
median over the rounds is reported, as ratios: requests/s, and the uvicorn
process's own CPU time per request (from /proc), which other jobs on a
shared machine disturb far less than the wall clock; and the latency of
every request of all rounds, its median and 99th percentile (the time
from sending a request to reading its whole answer). Both paths: admitted
(a limit never reached) and denied (a limit reached by the first request).

    python bench/http_bench.py [--rounds 9] [--seconds 2] [--connections 8] [--readme README.md]"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from servers import Server, free_port, wait_until  # noqa: E402

APPS = ("none", "ours", "slowapi")
PATHS = ("admitted", "denied")
NAMES = {"none": "no limiter", "ours": "redis-ratelimit-client", "slowapi": "slowapi"}
TICK = os.sysconf("SC_CLK_TCK")
REQUEST = b"GET /x HTTP/1.1\r\nHost: bench\r\n\r\n"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def serve(app: str, path: str, redis_port: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "BENCH_APP": app, "BENCH_PATH": path, "REDIS_URL": f"redis://127.0.0.1:{redis_port}",
           "PYTHONPATH": f"{HERE.parent / 'src'}:{HERE}"}
    process = subprocess.Popen([sys.executable, "-m", "uvicorn", "http_apps:app", "--port", str(port), "--log-level", "warning", "--no-access-log"],
                               env=env, cwd=HERE)
    wait_until(f"{app} {path} on {port}", lambda: _answers(port), 30)
    return process, port


def _answers(port: int) -> bool:
    import http.client
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/x")
        connection.getresponse().read()
        return True
    except OSError:
        return False


async def _client(port: int, until: float, statuses: dict[int, int], latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while (sent := time.monotonic()) < until:
            writer.write(REQUEST)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
            await reader.readexactly(length)
            latencies.append(time.monotonic() - sent)
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()


def load(port: int, pid: int, seconds: float, connections: int, latencies: list[float]) -> tuple[float, float, dict[int, int]]:
    """Requests/s and the server's CPU microseconds per request; each
    request's latency added to `latencies`."""
    statuses: dict[int, int] = {}

    async def run() -> None:
        until = time.monotonic() + seconds
        await asyncio.gather(*(_client(port, until, statuses, latencies) for _ in range(connections)))

    cpu, wall = cpu_seconds(pid), time.monotonic()
    asyncio.run(run())
    cpu, wall = cpu_seconds(pid) - cpu, time.monotonic() - wall
    done = sum(statuses.values())
    return done / wall, cpu / done * 1e6, statuses


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--readme", type=Path)
    options = parser.parse_args()
    redis_server = Server()
    servers: dict[tuple[str, str], tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for app in APPS:
            for path in PATHS:
                servers[app, path] = serve(app, path, redis_server.port)
        rates: dict[tuple[str, str], list[float]] = {case: [] for case in servers}
        cpus: dict[tuple[str, str], list[float]] = {case: [] for case in servers}
        latencies: dict[tuple[str, str], list[float]] = {case: [] for case in servers}
        for (app, path), (process, port) in servers.items():  # warm up; the denied paths deny from here on
            load(port, process.pid, 0.3, options.connections, [])
        for _ in range(options.rounds):
            for (app, path), (process, port) in servers.items():
                rate, cpu, statuses = load(port, process.pid, options.seconds, options.connections, latencies[app, path])
                expected = 200 if path == "admitted" or app == "none" else 429
                if set(statuses) != {expected}:
                    raise SystemExit(f"{app} {path}: answers {statuses}, expected only {expected}")
                rates[app, path].append(rate)
                cpus[app, path].append(cpu)
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(10)
        redis_server.remove()
    import fastapi, redis, slowapi, uvicorn  # noqa: E401
    lines = [f"FastAPI {fastapi.__version__}, uvicorn {uvicorn.__version__}, redis-py {redis.__version__}, slowapi {getattr(slowapi, '__version__', '0.1.10')}, "
             f"Python {platform.python_version()}; medians of {options.rounds} interleaved rounds of {options.seconds:g} s, {options.connections} connections"]
    for path in PATHS:
        lines += ["", f"{path} path                 requests/s  x none  p50 ms  p99 ms  app CPU us/req  x none"]
        base_rate, base_cpu = statistics.median(rates["none", path]), statistics.median(cpus["none", path])
        for app in APPS:
            rate, cpu = statistics.median(rates[app, path]), statistics.median(cpus[app, path])
            p50, p99 = (percentile(latencies[app, path], p) * 1000 for p in (50, 99))
            lines.append(f"{NAMES[app]:<26}{rate:>11.0f}{rate / base_rate:>8.2f}{p50:>8.1f}{p99:>8.1f}{cpu:>15.0f}{cpu / base_cpu:>8.2f}")
    table = "\n".join(lines)
    print(table)
    if options.readme:
        text = options.readme.read_text()
        start, end = "<!-- bench-http-python -->\n", "<!-- /bench-http-python -->"
        before, rest = text.split(start)
        after = rest.split(end)[1]
        options.readme.write_text(f"{before}{start}```\n{table}\n```\n{end}{after}")


if __name__ == "__main__":
    main()
