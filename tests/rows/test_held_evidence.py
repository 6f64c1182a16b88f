"""Held rows' evidence (issue 25): counts equal their events, and evidence grows
with holds, not with runs.

A tenant hold over every row class with a tenant, row holds by model and
primary key (one of them on a row the tenant hold covers too), and a
data-class hold; ``per_row`` and ``per_batch`` evidence; a plain class (on
PostgreSQL, the one-statement delete and its second lane), a class with
``files=``, a redacting class; inline and queued runs. Each run's
``skipped_held`` must equal the rows its skipped_held events count, and a
second run over the same held rows must add no row key and a bounded number
of events.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command

from retention import api, engine, redaction
from retention.engine import BATCH_TASK
from retention.guard import GuardReading
from retention.models import (
    DeletionEvent,
    EventKind,
    EventOutcome,
    LegalHold,
    RowEventKey,
    Run,
    RunMode,
    RunStatus,
    RunTrigger,
)
from tests.helpers import chain_ok
from tests.rowhost.models import Account, RequestLog, Shipment, WebSession

pytestmark = pytest.mark.django_db(transaction=True)

CLASSES = ["logs.request", "web.session", "pod.shipment", "accounts.redact"]
TENANTS = ("t1", "t2", "t3")


def _register(evidence: str) -> None:
    api.register_model(
        RequestLog,
        data_class="logs.request",
        age_field="created_at",
        tenant_field="tenant_id",
        evidence=evidence,
    )
    api.register_model(
        WebSession,
        data_class="web.session",
        age_field="created_at",
        tenant_field="tenant_id",
        evidence=evidence,
    )
    api.register_model(
        Shipment,
        data_class="pod.shipment",
        age_field="delivered_at",
        tenant_field="tenant_id",
        files=("proof",),
        evidence=evidence,
    )
    api.register_model(
        Account,
        data_class="accounts.redact",
        age_field="closed_at",
        tenant_field="tenant_id",
        redact={"name": redaction.Constant("[redacted]"), "email": redaction.Digest()},
        evidence=evidence,
    )


def _seed(now: datetime) -> dict[str, Any]:
    old = now - timedelta(days=100)
    RequestLog.objects.bulk_create(
        RequestLog(
            tenant_id=TENANTS[i % 3],
            path=f"/old/{i}",
            created_at=old - timedelta(minutes=i // 2),
        )
        for i in range(60)
    )
    WebSession.objects.bulk_create(
        WebSession(tenant_id=TENANTS[i % 3], created_at=old - timedelta(minutes=i))
        for i in range(12)
    )
    store = storages["default"]
    for i in range(9):
        name = store.save(f"proofs/p{i}.pdf", ContentFile(b"p"))
        Shipment.objects.create(
            tenant_id=TENANTS[i % 3], proof=name, delivered_at=old - timedelta(minutes=i)
        )
    for i in range(9):
        Account.objects.create(
            tenant_id=TENANTS[i % 3],
            name=f"A{i}",
            email=f"a{i}@x.test",
            closed_at=old - timedelta(minutes=i),
        )
    return {
        "log_t1": RequestLog.objects.filter(tenant_id="t1").order_by("pk")[3],
        "log_t2": RequestLog.objects.filter(tenant_id="t2").order_by("pk")[0],
        "shipment_t3": Shipment.objects.filter(tenant_id="t3").order_by("pk")[0],
        "account_t1": Account.objects.filter(tenant_id="t1").order_by("pk")[0],
    }


def _holds(author: Any, rows: dict[str, Any], now: datetime) -> list[LegalHold]:
    return [
        # Every class with a tenant: four here (two of them row classes that delete).
        api.place_hold(reason="litigation", placed_by=author, tenant_id="t2", now=now),
        api.place_hold(reason="sessions", placed_by=author, data_class="web.session", now=now),
        *(
            api.place_hold(reason=f"row {name}", placed_by=author, subject=row, now=now)
            for name, row in rows.items()
        ),
    ]


def _expected_held() -> dict[str, int]:
    return {
        # t2's 20 rows (one of them also held by its own row hold), and one t1 row.
        "logs.request": 21,
        "web.session": 12,
        "pod.shipment": 3 + 1,
        "accounts.redact": 3 + 1,
    }


def _quiet(*, now: datetime) -> GuardReading:
    return GuardReading(over_budget=False, value=0.0, budget=30.0, detail="")


def _inline(now: datetime) -> Run:
    run = engine.run_start(mode=RunMode.ENFORCE, data_classes=CLASSES, now=now)
    run = engine.run_execute(run=run, clock=lambda: now)
    run.refresh_from_db()
    return run


def _queued(now: datetime) -> Run:
    def publish(func: str, payload: dict[str, Any], name: str) -> None:
        if func == BATCH_TASK:
            engine.batch_dispose(payload=payload, clock=lambda: now, publish=publish, guard=_quiet)

    run = engine.run_enqueue(
        mode=RunMode.ENFORCE,
        trigger=RunTrigger.COMMAND,
        data_classes=CLASSES,
        now=now,
        publish=publish,
    )
    engine.run_dispatch(run_id=run.pk, clock=lambda: now, publish=publish, guard=_quiet)
    run.refresh_from_db()
    return run


EXECUTORS: dict[str, Callable[[datetime], Run]] = {"inline": _inline, "queued": _queued}


def _held_recorded(run: Run) -> dict[str, int]:
    """Per class, the rows the run's skipped_held events count."""
    counted: dict[str, int] = {}
    for event in DeletionEvent.objects.filter(run=run, outcome=EventOutcome.SKIPPED_HELD):
        n = event.row_count if event.kind == EventKind.ROW and event.row_count else 1
        counted[event.data_class] = counted.get(event.data_class, 0) + n
    return counted


