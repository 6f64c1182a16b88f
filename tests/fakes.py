"""Stand-ins the tests drive by hand, in one place rather than one copy per test file.

Clocks that move only when told to, a foreground guard that is always quiet
(or always busy), a worker that dies right after its delete, and a task
queue that is a list: the test decides when, whether and how often a
published batch is delivered. The real django-q2 cluster is in tests/queue/.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from retention import engine
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.engine.guard import GuardReading
from retention.models import Run, RunMode, RunTrigger
from retention.storage import KeyResult


class FakeClock:
    """Seconds (as ``time.monotonic`` or ``time.time`` give them) that move only when told to."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.t = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@dataclass
class FakeTime:
    """A wall clock and a monotonic timer that move together, only when told to or slept.

    Call it (or ``clock``) for the wall clock; ``monotonic`` is the timer.
    """

    now: datetime
    monotonic: FakeClock = field(default_factory=FakeClock)

    def __call__(self) -> datetime:
        return self.now

    def clock(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.monotonic.advance(seconds)

    def sleep(self, seconds: float) -> None:
        # Never zero: a loop that polls with sleep(0) would otherwise never see time pass.
        self.advance(max(seconds, 0.001))


def under_budget(*, now: datetime) -> GuardReading:
    return GuardReading(over_budget=False, value=0.0, budget=30.0, detail="shipments: 0s")


def over_budget(*, now: datetime) -> GuardReading:
    return GuardReading(over_budget=True, value=95.0, budget=30.0, detail="shipments: 95s")


class DiesAfterDelete(ObjectDisposer):
    """Deletes the page's objects (the first ``reached`` of them), then the worker 'dies'.

    ``death`` is what it dies of: ``SystemExit`` for a killed process (nothing
    catches it), ``ConnectionError`` for a worker whose connection went.
    """

    def __init__(
        self, death: type[BaseException] = SystemExit, *, reached: int | None = None
    ) -> None:
        super().__init__()
        self.death, self.reached = death, reached

    def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
        super().dispose(list(items)[: self.reached], **kwargs)
        raise self.death("killed after the delete, before the finalize")


@dataclass
class Queue:
    """Published tasks, in a list; ``deliver`` decides what a worker does with a batch.

    With no ``deliver``, batches are published and wait for the test
    (``queue.run_batch(queue.batches[0])``); ``queue.deliver = queue.run_batch``
    runs each at once, in-process, as a worker would.
    """

    clock: FakeTime
    deliver: Callable[[dict[str, Any]], None] | None = None
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    guard: Callable[..., GuardReading] = under_budget

    def __call__(self, func: str, payload: dict[str, Any], name: str) -> None:
        self.published.append((func, payload))
        if func == engine.BATCH_TASK and self.deliver is not None:
            self.deliver(payload)

    def run_batch(self, payload: dict[str, Any], **kwargs: Any) -> None:
        engine.batch_dispose(
            payload=payload, clock=self.clock, publish=self, guard=self.guard, **kwargs
        )

    def watchdog(self) -> list[Run]:
        """The watchdog schedule firing now."""
        return engine.runs_resume_stalled(now=self.clock.now, publish=self)

    @property
    def batches(self) -> list[dict[str, Any]]:
        return [payload for func, payload in self.published if func == engine.BATCH_TASK]


def enqueue(now: datetime, queue: Queue, **kwargs: Any) -> Run:
    """An enforcing run queued at ``now``, its dispatcher published to ``queue``."""
    return engine.run_enqueue(
        mode=RunMode.ENFORCE, trigger=RunTrigger.COMMAND, now=now, publish=queue, **kwargs
    )


def dispatch(
    run: Run, queue: Queue, guard: Callable[..., GuardReading] = under_budget, **kwargs: Any
) -> str:
    """The dispatcher task for ``run``; its batches see the same ``guard``."""
    queue.guard = guard
    return engine.run_arm(
        run_id=run.pk,
        clock=queue.clock,
        sleep=queue.clock.sleep,
        publish=queue,
        guard=guard,
        **kwargs,
    )


def enqueued(
    now: datetime, deliver: Callable[[Queue, dict[str, Any]], None] | None = None
) -> tuple[Run, Queue]:
    """An enforcing run queued at ``now``, not dispatched yet; every batch delivered at once.

    ``deliver(queue, payload)`` replaces the plain delivery (``queue.run_batch``)
    when a test wants a batch delivered twice, or after a crash.
    """
    queue = Queue(FakeTime(now))
    if deliver is None:
        queue.deliver = queue.run_batch
    else:
        queue.deliver = lambda payload: deliver(queue, payload)
    return enqueue(now, queue), queue


def queued(
    now: datetime, deliver: Callable[[Queue, dict[str, Any]], None] | None = None
) -> tuple[Run, Queue]:
    """As ``enqueued``, and dispatched: the run as its dispatcher left it."""
    run, queue = enqueued(now, deliver)
    dispatch(run, queue)
    run.refresh_from_db()
    return run, queue
