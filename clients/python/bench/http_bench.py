"""`make bench-http` (Python part): the FastAPI apps of bench/http_apps.py
(no limiter, ours in module mode, ours in script mode through FCALL,
slowapi), each under its own uvicorn process on one redis-server with the
module, loaded over keep-alive HTTP/1.1 by this process. The cases take
turns in every round (interleaved, each round in another order); each
case's median over the rounds is reported: requests/s; the uvicorn
process's own CPU time per request (from /proc), which other jobs on a
shared machine disturb far less than the wall clock; the Redis server's
CPU time per request (INFO CPU: used_cpu_sys + used_cpu_user, getrusage in
µs, where /proc counts 10 ms ticks) and the commands it ran (INFO
commandstats); and the latency of every request of all rounds, its median
and 99th percentile (the time from sending a request to reading its whole
answer). Ratios are to ours (module). Both paths: admitted (a limit never
reached) and denied (a limit reached by the first request).

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
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from servers import Server, free_port, wait_until  # noqa: E402

APPS = ("none", "ours", "ours-script", "slowapi")
PATHS = ("admitted", "denied")
NAMES = {"none": "no limiter", "ours": "ours (module)", "ours-script": "ours (script, FCALL)", "slowapi": "slowapi"}
#: The command each of ours must send on the admitted path, about once a request: the row's name says it.
SENDS = {"ours": "rl.tokenbucket", "ours-script": "fcall"}
TICK = os.sysconf("SC_CLK_TCK")
REQUEST = b"GET /x HTTP/1.1\r\nHost: bench\r\n\r\n"


@dataclass
class Run:
    rate: float  # requests/s
    app_us: float  # the uvicorn process's CPU µs a request
    redis_us: float  # the Redis server's CPU µs a request
    command_us: float  # of which inside the limiter's calls (INFO commandstats' usec)
    commands: dict[str, float]  # Redis commands a request, by name


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def redis_cpu_seconds(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def command_stats(client: redis.Redis) -> tuple[dict[str, int], int]:
    """Calls of each command since the last CONFIG RESETSTAT, but this process's own (INFO, CONFIG RESETSTAT);
    and the µs inside the calls the limiter sent: its scripts (EVALSHA, EVAL, FCALL) and the module's commands,
    which hold the time of the commands they run; a limiter without them, all its commands."""
    stats = {name.removeprefix("cmdstat_").lower(): fields for name, fields in client.info("commandstats").items()
             if name not in ("cmdstat_info", "cmdstat_config|resetstat")}
    sent = [name for name in stats if re.fullmatch(r"(evalsha|eval|fcall)(_ro)?|rl\..*", name)] or list(stats)
    return {name: int(fields["calls"]) for name, fields in stats.items()}, sum(int(stats[name]["usec"]) for name in sent)


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


def load(port: int, pid: int, client: redis.Redis, seconds: float, connections: int, latencies: list[float]) -> tuple[Run, dict[int, int]]:
    """One run: its figures, and the count of each status; each request's latency added to `latencies`."""
    statuses: dict[int, int] = {}

    async def run() -> None:
        until = time.monotonic() + seconds
        await asyncio.gather(*(_client(port, until, statuses, latencies) for _ in range(connections)))

    client.config_resetstat()
    cpu, redis_cpu, wall = cpu_seconds(pid), redis_cpu_seconds(client), time.monotonic()
    asyncio.run(run())
    wall, redis_cpu, cpu = time.monotonic() - wall, redis_cpu_seconds(client) - redis_cpu, cpu_seconds(pid) - cpu
    done = max(1, sum(statuses.values()))
    calls, usec = command_stats(client)
    commands = {name: n / done for name, n in calls.items()}
    return Run(done / wall, cpu / done * 1e6, redis_cpu / done * 1e6, usec / done, commands), statuses


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def commands_of(runs: list[Run]) -> str:
    """Redis commands a request, as `FCALL 1.00` (each command's median over the runs)."""
    names = sorted({name for run in runs for name in run.commands})
    counts = [(name.upper(), statistics.median(run.commands.get(name, 0.0) for run in runs)) for name in names]
    return ", ".join(f"{name} {n:.2f}" for name, n in counts if n >= 0.005) or "none"


def medians(runs: list[Run]) -> tuple[float, float, float, float]:
    """Requests/s, the app's and Redis's CPU µs a request, and Redis's µs in the limiter's calls: each one's median over the runs."""
    return (statistics.median(run.rate for run in runs), statistics.median(run.app_us for run in runs),
            statistics.median(run.redis_us for run in runs), statistics.median(run.command_us for run in runs))