def _verify_runs() -> str:
    out = StringIO()
    call_command("retention_verify", "--runs", stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.parametrize("executor", ["inline", "queued"])
@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_held__skipped_held_equals_its_events_under_tenant_class_and_row_holds(
    row_registry: Any, make_policy: Any, author: Any, now: datetime, evidence: str, executor: str
):
    _register(evidence)
    for name in CLASSES:
        disposition = "redact" if name == "accounts.redact" else "delete"
        make_policy(name, timedelta(days=30), batch_size=4, disposition=disposition)
    rows = _seed(now)
    _holds(author, rows, now)
    run_once = EXECUTORS[executor]

    first = run_once(now)
    second = run_once(now + timedelta(days=1))

    for run in (first, second):
        assert run.status == RunStatus.FINISHED
        assert _held_recorded(run) == _expected_held()
        assert run.skipped_held == sum(_expected_held().values())
    assert (first.deleted, first.redacted) == (39 + 5, 5)
    assert (second.deleted, second.redacted) == (0, 0)
    # What the holds keep is still there, whatever the path.
    assert RequestLog.objects.count() == 21
    assert WebSession.objects.count() == 12
    assert Shipment.objects.count() == 4
    assert Account.objects.filter(name__startswith="A").count() == 4
    assert "Run counts agree with their events." in _verify_runs()
    chain_ok()


@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_held__a_second_run_over_the_same_held_rows_adds_no_row_key_and_a_few_events(
    row_registry: Any, make_policy: Any, author: Any, now: datetime, evidence: str
):
    _register(evidence)
    for name in CLASSES:
        disposition = "redact" if name == "accounts.redact" else "delete"
        make_policy(name, timedelta(days=30), batch_size=4, disposition=disposition)
    rows = _seed(now)
    holds = _holds(author, rows, now)
    _inline(now)
    keys, events = RowEventKey.objects.count(), DeletionEvent.objects.count()

    second = _inline(now + timedelta(days=1))
    third = _inline(now + timedelta(days=2))

    assert RowEventKey.objects.count() == keys
    added = DeletionEvent.objects.filter(run__in=[second, third])
    assert DeletionEvent.objects.count() == events + added.count()
    for run in (second, third):
        held = DeletionEvent.objects.filter(run=run)
        assert set(held.values_list("outcome", flat=True)) == {EventOutcome.SKIPPED_HELD}
        # Bounded by classes x holds (a hold over many tenants: per tenant of it).
        assert held.count() <= len(CLASSES) * len(holds) * len(TENANTS)
        assert run.skipped_held == sum(_expected_held().values())
    assert "Run counts agree with their events." in _verify_runs()
