"""`retention_verify --runs`: every closed run's counts equal the events recorded for it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import CommandError, call_command
from django.db.models import F

from retention import api, engine
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.models import (
    DeletionEvent,
    EventKind,
    EventOutcome,
    Run,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.storage import KeyResult, Outcome
from tests.fakes import DiesAfterDelete, Queue, queued
from tests.helpers import dry_run, enforce, put_tracked
from tests.rowhost.models import Account, Invoice, RequestLog, Shipment

pytestmark = pytest.mark.django_db


def verify_runs() -> str:
    out = StringIO()
    call_command("retention_verify", "--runs", stdout=out, stderr=StringIO())
    return out.getvalue()


def disagreement() -> CommandError:
    with pytest.raises(CommandError) as excinfo:
        verify_runs()
    assert excinfo.value.returncode == 1
    return excinfo.value


def recorded(run: Run, outcome: str) -> int:
    """What the run's events say of ``outcome``: a page event counts its rows."""
    return sum(
        e.row_count if e.kind == EventKind.ROW and e.row_count is not None else 1
        for e in DeletionEvent.objects.filter(run=run, outcome=outcome)
    )


def expired(now: datetime, **kwargs: Any) -> Any:
    return put_tracked(now=now - timedelta(days=40), **kwargs)


# --------------------------------------------------------------------------
# Tracked objects, inline


def test_verify_runs__two_runs_skipping_the_same_held_record_each_record_the_skip(
    make_policy, approver, now
):
    make_policy()
    held = expired(now, tenant_id="held")
    expired(now)
    api.place_hold(reason="Litigation 42", placed_by=approver, tenant_id="held", now=now)

    first = enforce(now=now)
    second = enforce(now=now + timedelta(hours=1))

    assert (first.skipped_held, first.deleted) == (1, 1)
    assert (second.skipped_held, second.deleted) == (1, 0)
    skips = DeletionEvent.objects.filter(record=held, outcome=EventOutcome.SKIPPED_HELD)
    assert sorted(skips.values_list("run", flat=True)) == sorted([first.pk, second.pk])
    output = verify_runs()
    assert "Checked 2 runs against their events." in output
    assert "Run counts agree with their events." in output


class Mixed(ObjectDisposer):
    """Refuses one key for good, throttles another once, deletes the rest."""

    def __init__(self, refused: str, throttled: str) -> None:
        super().__init__()
        self.refused, self.throttled, self.throttles = refused, throttled, 0

    def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
        results: dict[int, KeyResult] = {}
        rest = []
        for item in items:
            if item.object_key == self.refused:
                results[item.record_id] = KeyResult(item.object_key, Outcome.PERMANENT, "denied")
            elif item.object_key == self.throttled and not self.throttles:
                self.throttles += 1
                results[item.record_id] = KeyResult(item.object_key, Outcome.TRANSIENT, "SlowDown")
            else:
                rest.append(item)
        results.update(super().dispose(rest, **kwargs) if rest else {})
        return results


def test_verify_runs__deleted_absent_failed_retried_and_renewed_counts_agree(make_policy, now):
    make_policy(batch_size=2)
    for _ in range(3):
        expired(now)
    absent = expired(now)
    storages["default"].delete(absent.object_key)
    refused, throttled = expired(now), expired(now)
    renewed = put_tracked(now=now - timedelta(days=41))  # the oldest: claimed first
    clock = [now]

    def sleep(seconds: float) -> None:
        clock[0] += timedelta(seconds=seconds)

    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    # Claimed without starting its disposal, renewed, then re-checked: kept.
    claim = engine.records_claim(run=run, data_class="idv.photo", limit=1, now=now)
    assert [item.record_id for item in claim.items] == [renewed.pk]
    api.renew(renewed, now=now)
    engine.claim_dispose(claim=claim, clock=lambda: now)
    run = engine.run_execute(
        run=run,
        clock=lambda: clock[0],
        disposer=Mixed(refused.object_key, throttled.object_key),
        sleep=sleep,
    )

    assert run.status == RunStatus.FINISHED
    assert (run.deleted, run.already_absent, run.skipped_renewed) == (4, 1, 1)
    assert (run.failed, run.retried) == (1, 1)
    assert "Checked 1 run against their events." in verify_runs()


