"""Checks per second in a tight loop, one caller at a time, against a
redis-server with the module that this script starts on a free port: the
limiter's check() beside the bare RL.TOKENBUCKET it sends (redis-py's
execute_command on the same client) and, when the `limits` package is
installed, its moving and fixed window strategies on the same server.

The machine is shared and noisy, so the figures are ratios to the bare
command within one run: the cases take turns in every round (interleaved),
and each case's median over the rounds is reported.

    python bench/loop.py [--rounds 41] [--seconds 0.1] [--profile async|sync]

`--profile` runs only the limiter's check() under cProfile instead."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "src"), str(HERE.parent / "tests")]

import redis  # noqa: E402
import redis.asyncio  # noqa: E402

from redis_ratelimit_client import AsyncRateLimiter, Limit, RateLimiter  # noqa: E402
from servers import Server  # noqa: E402

# Never denies within a run: a bucket of 10^12 refilled at 10^9 a second.
LIMIT = Limit("tokenbucket", 10**12, rate=10**9)
BARE = ["RL.TOKENBUCKET", "ratelimit:{bench}:tokenbucket:1000000000000:1000000000", "1000000000000", "1000000000", "*", "1"]
LIMITS_ITEM = "1000000000/second"


def key(request: Any) -> str:
    return "bench"


def sync_cases(port: int) -> dict[str, Callable[[], Any]]:
    client = redis.Redis(port=port)
    limiter = RateLimiter(client, LIMIT, key=key)
    cases: dict[str, Callable[[], Any]] = {
        "bare RL.TOKENBUCKET": lambda: client.execute_command(*BARE),
        "RateLimiter.check": lambda: limiter.check(None),
    }
    try:
        from limits import parse, storage, strategies
    except ImportError:
        return cases
    store = storage.storage_from_string(f"redis://127.0.0.1:{port}")
    item = parse(LIMITS_ITEM)
    moving = strategies.MovingWindowRateLimiter(store)
    fixed = strategies.FixedWindowRateLimiter(store)
    cases["limits MovingWindow"] = lambda: moving.hit(item, "bench-moving")
    cases["limits FixedWindow"] = lambda: fixed.hit(item, "bench-fixed")
    return cases


def async_cases(port: int) -> dict[str, Callable[[], Awaitable[Any]]]:
    client = redis.asyncio.Redis(port=port)
    limiter = AsyncRateLimiter(client, LIMIT, key=key)
    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "bare RL.TOKENBUCKET": lambda: client.execute_command(*BARE),
        "AsyncRateLimiter.check": lambda: limiter.check(None),
    }
    try:
        from limits import aio, parse
    except ImportError:
        return cases
    store = aio.storage.RedisStorage(f"async+redis://127.0.0.1:{port}", implementation="redispy")
    item = parse(LIMITS_ITEM)
    moving = aio.strategies.MovingWindowRateLimiter(store)
    fixed = aio.strategies.FixedWindowRateLimiter(store)
    cases["limits MovingWindow"] = lambda: moving.hit(item, "bench-moving-aio")
    cases["limits FixedWindow"] = lambda: fixed.hit(item, "bench-fixed-aio")
    return cases


#: One measurement: calls per second (wall clock), and this process's CPU
#: time per call in microseconds (what the client itself costs, less
#: disturbed by other processes than the wall clock).
Sample = tuple[float, float]


def run_sync(call: Callable[[], Any], seconds: float) -> Sample:
    calls, started, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(100):
            call()
        calls += 100
    return calls / elapsed, (time.process_time() - cpu) / calls * 1e6


async def run_async(call: Callable[[], Awaitable[Any]], seconds: float) -> Sample:
    calls, started, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(100):
            await call()
        calls += 100
    return calls / elapsed, (time.process_time() - cpu) / calls * 1e6


def report(title: str, samples: dict[str, list[Sample]]) -> None:
    def medians(name: str) -> tuple[float, float]:
        return statistics.median(s[0] for s in samples[name]), statistics.median(s[1] for s in samples[name])

    bare_rate, bare_cpu = medians("bare RL.TOKENBUCKET")
    print(f"\n{title} (medians of {len(samples['bare RL.TOKENBUCKET'])} interleaved rounds)")
    print(f"{'':24} {'checks/s':>9} {'x bare':>7} {'client CPU us/call':>19} {'x bare':>7}")
    for name in samples:
        rate, cpu = medians(name)
        print(f"{name:24} {rate:9.0f} {rate / bare_rate:7.2f} {cpu:19.1f} {cpu / bare_cpu:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--seconds", type=float, default=0.1, help="per case and round: short turns, so every case sees the same load")
    parser.add_argument("--profile", choices=("async", "sync"))
    args = parser.parse_args()
    server = Server()
    try:
        if args.profile:
            profile(args.profile, server.port, args.seconds * args.rounds)
            return
        sync = sync_cases(server.port)
        rates: dict[str, list[Sample]] = {name: [] for name in sync}
        for name, call in sync.items():  # warm up: connections, script loads
            run_sync(call, 0.1)
        for _ in range(args.rounds):
            for name, call in sync.items():
                rates[name].append(run_sync(call, args.seconds))
        report(f"sync, redis-py {redis.__version__}, Python {sys.version.split()[0]}", rates)

        async def run_all() -> dict[str, list[Sample]]:
            cases = async_cases(server.port)
            out: dict[str, list[Sample]] = {name: [] for name in cases}
            for name, call in cases.items():
                await run_async(call, 0.1)
            for _ in range(args.rounds):
                for name, call in cases.items():
                    out[name].append(await run_async(call, args.seconds))
            return out

        report(f"asyncio, redis-py {redis.__version__}, Python {sys.version.split()[0]}", asyncio.run(run_all()))
    finally:
        server.remove()


def profile(kind: str, port: int, seconds: float) -> None:
    profiler = cProfile.Profile(time.process_time)  # CPU time: what the client costs, not the wait
    if kind == "sync":
        check = sync_cases(port)["RateLimiter.check"]
        run_sync(check, 0.1)
        profiler.runcall(run_sync, check, seconds)
    else:

        async def go() -> None:
            check = async_cases(port)["AsyncRateLimiter.check"]
            await run_async(check, 0.1)
            profiler.enable()
            await run_async(check, seconds)
            profiler.disable()

        asyncio.run(go())
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
