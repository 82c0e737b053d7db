"""deadlines.py: an asyncio limiter's calls under one timer. A call past
its time raises TimeoutError; one that answers in time gives its result;
a cancellation from elsewhere stays a cancellation; the timer moves on to
the next call still pending, also after the loop changes."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from redis_ratelimit_client.deadlines import Deadlines

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 uses asyncio.wait_for, not Deadlines' timer")


async def answer(after: float, value: str) -> str:
    await asyncio.sleep(after)
    return value


async def outcome(deadlines: Deadlines, after: float, value: str) -> tuple[str, float]:
    started = time.monotonic()
    try:
        return await deadlines.within(answer(after, value)), time.monotonic() - started
    except TimeoutError:
        return "timeout", time.monotonic() - started


def test_calls_in_time_answer_late_ones_time_out_each_at_its_own_deadline() -> None:
    async def run() -> list[tuple[str, float]]:
        deadlines = Deadlines(0.2)
        calls = []
        for after, value in ((5, "a"), (0.05, "b"), (5, "c"), (0.1, "d")):
            calls.append(asyncio.create_task(outcome(deadlines, after, value)))
            await asyncio.sleep(0.05)  # each call starts 50 ms after the one before
        results = await asyncio.gather(*calls)
        # A call in time leaves the queue at once: it holds the calls in flight only.
        assert await deadlines.within(answer(0, "now")) == "now" and not deadlines.queue
        # A call after the others have settled gets a timer of its own again.
        results.append(await outcome(deadlines, 5, "e"))
        assert not deadlines.queue
        return results

    results = asyncio.run(run())
    assert [value for value, _ in results] == ["timeout", "b", "timeout", "d", "timeout"]
    for (value, took), least in zip(results, (0.2, 0.05, 0.2, 0.1, 0.2)):
        assert least <= took < least + 0.15, (value, took)


def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    async def run() -> list[str]:
        deadlines = Deadlines(0.2)
        task = asyncio.create_task(deadlines.within(answer(5, "late")))
        await asyncio.sleep(0.05)
        task.cancel()
        cancelled = (await asyncio.gather(task, return_exceptions=True))[0]
        # The timer due at 0.2 s for the cancelled call cancels nothing:
        # this call (deadline 0.25 s) answers at 0.23 s.
        after = await outcome(deadlines, 0.18, "answered")
        return [type(cancelled).__name__, after[0]]

    assert asyncio.run(run()) == ["CancelledError", "answered"]


def test_a_task_cancelled_while_its_call_times_out_is_cancelled() -> None:
    async def run() -> str:
        deadlines = Deadlines(0.1)
        task = asyncio.create_task(deadlines.within(answer(5, "late")))
        await asyncio.sleep(0.05)
        while deadlines.queue:  # until the loop turn in which the deadline cancels the call
            await asyncio.sleep(0)
        task.cancel()  # before the call has run on: both cancellations reach it at once
        return type((await asyncio.gather(task, return_exceptions=True))[0]).__name__

    assert asyncio.run(run()) == "CancelledError"


def test_one_deadlines_serves_one_loop_after_another() -> None:
    deadlines = Deadlines(0.1)
    assert asyncio.run(outcome(deadlines, 5, "first loop"))[0] == "timeout"
    assert asyncio.run(outcome(deadlines, 0.01, "second loop"))[0] == "second loop"
    assert asyncio.run(outcome(deadlines, 5, "third loop"))[0] == "timeout"
