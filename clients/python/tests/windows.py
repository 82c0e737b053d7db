"""Fixed windows are aligned to the Unix epoch, so a test that counts a
fixed window's units with the server's clock must not straddle an edge:
it starts only when enough of the current window is left."""

from __future__ import annotations

import time

import redis


def wait_for_window_with(r: redis.Redis, window_s: int, needed_s: float = 20) -> None:
    """Returns once the server's current `window_s` window has at least
    `needed_s` seconds left (at most `needed_s` of waiting)."""
    seconds, micros = r.time()
    left = window_s - (seconds % window_s + micros / 1e6)
    if left < needed_s:
        time.sleep(left + 0.01)