# --------------------------------------------------------------------------
# Queued runs: a batch delivered twice, and one redelivered after a crash


def test_verify_runs__queued_runs_delivered_twice_or_after_a_crash_count_each_event_once(
    make_policy, approver, now
):
    make_policy(batch_size=2)
    held = expired(now, tenant_id="held")
    api.place_hold(reason="audit", placed_by=approver, tenant_id="held", now=now)
    for _ in range(5):
        expired(now)

    def twice(queue: Queue, payload: dict[str, Any]) -> None:
        queue.run_batch(payload)
        queue.run_batch(payload)

    first, _ = queued(now, twice)

    # One page, deleted by a worker that dies before finalizing it.
    for _ in range(2):
        expired(now)
    crashed: list[str] = []

    def crash_then_redeliver(queue: Queue, payload: dict[str, Any]) -> None:
        if not crashed:
            crashed.append(payload["token"])
            with pytest.raises(ConnectionError):
                queue.run_batch(payload, disposer=DiesAfterDelete(ConnectionError))
        queue.run_batch(payload)

    second, _ = queued(now + timedelta(hours=1), crash_then_redeliver)

    assert first.status == second.status == RunStatus.FINISHED
    assert (first.deleted, first.skipped_held) == (5, 1)
    assert (second.deleted, second.already_absent, second.skipped_held) == (0, 2, 1)
    assert recorded(first, EventOutcome.DELETED) == 5
    assert recorded(second, EventOutcome.ALREADY_ABSENT) == 2
    skips = DeletionEvent.objects.filter(record=held, outcome=EventOutcome.SKIPPED_HELD)
    assert sorted(skips.values_list("run", flat=True)) == sorted([first.pk, second.pk])
    assert "Checked 2 runs against their events." in verify_runs()


# --------------------------------------------------------------------------
# Model rows: per-row and per-page evidence, deleted and redacted


def _logs(now: datetime, *, tenant: str, count: int, age_days: int = 40) -> None:
    RequestLog.objects.bulk_create(
        RequestLog(
            tenant_id=tenant, path=f"/{tenant}/{i}", created_at=now - timedelta(days=age_days + i)
        )
        for i in range(count)
    )


def _enforce_rows(now: datetime, data_class: str, **start: Any) -> Run:
    run = engine.run_start(mode=RunMode.ENFORCE, data_classes=[data_class], now=now, **start)
    return engine.run_execute(run=run, clock=lambda: now)


def _two_runs(now: datetime, data_class: str) -> tuple[Run, Run]:
    """An enforcing run at ``now``, and the next a day later."""
    return _enforce_rows(now, data_class), _enforce_rows(now + timedelta(days=1), data_class)


@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_verify_runs__model_rows_held_skips_are_recorded_and_counted_by_every_run(
    register_logs, make_policy, author, now, evidence
):
    register_logs(evidence=evidence)
    make_policy("logs.request", timedelta(days=30), batch_size=2)
    _logs(now, tenant="t1", count=3)
    _logs(now, tenant="t2", count=3)
    api.place_hold(reason="litigation", placed_by=author, tenant_id="t2", now=now)

    first, second = _two_runs(now, "logs.request")

    assert (first.deleted, first.skipped_held) == (3, 3)
    assert (second.deleted, second.skipped_held) == (0, 3)
    assert recorded(first, EventOutcome.SKIPPED_HELD) == 3
    assert recorded(second, EventOutcome.SKIPPED_HELD) == 3
    if evidence == "per_batch":
        assert DeletionEvent.objects.filter(row_count__gt=1).exists()
    assert "Checked 2 runs against their events." in verify_runs()


