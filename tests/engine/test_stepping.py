"""One stepping for both executors: lost leases, budgets, deadlines (issue 13).

The wall clock and the monotonic timer are fakes the test moves, so budgets
and heartbeats are crossed by moving time, not by a budget of zero.
"""

from __future__ import annotations

import pydoc
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import engine
from retention.conf import settings as retention_settings
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.engine.pacing import RateGate
from retention.engine.stepping import Stepper
from retention.models import (
    DeletionEvent,
    RecordState,
    RetentionRecord,
    Run,
    RunLease,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.selectors.run_rules import run_rules
from retention.storage import KeyResult, Outcome
from tests.fakes import FakeTime, Queue, dispatch, enqueue
from tests.helpers import put_expired

pytestmark = pytest.mark.django_db


@dataclass
class Overlapping:
    """Deletes every key (as a thread-safe store with no rate to keep would)."""

    calls: list[list[int]] = field(default_factory=list)

    def can_overlap(self, storages: Any, gate: RateGate) -> bool:
        return True

    def dispose(
        self, items: Sequence[DisposalItem], *, erase_versions: bool, gate: RateGate
    ) -> dict[int, KeyResult]:
        self.calls.append([item.record_id for item in items])
        return {item.record_id: KeyResult(item.object_key, Outcome.DELETED) for item in items}


class Hooked(ObjectDisposer):
    """Deletes as usual, and lets the test act while the batch is at the store."""

    def __init__(self, hook: Any) -> None:
        super().__init__()
        self.hook = hook

    def dispose(
        self, items: Sequence[DisposalItem], *, erase_versions: bool, gate: RateGate
    ) -> dict[int, KeyResult]:
        if self.hook is not None:
            self.hook()
        return super().dispose(items, erase_versions=erase_versions, gate=gate)


def take_over(run: Run, at: datetime) -> Run:
    """What a second trigger does once ``run``'s lease lapsed: abandon it, sweep anew."""
    return engine.run_start(mode=RunMode.ENFORCE, trigger=RunTrigger.COMMAND, now=at)


def lease_lapse(time: FakeTime) -> datetime:
    return time.now + timedelta(seconds=retention_settings.RUN_LEASE_SECONDS + 1)


# --------------------------------------------------------------------------
# A lost lease stops a run (inline)


@pytest.mark.parametrize("overlap", [False, True], ids=["direct", "overlapped"])
def test_inline__a_run_taken_over_stops_before_its_next_page_and_keeps_abandoned(
    make_policy, now, overlap
):
    make_policy(batch_size=2)
    records = put_expired(6, now)
    time = FakeTime(now)
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    successor: list[Run] = []

    def progress(current: Run) -> None:
        if not successor:
            successor.append(take_over(run, lease_lapse(time)))
            # The next page is due for a heartbeat: the loss is noticed there.
            time.advance(retention_settings.RUN_LEASE_SECONDS / 10)

    result = engine.run_execute(
        run=run,
        clock=time.clock,
        monotonic=time.monotonic,
        progress=progress,
        disposer=Overlapping() if overlap else None,
    )

    run.refresh_from_db()
    assert (run.status, run.status_reason) == (RunStatus.ABANDONED, "lease expired")
    assert result.status == RunStatus.ABANDONED
    # The pages it had in hand were finished and counted; nothing after them.
    done = RetentionRecord.objects.filter(state=RecordState.DELETED).count()
    assert run.deleted == done == (4 if overlap else 2)
    assert DeletionEvent.objects.filter(run=run).count() == done
    assert RetentionRecord.objects.filter(state=RecordState.DELETING).count() == 0
    # The successor sweeps the rest, once.
    engine.run_execute(run=successor[0], clock=lambda: lease_lapse(time))
    assert RetentionRecord.objects.filter(state=RecordState.DELETED).count() == len(records)
    assert DeletionEvent.objects.count() == len(records)


def test_inline__lease_taken_while_still_running_closes_it_abandoned(make_policy, now):
    make_policy(batch_size=2)
    put_expired(4, now)
    time = FakeTime(now)
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)

    def progress(current: Run) -> None:
        # Someone took the class's lease without closing the run.
        RunLease.objects.filter(run=run).update(owner=uuid.uuid4())
        time.advance(retention_settings.RUN_LEASE_SECONDS / 10)

    engine.run_execute(run=run, clock=time.clock, monotonic=time.monotonic, progress=progress)

    run.refresh_from_db()
    assert (run.status, run.status_reason, run.deleted) == (
        RunStatus.ABANDONED,
        "run lease lost",
        2,
    )


# --------------------------------------------------------------------------
# Budgets and deadlines, by moving the fake clock


def test_inline__time_budget_is_crossed_by_the_monotonic_timer(make_policy, now):
    make_policy(batch_size=2)
    put_expired(6, now)
    time = FakeTime(now)
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)

    engine.run_execute(
        run=run,
        clock=time.clock,
        monotonic=time.monotonic,
        max_seconds=10,
        progress=lambda current: time.advance(6),
    )

    run.refresh_from_db()
    assert (run.status, run.status_reason) == (RunStatus.STOPPED, "time budget of 10s reached")
    assert run.deleted == 4


