"""Per-row evidence in its compact shape (issue 14): one event per row, as a
page event per tenant carrying its rows, and each row's key in RowEventKey.

Whichever path a page takes (one SQL statement that also spells the
deadlines and writes the rows' keys, or the rows read back and handled in
Python), its events are worked out here from the rows themselves: each row's
keyed digest and deadline, in keyset order, under a root its page event
carries, and a key per row that a replay cannot record again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import api
from retention.digest import key_digest
from retention.engine import run_execute, run_start
from retention.models import DeletionEvent, EventOutcome, RowEventKey, Run
from retention.receipts import evidence
from retention.selectors.evidence import VerifyResult, chain_verify, row_subjects
from tests.helpers import chain_ok
from tests.rowhost.models import RequestLog, WebSession

pytestmark = pytest.mark.django_db

PERIOD = timedelta(days=30)


@pytest.fixture
def logs(register_logs: Any) -> None:
    """The request log, one event per row (the default), tenants by ``tenant_id``."""
    register_logs()


def _enforce(now: datetime, data_class: str) -> Run:
    run = run_execute(run=run_start(mode="enforce", data_classes=[data_class], now=now))
    run.refresh_from_db()
    return run


def _logs(now: datetime) -> list[tuple[int, datetime, str]]:
    """Due rows of two tenants, interleaved, ties on the time; one young row."""
    RequestLog.objects.bulk_create(
        [
            RequestLog(
                tenant_id=f"t{i % 2}",
                path=f"/old/{i}",
                created_at=now - timedelta(days=40 + i // 3, microseconds=i * 7),
            )
            for i in range(9)
        ]
        + [RequestLog(tenant_id="t0", path="/new", created_at=now - timedelta(days=1))]
    )
    due = RequestLog.objects.filter(path__startswith="/old/").order_by("created_at", "pk")
    return list(due.values_list("pk", "created_at", "tenant_id"))


def _expected(rows: list[tuple[Any, datetime, str]], label: str) -> dict[str, list]:
    """Per tenant, its rows' (digest, deadline) in keyset order."""
    by_tenant: dict[str, list] = {}
    for pk, at, tenant in rows:
        by_tenant.setdefault(tenant, []).append(
            (key_digest(f"{label}:{pk}"), evidence.timestamp(at + PERIOD))
        )
    return by_tenant


def _pages(run: Run) -> dict[str, list]:
    """Per tenant, the rows its per-row page events stand for, checked against the event."""
    found: dict[str, list] = {}
    for event in DeletionEvent.objects.filter(run=run).order_by("id"):
        assert (event.kind, event.evidence, event.outcome) == ("row", "per_row", "deleted")
        subjects = [(s.key_digest, s.expires_at) for s in row_subjects(event)]
        assert event.row_count == len(subjects)
        root = evidence.merkle_root([evidence.subject_leaf(d, at) for d, at in subjects])
        assert event.key_digest == root.hex()
        assert evidence.timestamp(event.expires_at) == max(at for _, at in subjects)
        found.setdefault(event.tenant_id, []).extend(subjects)
    return found


@pytest.mark.parametrize("path", ["one statement", "read back"])
def test_per_row__each_row_is_an_event_under_its_tenants_page_event(
    logs: None, make_policy: Any, author: Any, now: datetime, path: str
):
    make_policy("logs.request", PERIOD, batch_size=4)
    due = _logs(now)
    if path == "read back":
        # Any hold makes the page read its rows back first (it holds no row here).
        api.place_hold(reason="another tenant", placed_by=author, tenant_id="t9", now=now)

    run = _enforce(now, "logs.request")

    assert (run.status, run.deleted) == ("finished", 9)
    assert _pages(run) == _expected(due, "rowhost.RequestLog")
    # An integer key is its rows' key's second half: neighbours in the index.
    halves = sorted(key.hex[16:] for key in RowEventKey.objects.values_list("key", flat=True))
    assert halves == sorted(f"{pk + 2**63:016x}" for pk, _, _ in due)
    chain_ok()


def test_per_row__rows_without_an_integer_key_get_hashed_keys(
    row_registry: Any, make_policy: Any, now: datetime
):
    api.register_model(
        WebSession, data_class="web.session", age_field="created_at", tenant_field="tenant_id"
    )
    make_policy("web.session", PERIOD, batch_size=4)
    for i in range(6):
        WebSession.objects.create(tenant_id="t1", created_at=now - timedelta(days=40, seconds=i))
    due = list(
        WebSession.objects.order_by("created_at", "pk").values_list("pk", "created_at", "tenant_id")
    )

    run = _enforce(now, "web.session")
    again = _enforce(now, "web.session")

    assert (run.deleted, again.deleted, WebSession.objects.count()) == (6, 0, 0)
    assert _pages(run) == _expected(due, "rowhost.WebSession")
    assert RowEventKey.objects.count() == 6
    chain_ok()


def test_per_row__held_rows_are_skipped_with_one_event_of_their_hold_each_run(
    logs: None, make_policy: Any, author: Any, now: datetime
):
    make_policy("logs.request", PERIOD, batch_size=10)
    _logs(now)
    hold = api.place_hold(reason="litigation", placed_by=author, tenant_id="t1", now=now)
    keys = RowEventKey.objects.count()

    first = _enforce(now, "logs.request")
    second = _enforce(now, "logs.request")

    assert (first.deleted, first.skipped_held, second.skipped_held) == (5, 4, 4)
    skips = DeletionEvent.objects.filter(outcome=EventOutcome.SKIPPED_HELD).order_by("id")
    # One event a run for the hold's rows (issue 25): per run, as an object's
    # skip, with their count and the Merkle root of their subjects; no row key.
    reason = f"legal hold applies (hold {hold.pk})"
    assert [(e.run_id, e.row_count, e.reason) for e in skips] == [
        (first.pk, 4, reason),
        (second.pk, 4, reason),
    ]
    assert skips[0].key_digest == skips[1].key_digest
    assert row_subjects(skips[0]) == row_subjects(skips[1]) == []
    assert RowEventKey.objects.count() == keys + 5
    chain_ok()


def _broken() -> str | None:
    (result,) = [v for v in chain_verify() if isinstance(v, VerifyResult)]
    return result.broken


@pytest.mark.parametrize(
    "tamper",
    ["a row's deadline moved", "a row removed", "rows swapped", "rows dropped", "not per row"],
)
def test_per_row__verify_names_a_page_event_whose_rows_were_altered(
    logs: None, make_policy: Any, now: datetime, tamper: str
):
    make_policy("logs.request", PERIOD, batch_size=10)
    _logs(now)
    _enforce(now, "logs.request")
    assert _broken() is None
    event = DeletionEvent.objects.filter(tenant_id="t0").get()
    blob = bytes(event.row_subjects)
    size = evidence.SUBJECT_SIZE
    changed: dict[str, Any] = {
        "a row's deadline moved": {
            "row_subjects": blob[:-2] + (b"8Z" if blob[-2] == 57 else b"9Z")
        },
        "a row removed": {"row_subjects": blob[:-size]},
        "rows swapped": {"row_subjects": blob[size : 2 * size] + blob[:size] + blob[2 * size :]},
        "rows dropped": {"row_subjects": None},
        "not per row": {"evidence": ""},
    }[tamper]

    DeletionEvent.objects.filter(pk=event.pk).update(**changed)

    broken = _broken()
    assert broken is not None and f"event {event.pk}" in broken
