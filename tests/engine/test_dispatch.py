"""Queued runs: arm task, batch tasks, schedule, guard, kill switch (issues 3, 16).

The queue here is a list the test drives, so that a batch can be delivered
twice, lost, or delivered after a pause. A delivered batch advances the run
(claims and publishes its successors) as a worker would; what no batch carries
on is advanced by the watchdog, which the tests call as the schedule would.
The real django-q2 cluster is in tests/queue/.
"""

from __future__ import annotations

import pydoc
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ, Schedule
from django_q.scheduler import scheduler
from django_q.signing import SignedPackage
from freezegun import freeze_time

from retention import api, engine
from retention.engine import DISPATCH_TASK, SWEEP_SCHEDULE, WATCHDOG_SCHEDULE, schedule_slot_for
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.engine.guard import GuardReading
from retention.exceptions import RecordBeingDisposed
from retention.models import (
    BatchState,
    DeletionEvent,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunBatch,
    RunExecutor,
    RunStatus,
    RunTrigger,
)
from tests.fakes import (
    DiesAfterDelete,
    FakeTime,
    Queue,
    dispatch,
    enqueue,
    enqueued,
    over_budget,
    under_budget,
)
from tests.helpers import exists, outcomes, put_expired, put_tracked

pytestmark = pytest.mark.django_db


# --------------------------------------------------------------------------
# Dispatcher and batches


def test_enqueue__writes_the_run_and_publishes_only_its_dispatcher(make_policy, now):
    make_policy(batch_size=3)
    put_expired(4, now)
    queue = Queue(FakeTime(now))

    run = enqueue(now, queue)

    assert run.status == RunStatus.RUNNING and run.executor == RunExecutor.QUEUE
    assert queue.published == [(DISPATCH_TASK, {"run_id": str(run.pk)})]
    assert RetentionRecord.objects.filter(state=RecordState.ACTIVE).count() == 4


def test_dispatch__one_task_per_batch_and_every_expired_object_deleted(make_policy, now):
    make_policy(batch_size=3)
    records = put_expired(7, now)
    kept = put_tracked(now=now - timedelta(days=1))
    run, queue = enqueued(now)

    assert dispatch(run, queue) == RunStatus.FINISHED

    run.refresh_from_db()
    assert sorted(RunBatch.objects.values_list("size", flat=True), reverse=True) == [3, 3, 1]
    assert len(queue.batches) == 3
    assert (run.eligible, run.claimed, run.deleted) == (7, 7, 7)
    assert not any(exists(r) for r in records) and exists(kept)
    assert set(RunBatch.objects.values_list("state", flat=True)) == {BatchState.DONE}
    assert all(outcomes(r) == [EventOutcome.DELETED] for r in records)


def test_dispatch__a_row_the_claims_went_past_is_taken_by_the_final_pass(
    make_policy, now, approver
):
    # The held row is the oldest: the first claim walks past it, and the
    # next ones resume after the cursor, behind which it is released.
    make_policy(batch_size=1)
    held = put_tracked(now=now - timedelta(days=42))
    others = put_expired(2, now)
    hold = api.place_hold(reason="audit", placed_by=approver, record=held, now=now)
    queue = Queue(FakeTime(now))

    def run_then_release(payload: dict[str, Any]) -> None:
        queue.run_batch(payload)
        if len(queue.batches) == 1:
            api.release_hold(hold, released_by=approver, reason="audit over", now=now)

    queue.deliver = run_then_release
    run = enqueue(now, queue)

    assert dispatch(run, queue) == RunStatus.FINISHED

    run.refresh_from_db()
    deleted_in_order = DeletionEvent.objects.filter(outcome=EventOutcome.DELETED).order_by("id")
    assert list(deleted_in_order.values_list("record", flat=True)) == [
        others[0].pk,
        others[1].pk,
        held.pk,
    ]
    assert run.deleted == 3
    assert not any(exists(r) for r in [held, *others])


def test_batch__payload_names_its_run_and_class_but_no_record_and_no_object_key(make_policy, now):
    make_policy(batch_size=10)
    records = put_expired(2, now)
    run, queue = enqueued(now)
    dispatch(run, queue)

    # The batch claims its own page on the worker: nothing of it waits in the broker.
    (payload,) = queue.batches
    (batch,) = RunBatch.objects.all()
    assert payload == {"run_id": str(run.pk), "token": str(batch.token), "data_class": "idv.photo"}
    assert not any(r.object_key in repr(payload) for r in records)
    assert batch.size == 2 and not any(exists(r) for r in records)