def test_verify_runs__a_run_stopped_by_its_limit_counts_only_the_held_rows_it_reached(
    register_logs, make_policy, author, now
):
    register_logs()
    make_policy("logs.request", timedelta(days=30), batch_size=2)
    _logs(now, tenant="t1", count=2, age_days=60)  # the oldest: the first page
    _logs(now, tenant="t2", count=3)
    api.place_hold(reason="litigation", placed_by=author, tenant_id="t2", now=now)

    run = _enforce_rows(now, "logs.request", limit=2)

    assert run.status == RunStatus.STOPPED
    assert (run.deleted, run.skipped_held) == (2, 0)
    assert "Checked 1 run against their events." in verify_runs()


def test_verify_runs__redacted_rows_and_a_held_row_skipped_again_agree(
    register_accounts, make_policy, author, now
):
    register_accounts()
    make_policy("accounts.redact", timedelta(days=90), batch_size=2, disposition="redact")
    closed = now - timedelta(days=100)
    accounts = [
        Account.objects.create(tenant_id="t1", name=f"A{i}", email=f"a{i}@x.test", closed_at=closed)
        for i in range(3)
    ]
    api.place_hold(reason="dispute", placed_by=author, subject=accounts[0], now=now)

    # The held row is listed as skipped; the next run looks at it again.
    first, second = _two_runs(now, "accounts.redact")

    assert (first.redacted, first.skipped_held) == (2, 1)
    assert (second.redacted, second.skipped_held) == (0, 1)
    assert recorded(second, EventOutcome.SKIPPED_HELD) == 1
    assert "Checked 2 runs against their events." in verify_runs()


def test_verify_runs__protected_rows_are_recorded_by_every_run_that_skips_them(
    row_registry, make_policy, now
):
    api.register_model(Account, data_class="accounts.closed", age_field="closed_at")
    make_policy("accounts.closed", timedelta(days=90), batch_size=10)
    closed = now - timedelta(days=100)
    blocked = Account.objects.create(tenant_id="t1", name="B", email="b@x.test", closed_at=closed)
    Invoice.objects.create(account=blocked, amount=10)
    Account.objects.create(tenant_id="t1", name="F", email="f@x.test", closed_at=closed)

    first, second = _two_runs(now, "accounts.closed")

    assert (first.deleted, first.skipped_protected) == (1, 1)
    assert (second.deleted, second.skipped_protected) == (0, 1)
    assert recorded(second, EventOutcome.SKIPPED_PROTECTED) == 1
    assert "Checked 2 runs against their events." in verify_runs()


def test_verify_runs__rows_whose_objects_could_not_be_deleted_are_failed_with_events(
    register_shipments, make_policy, now, monkeypatch
):
    register_shipments()
    make_policy("pod.shipment", timedelta(days=30))
    old = now - timedelta(days=40)
    store = storages["default"]
    stuck = store.save("proofs/stuck.pdf", ContentFile(b"s"))
    Shipment.objects.create(tenant_id="t1", proof=stuck, delivered_at=old)
    Shipment.objects.create(
        tenant_id="t1", proof=store.save("proofs/gone.pdf", ContentFile(b"g")), delivered_at=old
    )
    delete = type(store).delete

    def refuse_stuck(self: Any, name: str) -> None:
        if name == stuck:
            raise OSError("device busy")
        delete(self, name)

    monkeypatch.setattr(type(store), "delete", refuse_stuck)

    run = _enforce_rows(now, "pod.shipment")

    assert (run.deleted, run.failed) == (1, 1)
    assert recorded(run, EventOutcome.FAILED) == 1
    assert Shipment.objects.get().proof.name == stuck
    assert "Checked 1 run against their events." in verify_runs()


# --------------------------------------------------------------------------
# Disagreements


@pytest.mark.parametrize("count", ["deleted", "skipped_held"])
def test_verify_runs__a_tampered_count_names_its_run(make_policy, approver, now, count):
    make_policy()
    expired(now, tenant_id="held")
    expired(now)
    api.place_hold(reason="audit", placed_by=approver, tenant_id="held", now=now)
    enforce(now=now)
    expired(now)
    victim = enforce(now=now + timedelta(hours=1))
    before = getattr(victim, count)
    assert before == 1
    Run.objects.filter(pk=victim.pk).update(**{count: F(count) + 1})

    error = disagreement()

    assert str(error) == (
        f"counts disagree with events: run {victim.pk}: {count} is 2, its events say 1"
    )


