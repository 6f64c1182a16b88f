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

import hashlib
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.db import transaction

from retention import api, engine
from retention.digest import key_digest
from retention.engine import BATCH_TASK
from retention.engine.guard import GuardReading
from retention.engine.rows.evidence import RowEvents
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
from retention.receipts import evidence
from retention.receipts.verify import verify_receipt
from retention.rows.registry import row_class_required
from retention.selectors.evidence import chain_head, receipt_for
from retention.selectors.run_rules import run_rules
from tests.helpers import chain_ok, put_tracked
from tests.rowhost.models import Account, RequestLog, Shipment, WebSession

pytestmark = pytest.mark.django_db(transaction=True)

CLASSES = ["logs.request", "web.session", "pod.shipment", "accounts.redact"]
TENANTS = ("t1", "t2", "t3")
PERIOD = timedelta(days=30)


@pytest.fixture
def register(
    register_logs: Any, register_shipments: Any, register_accounts: Any
) -> Callable[[str], None]:
    """``register(evidence)``: the four classes of ``CLASSES``, their events ``evidence``."""

    def register_all(evidence: str) -> None:
        register_logs(evidence=evidence)
        api.register_model(
            WebSession,
            data_class="web.session",
            age_field="created_at",
            tenant_field="tenant_id",
            evidence=evidence,
        )
        register_shipments(tenant_field="tenant_id", evidence=evidence)
        register_accounts(evidence=evidence)

    return register_all


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
    engine.run_arm(run_id=run.pk, clock=lambda: now, publish=publish, guard=_quiet)
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
    register: Any, make_policy: Any, author: Any, now: datetime, evidence: str, executor: str
):
    register(evidence)
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
    register: Any, make_policy: Any, author: Any, now: datetime, evidence: str
):
    register(evidence)
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
        # Here: logs (t2's hold, one row's), sessions (t2's hold, the class
        # hold for t1 and t3), shipments and accounts (t2's hold, one row's).
        assert held.count() == 2 + 3 + 2 + 2
        assert run.skipped_held == sum(_expected_held().values())
    assert "Run counts agree with their events." in _verify_runs()


def _subject(label: str, pk: Any, at: datetime) -> bytes:
    return evidence.subject_leaf(key_digest(f"{label}:{pk}"), evidence.stamp(at + PERIOD))


@pytest.fixture
def logs(register_logs: Any, make_policy: Any) -> None:
    register_logs()
    make_policy("logs.request", PERIOD, batch_size=3)
    old = datetime(2026, 1, 1, tzinfo=UTC)
    RequestLog.objects.bulk_create(
        RequestLog(tenant_id=TENANTS[i % 3], path=f"/{i}", created_at=old - timedelta(hours=i))
        for i in range(9)
    )


def test_held__a_row_under_several_holds_counts_once_under_the_oldest(
    logs: None, author: Any, now: datetime
):
    row = RequestLog.objects.filter(tenant_id="t2").order_by("pk").first()
    assert row is not None
    first = api.place_hold(reason="one row", placed_by=author, subject=row, now=now)
    later = api.place_hold(reason="tenant", placed_by=author, tenant_id="t2", now=now)
    everything = api.place_hold(
        reason="class", placed_by=author, data_class="logs.request", now=now + timedelta(hours=1)
    )

    run = _inline_one(now, "logs.request")

    held = DeletionEvent.objects.filter(run=run, outcome=EventOutcome.SKIPPED_HELD)
    assert sorted(held.values_list("reason", "tenant_id", "row_count")) == sorted(
        [
            (f"legal hold applies (hold {everything.pk})", "t1", 3),
            (f"legal hold applies (hold {everything.pk})", "t3", 3),
            (f"legal hold applies (hold {first.pk})", "t2", 1),
            (f"legal hold applies (hold {later.pk})", "t2", 2),
        ]
    )
    assert run.skipped_held == 9
    assert RequestLog.objects.count() == 9


def test_held__its_event_commits_to_the_held_rows_and_verifies_offline(
    logs: None, author: Any, now: datetime
):
    hold = api.place_hold(reason="tenant", placed_by=author, tenant_id="t1", now=now)

    run = _inline_one(now, "logs.request")

    event = DeletionEvent.objects.get(run=run, outcome=EventOutcome.SKIPPED_HELD)
    rows = RequestLog.objects.filter(tenant_id="t1").order_by("created_at", "pk")
    leaves = [
        _subject("rowhost.RequestLog", pk, at) for pk, at in rows.values_list("pk", "created_at")
    ]
    # An auditor holding the table recomputes the root the event carries.
    assert (event.kind, event.evidence, event.row_count) == (EventKind.ROW, "held", 3)
    assert event.key_digest == evidence.merkle_root(leaves).hex()
    assert (event.tenant_id, event.reason) == ("t1", f"legal hold applies (hold {hold.pk})")
    assert (event.first_pk, event.last_pk, event.row_subjects) == ("", "", None)
    assert verify_receipt(receipt_for(event), chain_head()) == []
    # Tampering with its count is detected, offline and by the chain walk.
    receipt = receipt_for(event)
    receipt["event"]["row_count"] = 2
    assert verify_receipt(receipt, chain_head()) != []
    chain_ok()