def table(runs: dict[tuple[str, str], list[Run]], latencies: dict[tuple[str, str], list[float]], options: argparse.Namespace, redis_version: str) -> str:
    lines = [
        f"FastAPI {version('fastapi')}, uvicorn {version('uvicorn')}, redis-py {version('redis')}, slowapi {version('slowapi')}, "
        f"Python {platform.python_version()}, Redis {redis_version}; {options.connections} connections, medians of {options.rounds} interleaved rounds "
        f"of {options.seconds:g} s (`make bench-http`, {time.strftime('%Y-%m-%d')}).",
        "CPU is per request served: the uvicorn process's, and the Redis server's (INFO CPU); of the latter, the time inside the calls the "
        "limiter sent (INFO commandstats' usec of its EVALSHA, FCALL or RL.* calls, which hold the commands they run), the rest being Redis "
        "reading requests and writing replies. Latency: every request of all rounds, sent to "
        "answered in full. Ratios are this row / ours (module): requests/s above 1, CPU below 1 favour this row. `denied`: every request after "
        "the first is refused (slowapi asks Redis each time, ours answers from its denial cache, so Redis CPU is its idle cost there and has no ratio).",
        "",
        "| path | variant | requests/s | app CPU µs/request | Redis CPU µs/request | of which in the limiter's calls | Redis commands/request, inside scripts too | p50 / p99 ms "
        "| requests/s ÷ ours | app CPU ÷ ours | Redis CPU ÷ ours |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for path in PATHS:
        ours_rate, ours_app, ours_redis, _ = medians(runs["ours", path])
        # Where ours (module) asks Redis nothing (denied: its denial cache), a Redis CPU ratio would divide by Redis's idle cost.
        ours_asks = commands_of(runs["ours", path]) != "none"
        for app in APPS:
            rate, app_us, redis_us, command_us = medians(runs[app, path])
            p50, p99 = (percentile(latencies[app, path], p) * 1000 for p in (50, 99))
            redis_ratio = f"{redis_us / ours_redis:.2f}" if ours_asks else "-"
            lines.append(f"| {path} | {NAMES[app]} | {rate:.0f} | {app_us:.0f} | {redis_us:.1f} | {command_us:.1f} | {commands_of(runs[app, path])} | {p50:.1f} / {p99:.1f} "
                         f"| {rate / ours_rate:.2f} | {app_us / ours_app:.2f} | {redis_ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--readme", type=Path)
    options = parser.parse_args()
    redis_server = Server()
    client = redis.Redis(port=redis_server.port, decode_responses=True)
    servers: dict[tuple[str, str], tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for app in APPS:
            for path in PATHS:
                servers[app, path] = serve(app, path, redis_server.port)
        runs: dict[tuple[str, str], list[Run]] = {case: [] for case in servers}
        latencies: dict[tuple[str, str], list[float]] = {case: [] for case in servers}
        for (app, path), (process, port) in servers.items():  # warm up; the denied paths deny from here on
            load(port, process.pid, client, 0.3, options.connections, [])
        cases = list(servers)
        for number in range(options.rounds):
            # Each round in another order, so no case always runs first or last.
            for app, path in cases[number % len(cases):] + cases[:number % len(cases)]:
                process, port = servers[app, path]
                run, statuses = load(port, process.pid, client, options.seconds, options.connections, latencies[app, path])
                expected = 200 if path == "admitted" or app == "none" else 429
                if set(statuses) != {expected}:
                    raise SystemExit(f"{app} {path}: answers {statuses}, expected only {expected}")
                if path == "admitted" and app in SENDS and run.commands.get(SENDS[app], 0) < 0.99:
                    raise SystemExit(f"{app} {path}: expected {SENDS[app]} for each request, Redis ran {run.commands}")
                runs[app, path].append(run)
                print(f"round {number + 1} {path} {app}: {run.rate:.0f} req/s, CPU/request app {run.app_us:.1f} us, Redis {run.redis_us:.2f} us (in the limiter's calls {run.command_us:.2f}); "
                      f"Redis commands/request: {commands_of([run])}", flush=True)
        redis_version = str(client.info("server")["redis_version"])
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(10)
        client.close()
        redis_server.remove()
    text = table(runs, latencies, options, redis_version)
    print(text)
    if options.readme:
        readme = options.readme.read_text()
        start, end = "<!-- bench-http-python -->\n", "<!-- /bench-http-python -->"
        before, rest = readme.split(start)
        after = rest.split(end)[1]
        options.readme.write_text(f"{before}{start}{text}\n{end}{after}")


if __name__ == "__main__":
    main()
