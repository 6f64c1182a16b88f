"""A batch task takes pages for up to RETENTION_BATCH_SECONDS, then hands over (issue 16).

In-process, with the fake queue of ``tests.fakes``: a monotonic clock the
test moves stands for the time each page takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from retention import api
from retention.engine.guard import GuardReading
from retention.engine.publish import BATCH_TASK
from retention.models import BatchState, RetentionRecord, Run, RunBatch, RunStatus
from tests.fakes import FakeTime, Queue, dispatch, enqueue, over_budget, under_budget
from tests.helpers import exists, put_expired

pytestmark = pytest.mark.django_db


class Seconds:
    """A monotonic clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.step, self.now = step, 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def slices(settings: Any) -> Any:
    settings.RETENTION_BATCH_SECONDS = 10
    settings.RETENTION_MAX_BATCHES_IN_FLIGHT = 1
    return settings


def _deliver_with(queue: Queue, monotonic: Callable[[], float], **kwargs: Any) -> None:
    def deliver(payload: dict[str, Any]) -> None:
        queue.run_batch(payload, monotonic=monotonic, **kwargs)

    queue.deliver = deliver


def _sizes() -> list[int]:
    """What each batch that claimed anything took, largest first."""
    sizes = RunBatch.objects.filter(size__gt=0).values_list("size", flat=True)
    return sorted(sizes, reverse=True)


def test_batch__takes_pages_until_its_time_is_up_then_hands_over(slices, make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(7, now)
    queue = Queue(FakeTime(now))
    # Read at the start, then after each page: 4, 8 (< 10: one more page), 12 (stop).
    _deliver_with(queue, Seconds(4))
    run = enqueue(now, queue)

    assert dispatch(run, queue) == RunStatus.FINISHED

    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (7, 7)
    # Three pages in the first task, the last page in its successor.
    assert _sizes() == [6, 1]
    assert not any(exists(r) for r in records)


def test_batch__with_no_time_left_takes_one_page(slices, make_policy, now):
    slices.RETENTION_BATCH_SECONDS = 0
    make_policy(batch_size=2)
    put_expired(5, now)
    queue = Queue(FakeTime(now))
    _deliver_with(queue, Seconds(1))
    run = enqueue(now, queue)

    assert dispatch(run, queue) == RunStatus.FINISHED

    assert _sizes() == [2, 2, 1]


def test_batch__takes_no_further_page_once_the_foreground_is_over_budget(slices, make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(6, now)
    queue = Queue(FakeTime(now))
    # The advance that publishes the first batch reads it quiet; then it is busy.
    busy: Iterator[bool] = iter([False])

    def quiet_then_busy(*, now: datetime) -> GuardReading:
        return over_budget(now=now) if next(busy, True) else under_budget(now=now)

    queue.guard = quiet_then_busy
    _deliver_with(queue, Seconds(1))
    run = enqueue(now, queue)

    assert dispatch(run, queue, guard=quiet_then_busy) == RunStatus.RUNNING

    run.refresh_from_db()
    # One page, no more: the advance after it defers the rest.
    assert (run.claimed, run.deleted) == (2, 2)
    assert run.deferred == 4
    assert "deferring" in run.report
    assert sum(not exists(r) for r in records) == 2
    assert not RunBatch.objects.filter(state=BatchState.QUEUED).exists()


def test_batch__stops_at_the_runs_limit_within_its_time(slices, make_policy, now):
    make_policy(batch_size=2)
    put_expired(7, now)
    queue = Queue(FakeTime(now))
    _deliver_with(queue, Seconds(1))
    run = enqueue(now, queue, limit=3)

    assert dispatch(run, queue) == RunStatus.STOPPED

    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (3, 3)
    assert _sizes() == [3]
    assert RetentionRecord.objects.filter(deleted_at__isnull=True).count() == 4


def test_batch__a_pause_during_a_page_ends_the_batch_before_its_next_claim(
    slices, make_policy, now, approver
):
    make_policy(batch_size=2)
    records = put_expired(6, now)
    queue = Queue(FakeTime(now))
    monotonic = Seconds(1)
    pages = 0

    def pause_after_the_first_page() -> float:
        nonlocal pages
        pages += 1
        if pages == 2:  # read after the first page
            api.pause(by=approver, reason="incident", now=now)
        return monotonic()

    _deliver_with(queue, pause_after_the_first_page)
    run = enqueue(now, queue)

    assert dispatch(run, queue) == RunStatus.PAUSED

    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (2, 2)
    assert _sizes() == [2]
    assert sum(not exists(r) for r in records) == 2


def test_batch__a_run_closed_meanwhile_claims_nothing_more(slices, make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(6, now)
    queue = Queue(FakeTime(now))
    reads = 0

    def closed_after_the_first_page() -> float:
        nonlocal reads
        reads += 1
        if reads == 2:
            # Another trigger gave the run up (abandoned) while this batch worked.
            Run.objects.filter(status=RunStatus.RUNNING).update(status=RunStatus.ABANDONED)
        return float(reads)

    _deliver_with(queue, closed_after_the_first_page)
    run = enqueue(now, queue)
    dispatch(run, queue)

    run.refresh_from_db()
    assert run.status == RunStatus.ABANDONED
    assert run.deleted == 2
    assert sum(not exists(r) for r in records) == 2


def test_batch__the_batches_no_worker_took_close_when_nothing_is_left(slices, make_policy, now):
    """The run ends with the batch that took the last page, not after its idle siblings."""
    slices.RETENTION_MAX_BATCHES_IN_FLIGHT = 3
    make_policy(batch_size=2)
    records = put_expired(6, now)
    queue = Queue(FakeTime(now))  # publishes, delivers nothing by itself
    run = enqueue(now, queue)
    dispatch(run, queue)
    published = [p for func, p in queue.published if func == BATCH_TASK]
    assert len(published) == 3

    # One worker takes the first batch: within its time it takes every page.
    queue.run_batch(published[0], monotonic=Seconds(1))

    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    assert (run.claimed, run.deleted) == (6, 6)
    assert not any(exists(r) for r in records)
    idle = RunBatch.objects.exclude(token=published[0]["token"])
    assert list(idle.values_list("state", "deliveries", "size")) == [(BatchState.DONE, 0, 0)] * 2
    # Delivered later, they are not taken.
    for payload in published[1:]:
        queue.run_batch(payload, monotonic=Seconds(1))
    assert list(idle.values_list("state", "deliveries", "size")) == [(BatchState.DONE, 0, 0)] * 2


def test_batch__a_batch_a_worker_took_is_not_closed_under_it(slices, make_policy, now):
    """A sibling already delivered counts as in flight, though it has claimed nothing yet."""
    slices.RETENTION_MAX_BATCHES_IN_FLIGHT = 2
    make_policy(batch_size=2)
    put_expired(4, now)
    queue = Queue(FakeTime(now))
    run = enqueue(now, queue)
    dispatch(run, queue)
    first, second = [p for func, p in queue.published if func == BATCH_TASK]
    # A worker has taken the second batch (its delivery counted), not claimed yet.
    RunBatch.objects.filter(token=second["token"]).update(deliveries=1)

    queue.run_batch(first, monotonic=Seconds(1))

    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert RunBatch.objects.get(token=second["token"]).state == BatchState.QUEUED