def test_held__old_per_row_held_events_and_new_ones_both_verify(
    logs: None, author: Any, now: datetime
):
    """A run recorded before issue 25 (a per-row page event of its held rows)
    and one after it: the chain walk and ``--runs`` accept both."""
    api.place_hold(reason="tenant", placed_by=author, tenant_id="t1", now=now)
    old_run = engine.run_start(mode=RunMode.ENFORCE, data_classes=["logs.request"], now=now)
    rules = run_rules(old_run)["logs.request"]
    rows = list(
        RequestLog.objects.filter(tenant_id="t1")
        .order_by("created_at", "pk")
        .values_list("pk", "created_at", "tenant_id")
    )
    with transaction.atomic():
        page = RowEvents(run=old_run, row=row_class_required("logs.request"), rules=rules, now=now)
        page.add(EventOutcome.SKIPPED_HELD, rows, reason="legal hold applies")
        page.append(counts=Counter(skipped_held=len(rows)))
    engine.run_finish(old_run, RunStatus.FINISHED, "", now)

    new_run = _inline_one(now + timedelta(days=1), "logs.request")

    shapes = DeletionEvent.objects.filter(outcome=EventOutcome.SKIPPED_HELD).order_by("id")
    assert [(e.run_id, e.evidence, e.row_count) for e in shapes] == [
        (old_run.pk, "per_row", 3),
        (new_run.pk, "held", 3),
    ]
    # The same rows, the same root: both name each row by its digest and deadline.
    assert shapes[0].key_digest == shapes[1].key_digest
    assert "Run counts agree with their events." in _verify_runs()
    chain_ok()


def test_held__a_class_hold_over_many_tenants_gives_each_tenant_its_own_event(
    logs: None, author: Any, now: datetime
):
    api.place_hold(reason="class", placed_by=author, data_class="logs.request", now=now)

    run = _inline_one(now, "logs.request")

    for tenant in TENANTS:
        (event,) = DeletionEvent.objects.filter(run=run, tenant_id=tenant)
        rows = RequestLog.objects.filter(tenant_id=tenant).order_by("created_at", "pk")
        pairs = rows.values_list("pk", "created_at")
        leaves = [_subject("rowhost.RequestLog", pk, at) for pk, at in pairs]
        assert (event.row_count, event.key_digest) == (3, evidence.merkle_root(leaves).hex())
    assert run.skipped_held == 9


def test_held__a_stream_of_leaves_has_the_root_of_the_whole_list():
    for n in range(0, 40):
        leaves = [hashlib.sha256(str(i).encode()).digest() for i in range(n)]
        tree = evidence.MerkleStream()
        for leaf in leaves:
            tree.add(leaf)
        assert (tree.count, tree.root()) == (n, evidence.merkle_root(leaves))


def _inline_one(now: datetime, data_class: str) -> Run:
    run = engine.run_start(mode=RunMode.ENFORCE, data_classes=[data_class], now=now)
    run = engine.run_execute(run=run, clock=lambda: now)
    run.refresh_from_db()
    return run


def test_held__rows_kept_for_a_held_tracked_object_are_one_event_a_run_and_no_row_key(
    register_shipments: Any, make_policy: Any, author: Any, now: datetime
):
    register_shipments(tenant_field="tenant_id")
    make_policy("pod.shipment", PERIOD)
    make_policy("idv.photo", timedelta(days=3650))
    old = now - timedelta(days=40)
    for i in range(3):
        tracked = put_tracked(now=old, tenant_id="t1", key=f"proofs/held-{i}.pdf")
        Shipment.objects.create(tenant_id="t1", proof=tracked.object_key, delivered_at=old)
    api.place_hold(
        reason="claim 7", placed_by=author, tenant_id="t1", data_class="idv.photo", now=now
    )

    first = _inline_one(now, "pod.shipment")
    keys = RowEventKey.objects.count()
    second = _inline_one(now + timedelta(days=1), "pod.shipment")

    assert Shipment.objects.count() == 3
    assert (first.skipped_held, second.skipped_held) == (3, 3)
    assert RowEventKey.objects.count() == keys
    (event,) = DeletionEvent.objects.filter(run=second)
    assert (event.outcome, event.evidence, event.row_count, event.tenant_id) == (
        EventOutcome.SKIPPED_HELD,
        "held",
        3,
        "t1",
    )
    assert event.reason == "one of its objects is a tracked record under a legal hold"
    assert "Run counts agree with their events." in _verify_runs()