def test_inline__deadline_is_kept_like_the_queued_path(make_policy, now):
    make_policy(batch_size=2)
    put_expired(6, now)
    time = FakeTime(now)
    run = engine.run_start(mode=RunMode.ENFORCE, now=now, deadline_at=now + timedelta(seconds=60))

    engine.run_execute(
        run=run, clock=time.clock, monotonic=time.monotonic, progress=lambda c: time.advance(61)
    )

    run.refresh_from_db()
    assert (run.status, run.status_reason) == (RunStatus.STOPPED, "time budget of 60s reached")
    assert run.deleted == 2


@pytest.fixture
def one_batch_in_flight(settings: Any, make_policy: Any) -> None:
    """Pages of two photos, one batch in flight at a time."""
    settings.RETENTION_MAX_BATCHES_IN_FLIGHT = 1
    make_policy(batch_size=2)


def delivering(queue: Queue, on_batch: Any) -> Queue:
    """``queue`` runs each batch at once; ``on_batch`` is called while it deletes."""
    queue.deliver = lambda payload: queue.run_batch(payload, disposer=Hooked(on_batch))
    return queue


def test_queued__a_run_taken_over_stops_publishing_and_keeps_abandoned(one_batch_in_flight, now):
    put_expired(6, now)
    time = FakeTime(now)
    queue = Queue(time)
    run = enqueue(now, queue)
    successors: list[Run] = []

    def after_first_batch() -> None:
        if not successors:
            successors.append(take_over(run, lease_lapse(time)))
            time.advance(retention_settings.RUN_LEASE_SECONDS / 10)

    delivering(queue, after_first_batch)

    assert dispatch(run, queue, monotonic=time.monotonic) == RunStatus.ABANDONED

    run.refresh_from_db()
    assert (run.status, run.status_reason) == (RunStatus.ABANDONED, "lease expired")
    assert len(queue.batches) == 1 and run.deleted == 2


def test_queued__time_budget_stops_with_the_inline_reason(one_batch_in_flight, now):
    put_expired(6, now)
    time = FakeTime(now)
    queue = Queue(time)
    run = enqueue(now, queue, max_seconds=60)
    delivering(queue, lambda: time.advance(35))

    assert dispatch(run, queue, monotonic=time.monotonic) == RunStatus.STOPPED

    run.refresh_from_db()
    assert run.status_reason == "time budget of 60s reached"
    assert run.deleted == 4


def test_queued__every_advance_renews_the_run_lease(one_batch_in_flight, now):
    put_expired(4, now)
    time = FakeTime(now)
    queue = Queue(time)
    run = enqueue(now, queue)
    dispatch(run, queue, monotonic=time.monotonic)
    time.advance(200)

    engine.batch_dispose(payload=queue.batches[0], clock=time.clock, publish=queue)

    run.refresh_from_db()
    lease = RunLease.objects.get(data_class="idv.photo")
    expected = time.now + timedelta(seconds=retention_settings.RUN_LEASE_SECONDS)
    assert run.lease_expires_at == lease.expires_at == expected
    assert len(queue.batches) == 2


def test_stepper__retry_wait_leaves_retries_past_the_budget_to_the_next_run(make_policy, now):
    make_policy()
    time = FakeTime(now)
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    stepper = Stepper(run=run, clock=time.clock, monotonic=time.monotonic, max_seconds=20)

    assert stepper.retry_wait(None, now) is None
    assert stepper.retry_wait(now + timedelta(seconds=5), now) == pytest.approx(5.01)
    time.advance(18)
    assert stepper.retry_wait(time.now + timedelta(seconds=5), time.now) is None


def test_stepper__a_paced_page_lease_covers_the_pages_ahead_of_it(make_policy, now):
    make_policy(batch_size=100, rate_limit=50.0)
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    rules = run_rules(run)["idv.photo"]
    inline = Stepper(run=run, clock=lambda: now)
    queued = Stepper(run=run, clock=lambda: now, pages_in_flight=4)

    assert inline.page_lease_seconds(100, rules) == retention_settings.LEASE_SECONDS + 2.0
    assert queued.page_lease_seconds(100, rules) == retention_settings.LEASE_SECONDS + 8.0


# --------------------------------------------------------------------------
# Tasks queued by the previous version still run


@pytest.mark.parametrize(
    "path", ["retention.tasks.run_dispatch", "retention.services.triggers.run_execute_queued"]
)
def test_task_paths_of_earlier_versions_still_sweep_a_queued_run(
    make_policy, now, path, monkeypatch
):
    make_policy()
    records = put_expired(3, now)
    published: list[tuple[str, dict[str, Any]]] = []

    def publish(func: str, payload: dict[str, Any], name: str) -> None:
        published.append((func, payload))

    run = engine.run_enqueue(
        mode=RunMode.ENFORCE, trigger=RunTrigger.COMMAND, now=now, publish=publish
    )
    # What a worker does with the batches the dispatcher publishes.
    monkeypatch.setattr(
        "retention.engine.queued.batch_publisher",
        lambda: lambda func, payload, name: pydoc.locate(func)(payload),
    )
    task = pydoc.locate(path)
    assert callable(task)

    status = task({"run_id": str(run.pk)}) if path.endswith("run_dispatch") else task(str(run.pk))

    run.refresh_from_db()
    assert status == RunStatus.FINISHED == run.status
    assert run.deleted == len(records)
