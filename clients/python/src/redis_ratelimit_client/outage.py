"""When Redis cannot answer: after a failure, requests are answered by
the limiter's policy (on_unavailable) without touching Redis, and one
probe at a time tries Redis again, at most about once a second, in the
background; limiting resumes when a probe gets an answer."""

from __future__ import annotations

import threading
import time
from typing import Callable, Literal

OnUnavailable = Literal["open", "closed", "local"]
POLICIES = ("open", "closed", "local")

#: Seconds between probes while Redis is down.
PROBE_EVERY = 1.0


class Outage:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.down = False
        self.probing = False
        self.next_probe = 0.0
        self.error = ""  # the failure that began the outage
        self.lock = threading.Lock()

    def failed(self, error: str) -> bool:
        """Redis failed a call; True when this starts an outage."""
        with self.lock:
            started = not self.down
            if started:
                self.error = error
            self.down = True
            self.next_probe = self.clock() + PROBE_EVERY
            return started

    def probe_due(self) -> bool:
        """True (once) when a probe should run now; it then runs alone."""
        with self.lock:
            if not self.down or self.probing or self.clock() < self.next_probe:
                return False
            self.probing = True
            return True

    def probed(self, answered: bool) -> None:
        with self.lock:
            self.probing = False
            if answered:
                self.down = False
            else:
                self.next_probe = self.clock() + PROBE_EVERY