def test_verify_runs__a_removed_event_names_its_run(make_policy, approver, now):
    make_policy()
    expired(now, tenant_id="held")
    api.place_hold(reason="audit", placed_by=approver, tenant_id="held", now=now)
    run = enforce(now=now)
    DeletionEvent.objects.filter(run=run, outcome=EventOutcome.SKIPPED_HELD).delete()

    assert str(disagreement()) == (
        f"counts disagree with events: run {run.pk}: skipped_held is 1, its events say 0"
    )


def test_verify_runs__dry_runs_and_reconciliations_are_checked_running_runs_are_not(
    make_policy, approver, now
):
    make_policy(enforce=False)
    expired(now, tenant_id="held")
    api.place_hold(reason="audit", placed_by=approver, tenant_id="held", now=now)
    report = dry_run(now=now)
    assert report.skipped_held == 1  # measured: a dry run records no events
    # Counts no event backs: a run still running; and a reconciliation, whose
    # figures live in its report (none missing here, so it agrees).
    for mode, status in ((RunMode.ENFORCE, RunStatus.RUNNING), (RunMode.RECONCILE, "finished")):
        Run.objects.create(
            trigger=RunTrigger.COMMAND,
            mode=mode,
            status=status,
            started_at=now,
            cutoff=now,
            deleted=4,
        )

    output = verify_runs()

    assert "Checked 2 runs against their events (1 not checked" in output
    Run.objects.filter(pk=report.pk).update(failed=1)
    assert str(disagreement()).endswith(f"run {report.pk}: failed is 1, its events say 0")


def test_verify_runs__refuses_the_chain_check_options():
    with pytest.raises(CommandError, match="--runs checks every closed run"):
        call_command("retention_verify", "--runs", "--since", "2026-01-01T00:00Z")


def test_verify_runs__a_reconciliation_counts_its_missing_records_as_their_events(make_policy, now):
    make_policy()
    lost = put_tracked(now=now)
    storages["default"].delete(lost.object_key)
    reconciliation = engine.reconcile_run(now=now)
    assert reconciliation.report["counts"]["missing"] == 1
    assert "Checked 1 run against their events" in verify_runs()

    DeletionEvent.objects.filter(run=reconciliation, outcome=EventOutcome.MISSING).delete()

    assert str(disagreement()) == (
        f"counts disagree with events: run {reconciliation.pk}: missing is 1, its events say 0"
    )


def test_verify_runs__names_every_run_that_disagrees_and_exits_1(make_policy, approver, now):
    make_policy()
    expired(now, tenant_id="held")
    api.place_hold(reason="audit", placed_by=approver, tenant_id="held", now=now)
    first = enforce(now=now)
    good = enforce(now=now + timedelta(hours=1))
    expired(now)
    last = enforce(now=now + timedelta(hours=2))
    assert (first.skipped_held, good.skipped_held, last.deleted) == (1, 1, 1)
    Run.objects.filter(pk=first.pk).update(skipped_held=F("skipped_held") + 2)
    Run.objects.filter(pk=last.pk).update(deleted=5, skipped_held=0)
    err = StringIO()

    with pytest.raises(CommandError) as excinfo:
        call_command("retention_verify", "--runs", stdout=StringIO(), stderr=err)

    assert excinfo.value.returncode == 1
    assert str(excinfo.value) == (
        f"counts disagree with events in 2 runs: run {first.pk}: skipped_held is 3, "
        f"its events say 1; run {last.pk}: deleted is 5, its events say 1; "
        f"run {last.pk}: skipped_held is 0, its events say 1"
    )
    assert err.getvalue().splitlines() == [
        f"counts disagree with events: run {first.pk}: skipped_held is 3, its events say 1",
        f"counts disagree with events: run {last.pk}: deleted is 5, its events say 1",
        f"counts disagree with events: run {last.pk}: skipped_held is 0, its events say 1",
    ]
    assert str(good.pk) not in str(excinfo.value) + err.getvalue()
