"""Model rows through the engine: delete, redact, holds, protected rows, evidence (issue 14)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.db.models.signals import post_delete

from retention import api, redaction
from retention.digest import key_digest
from retention.engine import run_execute, run_start
from retention.models import DeletionEvent, EventKind, Policy, RowMark, RowSkip, Run
from retention.reporting import summary_lines
from retention.selectors.evidence import VerifyResult, chain_verify
from tests.helpers import row_events
from tests.rowhost.models import Account, AccountNote, Invoice, RequestLog, Ticket

pytestmark = pytest.mark.django_db


def _logs(now: datetime, *, old: int, new: int, tenant: str = "t1") -> None:
    RequestLog.objects.bulk_create(
        [
            RequestLog(tenant_id=tenant, path=f"/old/{i}", created_at=now - timedelta(days=40 + i))
            for i in range(old)
        ]
        + [
            RequestLog(tenant_id=tenant, path=f"/new/{i}", created_at=now - timedelta(days=1))
            for i in range(new)
        ]
    )


def _chain_intact() -> bool:
    verdicts = [v for v in chain_verify() if isinstance(v, VerifyResult)]
    return len(verdicts) == 1 and verdicts[0].broken is None and verdicts[0].events > 0


def _enforce(now: datetime, data_class: str) -> Run:
    run = run_start(mode="enforce", data_classes=[data_class], now=now)
    return run_execute(run=run, clock=lambda: now)


@pytest.fixture
def logs(register_logs: Any, make_policy: Any) -> Any:
    register_logs()
    return make_policy("logs.request", timedelta(days=30), batch_size=3)


def test_rows__a_run_deletes_rows_past_the_period_and_keeps_the_rest(logs: Any, now: datetime):
    _logs(now, old=7, new=2)
    old = RequestLog.objects.filter(path__startswith="/old/").values_list("pk", flat=True)
    subjects = {key_digest(f"rowhost.RequestLog:{pk}") for pk in old}

    run = _enforce(now, "logs.request")

    assert run.status == "finished"
    assert list(RequestLog.objects.values_list("path", flat=True).order_by("path")) == [
        "/new/0",
        "/new/1",
    ]
    assert (run.eligible, run.claimed, run.deleted) == (7, 7, 7)
    events = row_events(DeletionEvent.objects.filter(run=run))
    assert len(events) == 7
    assert {(e.kind, e.outcome, e.tenant_id, e.record_id) for e in events} == {
        (EventKind.ROW, "deleted", "t1", None)
    }
    # Each row is named by the keyed digest of its model label and primary key.
    assert {e.key_digest for e in events} == subjects
    assert _chain_intact()


def test_rows__a_delete_receiver_sees_every_row_as_with_queryset_delete(logs: Any, now: datetime):
    _logs(now, old=4, new=1)
    seen: list[str] = []

    def receiver(sender: Any, instance: RequestLog, **kwargs: Any) -> None:
        seen.append(instance.path)

    post_delete.connect(receiver, sender=RequestLog)
    try:
        run = _enforce(now, "logs.request")
    finally:
        post_delete.disconnect(receiver, sender=RequestLog)

    assert run.deleted == 4
    assert sorted(seen) == ["/old/0", "/old/1", "/old/2", "/old/3"]
    assert list(RequestLog.objects.values_list("path", flat=True)) == ["/new/0"]


def test_rows__the_cutoff_is_fixed_when_the_run_starts(logs: Any, now: datetime):
    _logs(now, old=2, new=0)
    run = run_start(mode="enforce", data_classes=["logs.request"], now=now)
    # A row that turns 30 days old only after the run started is not taken.
    RequestLog.objects.create(tenant_id="t1", path="/edge", created_at=now - timedelta(days=29))

    run_execute(run=run, clock=lambda: now + timedelta(days=2))

    assert list(RequestLog.objects.values_list("path", flat=True)) == ["/edge"]


def test_rows__a_replayed_run_records_nothing_twice(logs: Any, now: datetime):
    _logs(now, old=3, new=0)
    _enforce(now, "logs.request")
    second = _enforce(now, "logs.request")

    assert second.deleted == 0
    assert len(row_events(DeletionEvent.objects.all())) == 3


def test_rows__tenant_and_row_holds_keep_rows(logs: Any, author: Any, now: datetime):
    _logs(now, old=3, new=0, tenant="t1")
    _logs(now, old=2, new=0, tenant="t2")
    kept = RequestLog.objects.filter(tenant_id="t1").order_by("pk").first()
    tenant = api.place_hold(reason="litigation", placed_by=author, tenant_id="t2", now=now)
    row = api.place_hold(reason="one row", placed_by=author, subject=kept, now=now)

    run = _enforce(now, "logs.request")

    left = set(RequestLog.objects.values_list("pk", flat=True))
    assert kept.pk in left
    assert RequestLog.objects.filter(tenant_id="t2").count() == 2
    assert len(left) == 3
    assert (run.deleted, run.skipped_held) == (2, 3)
    held = row_events(DeletionEvent.objects.filter(run=run, outcome="skipped_held"))
    # One event per hold and tenant (issue 25), counting its rows.
    assert sum(e.event.row_count for e in held) == 3
    assert sorted((e.event.tenant_id, e.event.row_count, e.event.reason) for e in held) == [
        ("t1", 1, f"legal hold applies (hold {row.pk})"),
        ("t2", 2, f"legal hold applies (hold {tenant.pk})"),
    ]


def test_rows__a_data_class_hold_on_tracked_records_does_not_hold_rows_of_other_classes(
    logs: Any, author: Any, now: datetime
):
    _logs(now, old=2, new=0)
    api.place_hold(reason="photos only", placed_by=author, data_class="idv.photo", now=now)

    run = _enforce(now, "logs.request")

    assert run.deleted == 2


def test_rows__per_batch_evidence_is_one_event_per_page_with_its_range(
    register_logs: Any, make_policy: Any, now: datetime
):
    register_logs(tenant_field=None, evidence="per_batch")
    make_policy("logs.request", timedelta(days=30), batch_size=4)
    _logs(now, old=6, new=0)
    pks = list(RequestLog.objects.order_by("created_at", "pk").values_list("pk", flat=True))

    run = _enforce(now, "logs.request")

    events = list(DeletionEvent.objects.filter(run=run).order_by("id"))
    assert [(e.row_count, e.first_pk, e.last_pk) for e in events] == [
        (4, str(pks[0]), str(pks[3])),
        (2, str(pks[4]), str(pks[5])),
    ]
    assert [e.key_digest for e in events] == [
        key_digest("\n".join(str(pk) for pk in pks[:4])),
        key_digest("\n".join(str(pk) for pk in pks[4:])),
    ]
    assert run.deleted == 6
    assert _chain_intact()


@pytest.fixture
def accounts(row_registry: Any, make_policy: Any, now: datetime) -> Any:
    api.register_model(Account, data_class="accounts.closed", age_field="closed_at")
    return make_policy("accounts.closed", timedelta(days=90), batch_size=10)


def _account(n: int, closed: datetime | None) -> Account:
    return Account.objects.create(
        tenant_id="t1", name=f"A{n}", email=f"a{n}@x.test", phone="+4412345678", closed_at=closed
    )


def test_rows__the_approved_cascade_goes_and_protected_rows_are_skipped(
    accounts: Any, now: datetime
):
    closed = now - timedelta(days=100)
    free, blocked, open_ = _account(1, closed), _account(2, closed), _account(3, None)
    AccountNote.objects.create(account=free, text="note")
    ticket = Ticket.objects.create(account=free, subject="help")
    Invoice.objects.create(account=blocked, amount=10)

    run = _enforce(now, "accounts.closed")

    assert set(Account.objects.values_list("pk", flat=True)) == {blocked.pk, open_.pk}
    assert not AccountNote.objects.exists()
    ticket.refresh_from_db()
    assert ticket.account_id is None
    assert (run.deleted, run.skipped_protected, run.status) == (1, 1, "finished")
    assert len(row_events(DeletionEvent.objects.filter(run=run, outcome="skipped_protected"))) == 1


def test_rows__a_delete_outside_the_approved_cascade_rolls_back_and_stops_the_class(
    accounts: Any, now: datetime
):
    closed = now - timedelta(days=100)
    account = _account(1, closed)
    AccountNote.objects.create(account=account, text="note")
    version = accounts
    # As if Account gained its notes while the run was going (a deploy in the
    # middle of it): the run started under the approved cascade, which had
    # none. Changed before the run, the registration check skips the class
    # (tests/rows/test_registration.py).
    cascade = dict(version.cascade)
    cascade["deletes"] = [d for d in cascade["deletes"] if d["model"] != "rowhost.AccountNote"]
    run = run_start(mode="enforce", data_classes=["accounts.closed"], now=now)
    run.report["rules"]["accounts.closed"]["cascade"] = cascade
    Run.objects.filter(pk=run.pk).update(report=run.report)

    run = run_execute(run=run, clock=lambda: now)

    assert Account.objects.filter(pk=account.pk).exists()
    assert AccountNote.objects.exists()
    assert run.deleted == 0
    policy = Policy.objects.get(data_class="accounts.closed")
    assert "rowhost.AccountNote" in policy.review_reason
    assert not DeletionEvent.objects.exists()


@pytest.fixture
def redacting(register_accounts: Any, make_policy: Any) -> Any:
    register_accounts(
        redact={
            "name": redaction.Constant("[redacted]"),
            "email": redaction.Digest(),
            "phone": redaction.Mask(keep_last=2),
        }
    )
    return make_policy("accounts.redact", timedelta(days=90), batch_size=2, disposition="redact")


def test_rows__redaction_keeps_the_row_and_replaces_its_personal_fields(
    redacting: Any, now: datetime
):
    closed = now - timedelta(days=100)
    done = [_account(i, closed) for i in range(3)]
    recent = _account(9, now - timedelta(days=5))

    run = _enforce(now, "accounts.redact")

    assert (run.redacted, run.deleted) == (3, 0)
    for account in done:
        account.refresh_from_db()
        assert account.name == "[redacted]"
        assert "@" not in account.email
        assert account.phone.endswith("78") and "1234" not in account.phone
    recent.refresh_from_db()
    assert recent.name == "A9"
    assert len(row_events(DeletionEvent.objects.filter(outcome="redacted"))) == 3
    mark = RowMark.objects.get(data_class="accounts.redact")
    assert mark.through_pk == str(done[-1].pk)


def test_rows__a_redacted_row_is_never_taken_again(redacting: Any, now: datetime):
    _account(1, now - timedelta(days=100))
    _enforce(now, "accounts.redact")

    second = _enforce(now + timedelta(days=1), "accounts.redact")

    assert (second.eligible, second.redacted) == (0, 0)


def test_rows__a_held_row_is_skipped_then_redacted_once_released(
    redacting: Any, author: Any, now: datetime
):
    closed = now - timedelta(days=100)
    held = _account(1, closed)
    _account(2, closed)
    hold = api.place_hold(reason="dispute", placed_by=author, subject=held, now=now)

    first = _enforce(now, "accounts.redact")
    held.refresh_from_db()
    assert (first.redacted, held.name) == (1, "A1")
    assert RowSkip.objects.filter(subject_pk=str(held.pk)).exists()

    api.release_hold(hold, released_by=author, reason="settled", now=now)
    second = _enforce(now + timedelta(days=1), "accounts.redact")

    held.refresh_from_db()
    assert (second.redacted, held.name) == (1, "[redacted]")
    assert not RowSkip.objects.exists()


def test_rows__a_dry_run_reports_eligible_held_protected_and_related_rows(
    accounts: Any, author: Any, now: datetime
):
    closed = now - timedelta(days=100)
    a, b, c = _account(1, closed), _account(2, closed), _account(3, closed)
    AccountNote.objects.create(account=a, text="n1")
    AccountNote.objects.create(account=a, text="n2")
    Invoice.objects.create(account=b, amount=1)
    api.place_hold(reason="one", placed_by=author, subject=c, now=now)

    run = run_execute(
        run=run_start(mode="dry_run", data_classes=["accounts.closed"], now=now), clock=lambda: now
    )

    figures = run.report["per_data_class"]["accounts.closed"]
    assert (figures["eligible"], figures["held"], figures["protected"]) == (1, 1, 1)
    assert figures["related"]["deletes"]["rowhost.AccountNote"] == 2
    assert Account.objects.count() == 3


def test_rows__a_dry_run_header_counts_redactions_apart_from_deletions(
    redacting: Any, logs: Any, now: datetime
):
    _logs(now, old=2, new=1)
    for n in range(3):
        _account(n, now - timedelta(days=100))

    run = run_execute(
        run=run_start(mode="dry_run", data_classes=["accounts.redact", "logs.request"], now=now),
        clock=lambda: now,
    )

    assert run.eligible == 5
    header = next(line for line in summary_lines(run) if "Would delete" in line)
    # Rows are called rows (issue 25): the two log rows are not "records".
    assert header.startswith("  Would delete 2 expired row(s) and redact 3 row(s) (oldest")


def test_rows__a_queued_run_deletes_them_page_by_page_and_a_redelivery_does_nothing_twice(
    logs: Any, now: datetime
):
    from retention import engine
    from retention.engine.guard import GuardReading
    from retention.engine.publish import BATCH_TASK

    def quiet(*, now: datetime) -> GuardReading:
        return GuardReading(over_budget=False, value=0.0, budget=30.0, detail="")

    _logs(now, old=7, new=1)
    delivered: list[dict[str, Any]] = []

    def publish(func: str, payload: dict[str, Any], name: str) -> None:
        if func != BATCH_TASK:
            return
        delivered.append(payload)
        engine.batch_dispose(payload=payload, clock=lambda: now, publish=publish, guard=quiet)
        # At-least-once: the same batch again finds nothing to do.
        engine.batch_dispose(payload=payload, clock=lambda: now, publish=publish, guard=quiet)

    run = engine.run_enqueue(
        mode="enforce", trigger="command", data_classes=["logs.request"], now=now, publish=publish
    )
    engine.run_arm(run_id=run.pk, clock=lambda: now, publish=publish, guard=quiet)

    run.refresh_from_db()
    assert run.status == "finished"
    assert (run.eligible, run.deleted) == (7, 7)
    assert RequestLog.objects.count() == 1
    assert len(row_events(DeletionEvent.objects.filter(run=run))) == 7
    assert len(delivered) >= 3  # pages of 3


@pytest.fixture
def proofs(register_shipments: Any, make_policy: Any) -> None:
    """Shipments go with their proof files after 30 days; tracked photos stay ten years."""
    register_shipments()
    make_policy("pod.shipment", timedelta(days=30))
    make_policy("idv.photo", timedelta(days=3650))


def _shipped(name: str, body: bytes, delivered_at: datetime) -> tuple[Any, str]:
    """A shipment with its proof file written: (shipment, the file's name)."""
    from django.core.files.storage import storages

    from tests.rowhost.models import Shipment

    saved = storages["default"].save(name, ContentFile(body))
    return Shipment.objects.create(tenant_id="t1", proof=saved, delivered_at=delivered_at), saved


def test_rows__a_rows_files_go_first_and_a_tracked_record_of_the_same_object_is_closed_once(
    proofs: None, author: Any, now: datetime
):
    from django.core.files.storage import storages

    from tests.helpers import put_tracked
    from tests.rowhost.models import Shipment

    old = now - timedelta(days=40)
    tracked = put_tracked(now=old, key="proofs/tracked.pdf")
    Shipment.objects.create(tenant_id="t1", proof=tracked.object_key, delivered_at=old)
    _, plain_name = _shipped("proofs/plain.pdf", b"p", old)
    # Its object is gone already: absent is a success.
    Shipment.objects.create(tenant_id="t1", proof="proofs/missing.pdf", delivered_at=old)
    held, held_name = _shipped("proofs/held.pdf", b"h", old)
    api.place_hold(reason="claim", placed_by=author, subject=held, now=now)

    run = _enforce(now, "pod.shipment")

    assert list(Shipment.objects.values_list("pk", flat=True)) == [held.pk]
    assert storages["default"].exists(held_name)
    assert not storages["default"].exists(plain_name)
    assert not storages["default"].exists(tracked.object_key)
    # Three rows, and the tracked record closed with the row that held it.
    assert (run.deleted, run.failed) == (4, 0)
    tracked.refresh_from_db()
    assert tracked.state == "deleted"
    assert DeletionEvent.objects.filter(record=tracked, outcome="deleted").count() == 1
    assert _chain_intact()


def test_rows__a_rows_file_that_is_a_held_tracked_record_keeps_the_row_and_the_object(
    proofs: None, author: Any, now: datetime
):
    from django.core.files.storage import storages

    from tests.helpers import put_tracked
    from tests.rowhost.models import Shipment

    old = now - timedelta(days=40)
    tracked = put_tracked(now=old, key="proofs/held-record.pdf")
    kept = Shipment.objects.create(tenant_id="t1", proof=tracked.object_key, delivered_at=old)
    _, plain_name = _shipped("proofs/plain.pdf", b"p", old)
    api.place_hold(reason="claim 7", placed_by=author, record=tracked, now=now)

    run = _enforce(now, "pod.shipment")

    assert list(Shipment.objects.values_list("pk", flat=True)) == [kept.pk]
    assert storages["default"].exists(tracked.object_key)
    assert not storages["default"].exists(plain_name)
    assert (run.deleted, run.skipped_held, run.failed) == (1, 1, 0)
    tracked.refresh_from_db()
    assert tracked.state == "active"
    skip = DeletionEvent.objects.get(run=run, outcome="skipped_held")
    assert "legal hold" in skip.reason
    assert _chain_intact()


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo"])
@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_rows__a_date_columns_day_is_due_from_its_midnight(
    row_registry: Any,
    make_policy: Any,
    now: datetime,
    settings: Any,
    evidence: str,
    zone: str,
):
    """A DateField age column (the checks accept one) dates a row by its day:
    the run takes it, and its figures and evidence read it, as that day's
    midnight in TIME_ZONE (how Django compares a date with the cutoff), so no
    row goes before the deadline its event names."""
    from datetime import time as day_start
    from zoneinfo import ZoneInfo

    from retention.receipts import evidence as chain
    from tests.rowhost.models import DailyTotal

    settings.TIME_ZONE = zone
    # 20:00 UTC: the run's cutoff falls on the next day in Tokyo already.
    now = now.replace(hour=20)
    api.register_model(
        DailyTotal,
        data_class="daily.totals",
        age_field="day",
        tenant_field="tenant_id",
        evidence=evidence,
    )
    make_policy("daily.totals", timedelta(days=30), batch_size=3)
    days = [(now - timedelta(days=40 + i)).date() for i in range(5)]
    for day in days:
        DailyTotal.objects.create(tenant_id="t1", day=day)
    # Past the cutoff in Tokyo (due 5 h before the run there), not in UTC.
    edge_day = (now - timedelta(days=30)).date() + timedelta(days=1)
    edge = DailyTotal.objects.create(tenant_id="t1", day=edge_day)
    DailyTotal.objects.create(tenant_id="t1", day=(now - timedelta(days=2)).date())
    midnight = [
        datetime.combine(day, day_start.min, tzinfo=ZoneInfo(zone)) for day in [*days, edge.day]
    ]
    taken = [m for m in midnight if m + timedelta(days=30) <= now]

    dry = run_execute(run=run_start(mode="dry_run", data_classes=["daily.totals"], now=now))
    run = _enforce(now, "daily.totals")

    # The run's oldest eligible is a deadline (issue 25): the oldest day's
    # midnight in TIME_ZONE, plus the period.
    assert (dry.status, dry.eligible, dry.oldest_eligible_at) == (
        "finished",
        len(taken),
        min(midnight) + timedelta(days=30),
    )
    assert (run.status, run.deleted) == ("finished", len(taken))
    assert DailyTotal.objects.filter(pk=edge.pk).exists() == (len(taken) == 5)
    events = row_events(DeletionEvent.objects.filter(run=run))
    due = sorted(chain.timestamp(at + timedelta(days=30)) for at in taken)
    assert all(e.occurred_at >= datetime.fromisoformat(e.expires_at) for e in events)
    if evidence == "per_row":
        assert sorted(e.expires_at for e in events) == due
    else:
        # A page's event is due when its latest row is: pages of 3, oldest first.
        assert sorted(chain.timestamp(e.event.expires_at) for e in events) == [
            due[min(i + 2, len(due) - 1)] for i in range(0, len(due), 3)
        ]
    assert _chain_intact()
