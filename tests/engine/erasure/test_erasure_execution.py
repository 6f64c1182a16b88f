"""Approved erasure requests executed by the engine as runs of mode ``erase`` (issue 29, point 3).

Everything of the subject within the frozen scope goes (or is redacted),
whatever the class's enforcement mode; items written after receipt, other
subjects' items and items under a hold stay; the request completes only when
a final re-query finds nothing left, and a released hold lets it go on.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.files.storage import storages
from django.core.management import call_command

from retention import api
from retention.digest import subject_digest
from retention.engine.erasure import erasures_execute
from retention.models import (
    DeletionEvent,
    ErasureState,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
)
from retention.receipts.certificate import certificate_problems
from retention.selectors.erasure_execution import erasures_due
from tests.engine.erasure.conftest import BASIS, track
from tests.rowhost.models import Account

pytestmark = pytest.mark.django_db


def _execute(at: datetime) -> list[Run]:
    return erasures_execute(clock=lambda: at)


def _states(records: list[RetentionRecord]) -> list[str]:
    return [RetentionRecord.objects.get(pk=r.pk).state for r in records]


def test_erase__the_subjects_items_go_everywhere_and_the_request_completes_verified(
    host, approved, now
):
    request = approved()
    later = now + timedelta(minutes=5)

    runs = _execute(later)

    assert [(r.mode, r.status, r.erasure_id) for r in runs] == [
        (RunMode.ERASE, RunStatus.FINISHED, request.pk)
    ]
    # Photos are report-only: an approved request acts on them all the same.
    assert _states(host["photos"]) == [RecordState.DELETED] * 4
    assert not any(storages["default"].exists(r.object_key) for r in host["photos"])
    assert RetentionRecord.objects.get(pk=host["bob"].pk).state == RecordState.ACTIVE
    ann, bob = (Account.objects.get(pk=a.pk) for a in host["accounts"])
    assert (ann.name, ann.email == "ann@x.test") == ("[redacted]", False)
    assert (bob.name, bob.email) == ("Bob", "bob@x.test")
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED
    assert request.completed_at == request.verified_at == later
    classes = request.outcome["classes"]
    assert (classes["idv.photo"]["erased"], classes["idv.photo"]["left"]) == (4, 0)
    assert (classes["accounts.redact"]["redacted"], classes["accounts.redact"]["left"]) == (1, 0)
    assert (classes["billing.invoice"]["on_erasure"], classes["billing.invoice"]["basis"]) == (
        "keep",
        BASIS,
    )
    assert "logs.request" not in classes  # no subject link: its scope says so
    certificate = api.erasure_certificate(request)
    assert certificate_problems(certificate) == []
    assert (certificate["state"], certificate["totals"]["erased"]) == ("completed", 4)
    assert "ann@x.test" not in json.dumps(certificate)
    events = DeletionEvent.objects.filter(run__erasure=request)
    assert set(events.values_list("outcome", flat=True)) == {
        EventOutcome.DELETED,
        EventOutcome.REDACTED,
    }
    # Done: nothing is due any more, and running again changes nothing.
    assert erasures_due(now=later) == []
    assert _execute(later + timedelta(minutes=1)) == []


def test_erase__items_written_after_receipt_stay(host, approved, now):
    request = approved()
    after = track("acme/new.jpg", "ann@x.test")

    _execute(now + timedelta(minutes=5))

    assert RetentionRecord.objects.get(pk=after.pk).state == RecordState.ACTIVE
    assert storages["default"].exists(after.object_key)
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED


def test_erase__a_hold_keeps_its_items_until_released_then_the_request_completes(
    host, approved, author, now
):
    held = host["photos"][0]
    hold = api.place_hold(reason="Litigation 2026-7", placed_by=author, record=held, now=now)
    request = approved()

    _execute(now + timedelta(minutes=5))

    request.refresh_from_db()
    assert request.state == ErasureState.PARTIALLY_COMPLETED
    assert request.verified_at is None
    photos = request.outcome["classes"]["idv.photo"]
    assert photos["erased"] == 3
    partial = api.erasure_certificate(request)
    assert (partial["state"], partial["totals"]["kept"]) == ("partially_completed", 1)
    assert photos["kept"] == [{"hold": hold.pk, "count": 1, "reason": "Litigation 2026-7"}]
    assert RetentionRecord.objects.get(pk=held.pk).state == RecordState.ACTIVE
    assert DeletionEvent.objects.filter(
        run__erasure=request, record=held, outcome=EventOutcome.SKIPPED_HELD
    ).exists()
    # Not due again while the hold stands.
    assert erasures_due(now=now + timedelta(minutes=6)) == []

    api.release_hold(hold, released_by=author, reason="settled", now=now + timedelta(days=1))
    assert erasures_due(now=now + timedelta(days=1)) == [request]
    _execute(now + timedelta(days=1, minutes=1))

    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED
    assert request.verified_at == now + timedelta(days=1, minutes=1)
    assert RetentionRecord.objects.get(pk=held.pk).state == RecordState.DELETED


def test_erase__an_unknown_subject_completes_at_once(host, approved, now):
    request = approved(subject_id="nobody@x.test")

    # Completed when approved: nothing to run.
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED
    assert request.completed_at == request.verified_at == now
    assert _execute(now + timedelta(minutes=1)) == []
    assert request.outcome["classes"]["idv.photo"]["erased"] == 0
    # The certificate says nothing was found.
    assert api.erasure_certificate(request)["totals"]["found"] == 0


def test_erase__an_offboarding_waits_for_its_grace_period(host, approved, now):
    grace = now + timedelta(days=14)
    request = approved(subject_id=None, tenant_id="globex", not_before=grace)

    assert _execute(grace - timedelta(minutes=1)) == []
    assert _states(host["photos"][3:]) == [RecordState.ACTIVE]

    _execute(grace)
    assert _states(host["photos"][3:]) == [RecordState.DELETED]
    assert _states(host["photos"][:3]) == [RecordState.ACTIVE] * 3
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED


def test_erase__beyond_the_frozen_scope_the_class_is_held_and_nothing_of_it_goes(
    host, approved, now
):
    request = approved(data_classes=["idv.photo"])
    # Bob's photo (within the bound) comes to carry Ann's digest after receipt.
    RetentionRecord.objects.filter(pk=host["bob"].pk).update(
        subject_digest=subject_digest("ann@x.test")
    )

    (run,) = _execute(now + timedelta(minutes=5))

    assert run.report["breaker"]["idv.photo"]["held"] is True
    assert run.report["breaker"]["idv.photo"]["frozen"] == 4
    assert _states(host["photos"]) == [RecordState.ACTIVE] * 4
    request.refresh_from_db()
    assert request.state == ErasureState.EXECUTING


def test_run_retention__executes_due_erasures_before_its_own_sweep(host, approved, now):
    request = approved()
    out = StringIO()

    call_command("run_retention", stdout=out, stderr=StringIO())

    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED
    assert f"Erasure request {request.pk}: run " in out.getvalue()
    assert Run.objects.filter(mode=RunMode.ENFORCE).count() == 1


def test_run_retention__erasures_alone_as_json(host, approved, now):
    request = approved()
    out = StringIO()

    call_command("run_retention", "--erasures", "--json", stdout=out, stderr=StringIO())

    (run,) = json.loads(out.getvalue())["erasures"]
    assert (run["mode"], run["status"]) == ("erase", "finished")
    assert run["counts"]["deleted"] == 4
    assert not Run.objects.filter(mode=RunMode.ENFORCE).exists()
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED


def test_run_retention__erasures_refuses_dry_run(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no dry run"):
        call_command("run_retention", "--erasures", "--dry-run", stdout=StringIO())


def test_approve__publishes_the_execution_once_committed(
    host, requester, erasure_approver, now, monkeypatch, django_capture_on_commit_callbacks
):
    published: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(
        "retention.services.erasure.publish_task",
        lambda func, payload, name: published.append((func, payload)),
    )
    request = api.request_erasure(requested_by=requester, reason="Art. 17", subject_id="ann@x.test")

    with django_capture_on_commit_callbacks(execute=True):
        api.approve_erasure(request, approver=erasure_approver)
        assert published == []

    assert published == [("retention.tasks.erasure_execute", {"erasure_id": str(request.pk)})]


def test_task__starts_a_queued_erase_run_for_each_due_request(host, approved, now):
    from retention import tasks
    from retention.models import RunExecutor

    request = approved()

    assert tasks.erasure_execute({"erasure_id": str(request.pk)}) == 1

    run = Run.objects.get(erasure=request)
    assert (run.mode, run.executor, run.status) == (RunMode.ERASE, RunExecutor.QUEUE, "running")
    request.refresh_from_db()
    assert request.state == ErasureState.EXECUTING
    # Its run is running: not due again, so a second delivery starts nothing.
    assert tasks.erasure_execute({"erasure_id": str(request.pk)}) == 0


def test_erase__rows_of_a_deleting_class_go_and_the_re_query_finds_none(
    make_policy, register_accounts, requester, erasure_approver, now
):
    register_accounts(subject_field="email")
    make_policy("accounts.redact", timedelta(days=90), on_erasure="delete", enforce=False)
    ann = Account.objects.create(tenant_id="acme", name="Ann", email="ann@x.test")
    bob = Account.objects.create(tenant_id="acme", name="Bob", email="bob@x.test")
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )
    api.approve_erasure(request, approver=erasure_approver, now=now)

    (run,) = _execute(now + timedelta(minutes=1))

    assert (run.deleted, run.status) == (1, RunStatus.FINISHED)
    assert not Account.objects.filter(pk=ann.pk).exists()
    assert Account.objects.filter(pk=bob.pk).exists()
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED
    assert request.outcome["classes"]["accounts.redact"]["erased"] == 1


def test_erase__rows_redacted_before_by_retention_count_as_done(
    make_policy, register_accounts, requester, erasure_approver, now
):
    from tests.helpers import enforce

    register_accounts(subject_field="id")
    make_policy("accounts.redact", timedelta(days=90), disposition="redact")
    ann = Account.objects.create(
        tenant_id="acme", name="Ann", email="ann@x.test", closed_at=now - timedelta(days=365)
    )
    enforce(now=now)
    assert Account.objects.get(pk=ann.pk).name == "[redacted]"
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id=ann.pk, now=now
    )
    api.approve_erasure(request, approver=erasure_approver, now=now)

    (run,) = _execute(now + timedelta(minutes=1))

    assert run.status == RunStatus.FINISHED
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED
    assert request.outcome["classes"]["accounts.redact"]["left"] == 0
    assert api.erasure_certificate(request)["state"] == "completed"


def test_erase__the_kill_switch_stops_it_until_resumed(host, approved, author, now):
    request = approved()
    api.pause(by=author, reason="incident 77", now=now)

    assert _execute(now + timedelta(minutes=1)) == []
    assert set(_states(host["photos"])) == {RecordState.ACTIVE}
    assert not Run.objects.filter(erasure=request).exists()
    request.refresh_from_db()
    assert request.state == ErasureState.APPROVED

    api.resume(by=author, now=now + timedelta(minutes=2))
    _execute(now + timedelta(minutes=3))
    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED


def test_watchdog__starts_the_due_requests_on_the_queue(host, approved, now):
    from retention import tasks
    from retention.models import RunExecutor

    request = approved()

    tasks.runs_resume()

    run = Run.objects.get(erasure=request)
    assert (run.executor, run.status) == (RunExecutor.QUEUE, RunStatus.RUNNING)
