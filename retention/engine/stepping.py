"""Stepping a run: when it stops, how long a page's lease lasts, how long to wait.

Both executors (inline and queued) walk a run page by page and ask one
``Stepper`` before each page. The stop rules, the lease arithmetic and the
heartbeat are written here once:

- a run stops claiming when its lease was lost (taken over, or the run was
  marked abandoned), when the kill switch is engaged, when its time budget or
  deadline (a queued run's ``--max-seconds``, a scheduled run's next slot) is
  reached, or when it claimed its ``--limit``;
- a page's lease covers the rate gate's pacing of the page (and, queued, of
  every batch in flight before it);
- retries due within ``RETENTION_RETRY_WAIT_IN_RUN_SECONDS`` (and within the
  budget) are waited for; later ones are left to the next run.

The wall clock (``clock``) and the monotonic timer are injected, so budgets,
deadlines and heartbeats are tested by moving a fake clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from retention.conf import settings
from retention.engine.leases import run_leases_renew
from retention.models import Run, RunStatus
from retention.selectors.control import kill_switch_paused
from retention.selectors.run_rules import ClassRules

Clock = Callable[[], datetime]
Monotonic = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Stop:
    """Why a run stops claiming, and the status it closes with."""

    status: str
    reason: str


@dataclass
class Stepper:
    run: Run
    clock: Clock
    monotonic: Monotonic = time.monotonic
    # This process's own budget (the inline command's --max-seconds).
    max_seconds: float | None = None
    # Pages of the run that may wait at the rate gate at once.
    pages_in_flight: int = 1
    started: float = field(init=False)
    last_heartbeat: float | None = field(default=None, init=False)
    lost: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.started = self.monotonic()

    @property
    def heartbeat_every(self) -> float:
        """Well inside the lease, so a busy moment never lets it lapse."""
        return settings.RUN_LEASE_SECONDS / 10

    def elapsed(self) -> float:
        return self.monotonic() - self.started

    def heartbeat(self, now: datetime, *, extra_seconds: float = 0.0) -> str | None:
        """Renew the leases when due, or at once for a paced page (``extra_seconds``).

        Returns what was lost, and remembers it: a run that lost its lease
        never renews again.
        """
        if self.lost is not None:
            return self.lost
        due = (
            self.last_heartbeat is None
            or self.monotonic() - self.last_heartbeat >= self.heartbeat_every
        )
        if not due and not extra_seconds:
            return None
        self.lost = run_leases_renew(self.run, now, extra_seconds=extra_seconds)
        self.last_heartbeat = self.monotonic()
        return self.lost

    def stop(self, now: datetime) -> Stop | None:
        """Why the run must not claim another page now, or None."""
        run = self.run
        if self.lost is not None:
            # Closed as abandoned only if nobody closed it yet (``run_finish``).
            return Stop(RunStatus.ABANDONED, self.lost)
        if kill_switch_paused():
            return Stop(RunStatus.PAUSED, "kill switch engaged")
        if self.max_seconds is not None and self.elapsed() >= self.max_seconds:
            return Stop(RunStatus.STOPPED, f"time budget of {self.max_seconds:g}s reached")
        if run.deadline_at is not None and now >= run.deadline_at:
            if run.schedule_slot is not None:
                return Stop(RunStatus.STOPPED, "the next schedule slot began")
            budget = (run.deadline_at - run.started_at).total_seconds()
            return Stop(RunStatus.STOPPED, f"time budget of {budget:g}s reached")
        if run.limit is not None and run.claimed >= run.limit:
            return Stop(RunStatus.STOPPED, f"limit of {run.limit} records reached")
        return None

    def page_size(self, rules: ClassRules) -> int:
        """The class's batch size, or what is left of the run's limit."""
        if self.run.limit is None:
            return rules.batch_size
        return max(min(rules.batch_size, self.run.limit - self.run.claimed), 0)

    def pacing_seconds(self, size: int, rules: ClassRules) -> float:
        """How long the rate gate may hold a page of ``size`` (behind those in flight)."""
        if not rules.rate_limit:
            return 0.0
        return size / rules.rate_limit * self.pages_in_flight

    def page_lease_seconds(self, size: int, rules: ClassRules) -> float:
        return settings.LEASE_SECONDS + self.pacing_seconds(size, rules)

    def retry_wait(self, due: datetime | None, now: datetime) -> float | None:
        """Seconds to wait for the next retry due, or None: finish, leave it to the next run."""
        if due is None:
            return None
        wait = (due - now).total_seconds()
        budget_left = (
            self.max_seconds - self.elapsed() if self.max_seconds is not None else math.inf
        )
        if wait > min(settings.RETRY_WAIT_IN_RUN_SECONDS, budget_left):
            return None
        if self.run.deadline_at is not None and due >= self.run.deadline_at:
            return None
        return max(wait, 0.0) + 0.01