def test_batch__delivered_twice_deletes_once_and_records_once(make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(5, now)
    queue = Queue(FakeTime(now))

    def twice(payload: dict[str, Any]) -> None:
        queue.run_batch(payload)
        queue.run_batch(payload)

    queue.deliver = twice
    run = enqueue(now, queue)
    dispatch(run, queue)

    run.refresh_from_db()
    assert (run.deleted, run.already_absent) == (5, 0)
    assert all(outcomes(r) == [EventOutcome.DELETED] for r in records)
    assert DeletionEvent.objects.count() == 5


def test_batch__redelivered_after_a_crash_mid_delete_probes_and_records_absent(make_policy, now):
    """The first worker deleted the objects and died before finalizing."""
    make_policy(batch_size=10)
    records = put_expired(3, now)
    queue = Queue(FakeTime(now))

    def crash_then_redeliver(payload: dict[str, Any]) -> None:
        with pytest.raises(ConnectionError):
            queue.run_batch(payload, disposer=DiesAfterDelete(ConnectionError))
        queue.run_batch(payload)

    queue.deliver = crash_then_redeliver
    run = enqueue(now, queue)
    dispatch(run, queue)

    run.refresh_from_db()
    assert (run.deleted, run.already_absent, run.failed) == (0, 3, 0)
    assert all(outcomes(r) == [EventOutcome.ALREADY_ABSENT] for r in records)
    assert not any(exists(r) for r in records)


def test_batch__redelivered_after_its_lease_lapsed_keeps_the_run_open_until_it_is_done(
    make_policy, now, settings
):
    """A worker killed mid-page, its task redelivered after the batch's lease lapsed.

    The redelivery re-checks the rows (renewing their leases) and deletes
    them; an advance meanwhile (another batch finishing, the watchdog) must
    not close the run while those deletes are still going out.
    """
    settings.RETENTION_LEASE_SECONDS = 30
    make_policy(batch_size=10)
    records = put_expired(3, now)
    queue = Queue(FakeTime(now))
    seen: list[str] = []

    class Killed(ObjectDisposer):
        def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> Any:
            raise ConnectionError("worker killed before the delete")

    class AdvancedMeanwhile(ObjectDisposer):
        def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> Any:
            engine.run_advance(run_id=run.pk, clock=queue.clock, publish=queue, guard=under_budget)
            seen.append(Run.objects.get(pk=run.pk).status)
            return super().dispose(items, **kwargs)

    def killed_then_redelivered_late(payload: dict[str, Any]) -> None:
        with pytest.raises(ConnectionError):
            queue.run_batch(payload, disposer=Killed())
        queue.clock.sleep(31)  # the batch's lease and its rows' leases lapse
        queue.run_batch(payload, disposer=AdvancedMeanwhile())

    queue.deliver = killed_then_redelivered_late
    run = enqueue(now, queue)
    dispatch(run, queue)

    assert seen == [RunStatus.RUNNING]
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    assert run.deleted == 3 and not any(exists(r) for r in records)


def test_advance__does_not_close_a_run_while_a_row_of_it_is_under_a_live_lease(
    make_policy, now, settings
):
    """A row still being disposed of, by nothing the run counts in flight: the run waits."""
    import uuid

    from retention.models import RecordState

    make_policy(batch_size=10)
    records = put_expired(3, now)
    RetentionRecord.objects.filter(pk=records[0].pk).update(
        state=RecordState.DELETING,
        lease_owner=uuid.uuid4(),
        lease_expires_at=now + timedelta(seconds=30),
        disposal_started_at=now,
    )
    run, queue = enqueued(now)

    assert dispatch(run, queue) == RunStatus.RUNNING
    run.refresh_from_db()
    assert run.deleted == 2 and exists(records[0])

    queue.clock.sleep(31)  # its lease lapses: the watchdog carries the run on
    assert [r.pk for r in queue.watchdog()] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    assert run.deleted == 3 and not any(exists(r) for r in records)


def test_batch__lost_by_the_broker_is_claimed_again_after_its_lease(make_policy, now, settings):
    settings.RETENTION_LEASE_SECONDS = 30
    make_policy(batch_size=2)
    records = put_expired(4, now)
    queue = Queue(FakeTime(now))
    lost: list[str] = []

    def lose_first_delivery(payload: dict[str, Any]) -> None:
        if not lost:
            lost.append(payload["token"])
            return
        queue.run_batch(payload)

    queue.deliver = lose_first_delivery
    run = enqueue(now, queue)
    # The other batch finished; nothing carries the lost one on.
    assert dispatch(run, queue) == RunStatus.RUNNING
    queue.clock.sleep(31)
    assert [r.pk for r in queue.watchdog()] == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED

    run.refresh_from_db()
    assert run.deleted == 4 and not any(exists(r) for r in records)
    assert RunBatch.objects.get(token=lost[0]).state == BatchState.EXPIRED
    # The lost batch's rows went out again under a new token.
    assert len(queue.batches) == 3
    assert queue.clock.now >= now + timedelta(seconds=30)


def test_batch__renewed_before_its_batch_claims_is_kept_and_after_is_refused(make_policy, now):
    make_policy(batch_size=10)
    renewed, other = put_expired(2, now)
    queue = Queue(FakeTime(now))
    refused: list[Exception] = []

    class RenewsDuringDelete(ObjectDisposer):
        def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> Any:
            # Claimed and marked: a renewal now would pretend a gone object was kept.
            try:
                api.renew(RetentionRecord.objects.get(pk=other.pk), now=now)
            except RecordBeingDisposed as exc:
                refused.append(exc)
            return super().dispose(items, **kwargs)

    def renew_then_run(payload: dict[str, Any]) -> None:
        # The batch has not claimed yet: the renewal wins, the record is not eligible.
        api.renew(RetentionRecord.objects.get(pk=renewed.pk), now=now)
        queue.run_batch(payload, disposer=RenewsDuringDelete())

    queue.deliver = renew_then_run
    run = enqueue(now, queue)
    dispatch(run, queue)

    renewed.refresh_from_db()
    run.refresh_from_db()
    assert renewed.state == RecordState.ACTIVE and exists(renewed)
    assert outcomes(renewed) == []
    assert len(refused) == 1 and not exists(other) and run.deleted == 1
    assert outcomes(other) == [EventOutcome.DELETED]


def test_dispatch__respects_the_global_limit_of_batches_in_flight(make_policy, now, settings):
    settings.RETENTION_MAX_BATCHES_IN_FLIGHT = 2
    make_policy(batch_size=1)
    put_expired(5, now)
    queue = Queue(FakeTime(now))
    run = enqueue(now, queue)
    peak = 0

    status = dispatch(run, queue)
    # Workers take the published batches in order, as a FIFO broker hands them out.
    delivered = 0
    while delivered < len(queue.batches):
        peak = max(peak, RunBatch.objects.filter(state=BatchState.QUEUED).count())
        queue.run_batch(queue.batches[delivered])
        delivered += 1

    run.refresh_from_db()
    assert status == RunStatus.RUNNING
    assert run.status == RunStatus.FINISHED and run.deleted == 5
    assert peak == 2


def test_dispatch__a_second_arm_task_on_the_same_run_sweeps_nothing_twice(make_policy, now):
    make_policy(batch_size=2)
    put_expired(3, now)
    run, queue = enqueued(now)
    second: list[str] = []

    def dispatcher_arrives(payload: dict[str, Any]) -> None:
        second.append(dispatch(run, queue))
        queue.run_batch(payload)

    queue.deliver = dispatcher_arrives
    assert dispatch(run, queue) == RunStatus.FINISHED
    assert second and set(second) <= {RunStatus.RUNNING, RunStatus.FINISHED}
    run.refresh_from_db()
    assert run.deleted == 3 and DeletionEvent.objects.count() == 3


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_dispatch__two_dispatcher_threads_sweep_once(make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(9, now)
    queue = Queue(FakeTime(now))
    # Re-entrant: a batch publishes its successor, delivered from within it.
    lock = threading.RLock()

    def deliver(payload: dict[str, Any]) -> None:
        with lock:
            queue.run_batch(payload)

    queue.deliver = deliver
    run = enqueue(now, queue)
    results: list[str] = []
    barrier = threading.Barrier(2)

    def worker() -> None:
        try:
            barrier.wait()
            results.append(
                engine.run_arm(
                    run_id=run.pk,
                    clock=lambda: now,
                    sleep=lambda s: None,
                    publish=queue,
                    guard=under_budget,
                )
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    run.refresh_from_db()
    assert len(results) == 2 and set(results) <= {RunStatus.RUNNING, RunStatus.FINISHED}
    assert run.status == RunStatus.FINISHED
    assert run.deleted == 9 and run.claimed == 9
    assert DeletionEvent.objects.count() == 9
    assert not any(exists(r) for r in records)


def test_dispatch__no_task_holds_a_worker_for_more_than_one_page(make_policy, now, settings):
    settings.RETENTION_MAX_BATCHES_IN_FLIGHT = 2
    make_policy(batch_size=2)
    records = put_expired(7, now)
    queue = Queue(FakeTime(now))
    run = enqueue(now, queue)

    # The arm task publishes the first batches and returns: no loop over the run.
    assert dispatch(run, queue) == RunStatus.RUNNING
    assert len(queue.batches) == 2
    # Each batch disposes of its page and publishes at most its successor.
    delivered = 0
    while delivered < len(queue.batches):
        before = len(queue.batches)
        queue.run_batch(queue.batches[delivered])
        delivered += 1
        assert len(queue.batches) - before <= 1
        assert RunBatch.objects.filter(state=BatchState.QUEUED).count() <= 2

    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED and run.deleted == 7
    assert sorted(RunBatch.objects.values_list("size", flat=True), reverse=True) == [2, 2, 2, 1]
    assert not any(exists(r) for r in records)


def test_dispatch__publish_failures_release_rows_and_end_the_run(make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(4, now)
    queue = Queue(FakeTime(now))
    run = enqueue(now, queue)

    def broker_down(func: str, payload: dict[str, Any], name: str) -> None:
        raise ConnectionError("broker down")

    status = engine.run_arm(
        run_id=run.pk,
        clock=queue.clock,
        sleep=queue.clock.sleep,
        publish=broker_down,
        guard=under_budget,
    )

    run.refresh_from_db()
    assert status == RunStatus.ERROR and "could not be published" in run.status_reason
    assert all(
        r.state == RecordState.ACTIVE and r.lease_owner is None and r.attempts == 0
        for r in RetentionRecord.objects.filter(pk__in=[r.pk for r in records])
    )
    assert set(RunBatch.objects.values_list("state", flat=True)) == {BatchState.UNPUBLISHED}
    assert all(exists(r) for r in records)


def test_watchdog__republishes_the_dispatcher_of_a_stalled_run(make_policy, now, settings):
    settings.RETENTION_DISPATCHER_LEASE_SECONDS = 60
    make_policy()
    put_expired(1, now)
    queue = Queue(FakeTime(now))
    run = enqueue(now, queue)
    queue.published.clear()

    assert engine.runs_resume_stalled(now=now + timedelta(seconds=30), publish=queue) == []
    resumed = engine.runs_resume_stalled(now=now + timedelta(seconds=61), publish=queue)

    assert [r.pk for r in resumed] == [run.pk]
    assert queue.published == [(DISPATCH_TASK, {"run_id": str(run.pk)})]


# --------------------------------------------------------------------------
# Foreground guard


def test_guard__over_budget_publishes_nothing_and_counts_deferred(make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(5, now)
    queue = Queue(FakeTime(now))
    run = enqueue(now, queue, max_seconds=120)
    queue.published.clear()

    assert dispatch(run, queue, guard=over_budget) == RunStatus.RUNNING
    # Still over budget when the watchdog looks again, past the time budget.
    queue.guard = over_budget
    queue.clock.sleep(121)
    queue.watchdog()

    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
    assert queue.published == [] and not RunBatch.objects.exists()
    assert (run.claimed, run.deleted, run.deferred) == (0, 0, 5)
    assert run.report["deferrals"][0]["signal"] == "shipments: 95s"
    assert all(exists(r) for r in records)


def test_guard__dispatch_resumes_within_the_run_when_there_is_headroom(make_policy, now):
    make_policy(batch_size=2)
    records = put_expired(4, now)
    run, queue = enqueued(now)
    readings = iter([True] * 20)

    def busy_then_quiet(*, now: datetime) -> GuardReading:
        busy = next(readings, False)
        return over_budget(now=now) if busy else under_budget(now=now)

    status = dispatch(run, queue, guard=busy_then_quiet)
    # The watchdog reads the guard again each time it fires.
    for _ in range(30):
        if status != RunStatus.RUNNING:
            break
        queue.clock.sleep(60)
        status = engine.run_advance(
            run_id=run.pk, clock=queue.clock, publish=queue, guard=busy_then_quiet
        )
    assert status == RunStatus.FINISHED

    run.refresh_from_db()
    assert (run.deleted, run.deferred) == (4, 0)
    assert len(run.report["deferrals"]) == 1
    assert not any(exists(r) for r in records)


# --------------------------------------------------------------------------
# Kill switch


def test_pause__mid_run_no_new_claims_and_the_batch_in_flight_finishes(
    make_policy, now, approver, settings
):
    settings.RETENTION_MAX_BATCHES_IN_FLIGHT = 1
    make_policy(batch_size=2)
    records = put_expired(6, now)
    queue = Queue(FakeTime(now))

    class PausesDuringDelete(ObjectDisposer):
        def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> Any:
            api.pause(by=approver, reason="incident", now=now)
            return super().dispose(items, **kwargs)

    def deliver(payload: dict[str, Any]) -> None:
        queue.run_batch(payload, disposer=PausesDuringDelete())

    queue.deliver = deliver
    run = enqueue(now, queue)
    assert dispatch(run, queue) == RunStatus.PAUSED

    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (2, 2)
    assert len(queue.batches) == 1
    assert sum(not exists(r) for r in records) == 2
    assert RetentionRecord.objects.filter(state=RecordState.ACTIVE).count() == 4


def test_pause__a_batch_not_yet_started_gives_its_rows_back(make_policy, now, approver):
    make_policy(batch_size=3)
    records = put_expired(3, now)
    queue = Queue(FakeTime(now))
    run = enqueue(now, queue)
    held_back: list[dict[str, Any]] = []
    queue.deliver = held_back.append

    assert dispatch(run, queue) == RunStatus.RUNNING
    api.pause(by=approver, reason="incident", now=now)
    queue.run_batch(held_back.pop())
    status = Run.objects.get(pk=run.pk).status

    assert status == RunStatus.PAUSED
    assert RunBatch.objects.get().state == BatchState.RELEASED
    for record in RetentionRecord.objects.filter(pk__in=[r.pk for r in records]):
        assert (record.state, record.lease_owner, record.attempts) == (RecordState.ACTIVE, None, 0)
    assert all(exists(r) for r in records)
    assert not DeletionEvent.objects.exists()


# --------------------------------------------------------------------------
# The schedule


def test_schedule_slot__latest_slot_at_or_before_now_and_the_next():
    at = datetime.fromisoformat("2026-03-14T02:17:00+00:00")
    assert schedule_slot_for("17 2 * * *", at) == (at, at + timedelta(days=1))
    later = at + timedelta(hours=5)
    assert schedule_slot_for("17 2 * * *", later) == (at, at + timedelta(days=1))


def test_schedule__two_firings_in_one_slot_start_one_run(make_policy, now, settings):
    settings.RETENTION_SCHEDULE_CRON = "0 * * * *"
    make_policy()
    queue = Queue(FakeTime(now))

    first = engine.run_schedule_fire(now=now + timedelta(minutes=1), publish=queue)
    second = engine.run_schedule_fire(now=now + timedelta(minutes=7), publish=queue)

    assert first is not None and second is not None and first.pk == second.pk
    assert Run.objects.count() == 1
    assert first.trigger == RunTrigger.SCHEDULE and first.schedule_slot == now
    assert first.deadline_at == now + timedelta(hours=1)
    assert [func for func, _ in queue.published] == [DISPATCH_TASK]


@pytest.fixture(autouse=True)
def _keep_the_test_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scheduler closes old connections, which would end the test's transaction.
    monkeypatch.setattr("django_q.scheduler.close_old_django_connections", lambda: None)


def _fire_due_schedules(times: int) -> list[dict[str, Any]]:
    broker = get_broker()
    for _ in range(times):
        scheduler(broker=broker)
    return [SignedPackage.loads(row.payload) for row in OrmQ.objects.order_by("id")]


def test_schedule__after_downtime_the_cron_schedule_fires_once(make_policy, now, settings):
    settings.RETENTION_SCHEDULE_CRON = "17 2 * * *"
    make_policy()
    with freeze_time(now):
        call_command("retention_schedule", stdout=StringIO())
        Schedule.objects.filter(name=SWEEP_SCHEDULE).update(next_run=now - timedelta(days=3))
        Schedule.objects.filter(name=WATCHDOG_SCHEDULE).delete()
        tasks = _fire_due_schedules(4)
    assert [t["func"] for t in tasks] == ["retention.tasks.run_scheduled"]


def test_schedule__missed_slots_replayed_by_django_q2_coalesce_into_one_run(
    make_policy, now, settings, monkeypatch
):
    """A schedule that replays every missed slot (catch_up, interval types) still
    starts one run: each replay finds the current slot's run."""
    settings.RETENTION_SCHEDULE_CRON = "17 2 * * *"
    make_policy()
    put_expired(2, now)
    monkeypatch.setattr(Conf, "CATCH_UP", True)
    with freeze_time(now):
        call_command("retention_schedule", stdout=StringIO())
        Schedule.objects.filter(name=SWEEP_SCHEDULE).update(
            schedule_type=Schedule.DAILY, next_run=now - timedelta(days=3)
        )
        Schedule.objects.filter(name=WATCHDOG_SCHEDULE).delete()
        tasks = _fire_due_schedules(4)
        # Three missed days, three tasks.
        assert [t["func"] for t in tasks] == ["retention.tasks.run_scheduled"] * 3
        results = {pydoc.locate(t["func"])(*t["args"], **t["kwargs"]) for t in tasks}

    assert len(results) == 1
    assert Run.objects.filter(trigger=RunTrigger.SCHEDULE).count() == 1


def test_retention_schedule__twice_leaves_one_schedule_of_each(settings, now):
    settings.RETENTION_SCHEDULE_CRON = "17 2 * * *"
    out = StringIO()
    with freeze_time(now):
        call_command("retention_schedule", stdout=out)
        call_command("retention_schedule", stdout=out)
    sweep = Schedule.objects.get(name=SWEEP_SCHEDULE)
    assert Schedule.objects.filter(name=WATCHDOG_SCHEDULE).count() == 1
    assert (sweep.cron, sweep.func, sweep.schedule_type) == (
        "17 2 * * *",
        "retention.tasks.run_scheduled",
        Schedule.CRON,
    )
    assert sweep.next_run == datetime.fromisoformat("2026-03-15T02:17:00+00:00")
    assert "retention.sweep: created" in out.getvalue()
    assert "retention.sweep: unchanged" in out.getvalue()

    settings.RETENTION_SCHEDULE_CRON = "0 4 * * *"
    with freeze_time(now):
        call_command("retention_schedule", stdout=out)
    sweep.refresh_from_db()
    # The sweep, its watchdog and the weekly reconciliation, one of each.
    assert sweep.cron == "0 4 * * *" and Schedule.objects.count() == 3
    assert "retention.sweep: updated" in out.getvalue()


def test_retention_schedule__bad_cron_is_refused(settings):
    settings.RETENTION_SCHEDULE_CRON = "every night"
    with pytest.raises(CommandError, match="not a valid cron"):
        call_command("retention_schedule", stdout=StringIO())
    assert not Schedule.objects.exists()


# --------------------------------------------------------------------------
# The command


def test_run_retention_enqueue__prints_the_accepted_run_as_json(make_policy, now):
    make_policy()
    put_expired(2, now)
    out = StringIO()
    with freeze_time(now):
        call_command("run_retention", "--enqueue", "--json", stdout=out, stderr=StringIO())

    import json

    data = json.loads(out.getvalue())
    run = Run.objects.get()
    assert data["run_id"] == str(run.pk) and data["status"] == RunStatus.RUNNING
    (task,) = [SignedPackage.loads(row.payload) for row in OrmQ.objects.all()]
    assert task["func"] == DISPATCH_TASK and task["args"] == ({"run_id": str(run.pk)},)


def test_run_retention_wait__needs_enqueue():
    with pytest.raises(CommandError, match="--wait"):
        call_command("run_retention", "--wait", stdout=StringIO())
