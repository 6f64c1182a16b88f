"""Pacing of deletes.

This in-process token bucket honours a policy version's ``rate_limit`` on the
inline path. It is not shared between processes; the shared gate for many
workers on many hosts is built with the queue path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class RateGate(Protocol):
    def acquire(self, n: int) -> None:
        """Block until ``n`` deletes may start."""


class UnlimitedGate:
    def acquire(self, n: int) -> None:
        return None


class LocalRateGate:
    """Token bucket; a burst never exceeds one second's worth of tokens."""

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.capacity
        self._last = clock()

    def acquire(self, n: int) -> None:
        remaining = float(n)
        while remaining > 0:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            take = min(remaining, self._tokens)
            if take >= 1 or (take > 0 and take == remaining):
                self._tokens -= take
                remaining -= take
                continue
            self._sleep((min(remaining, self.capacity) - self._tokens) / self.rate)


def gate_for(rate_limit: float | None) -> RateGate:
    return LocalRateGate(rate_limit) if rate_limit else UnlimitedGate()
