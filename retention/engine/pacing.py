"""Pacing of a run's deletes: a data class's rate, joined with each storage's.

A policy version's ``rate_limit`` paces its data class (the gate
``class:<data_class>``); ``RETENTION_STORAGE_RATE_LIMITS`` paces everything
deleted from a storage alias (``storage:<alias>``), whatever its class. The
disposer asks the class's gate ``for_storage(alias)`` before each store, so a
slice of deletes under both limits waits for both. The gates themselves are
rows shared by every process (``retention.services.rate_gates``): the hold
mirror's legal-hold requests book the storage's gate there too.
"""

from __future__ import annotations

import math
from typing import Protocol

from retention.services.rate_gates import Limit, SharedRateGate, storage_gate

CLASS_PREFIX = "class:"


class RateGate(Protocol):
    @property
    def slice_size(self) -> int | None:
        """How many deletes to acquire and send at a time; None: no limit."""

    def acquire(self, n: int) -> None:
        """Block until ``n`` deletes may start. Call it outside any transaction."""

    def throttled(self) -> None:
        """The store answered "slow down": reduce the rate."""

    def for_storage(self, alias: str) -> RateGate:
        """This gate combined with the storage's own limit, if it has one."""


class UnlimitedGate:
    """No class rate: only a storage's own limit, if any, paces deletes."""

    slice_size: int | None = None

    def acquire(self, n: int) -> None:
        return None

    def throttled(self) -> None:
        return None

    def for_storage(self, alias: str) -> RateGate:
        return storage_gate(alias) or self


def gate_for(*, data_class: str, rate_limit: float | None = None) -> RateGate:
    """The rate gate for one data class's deletes.

    ``rate_limit`` is the policy version's deletes per second (None: no class
    limit). The disposer adds each storage's ``RETENTION_STORAGE_RATE_LIMITS``
    entry through ``for_storage()``. Building a gate touches no database.
    """
    if not rate_limit or math.isinf(rate_limit):
        return UnlimitedGate()
    return SharedRateGate([Limit(f"{CLASS_PREFIX}{data_class}", float(rate_limit))])
