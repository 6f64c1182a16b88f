"""A page's evidence, as each delete path writes it (issue 14).

On PostgreSQL a ``per_batch`` page of a class no hold touches is grouped by
tenant inside its DELETE statement; elsewhere, or under a hold, the rows come
back and Python groups them. Both must write the same events: these tests
hold either to the values worked out here from the rows themselves.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import api
from retention.digest import key_digest
from retention.engine import run_execute, run_start
from retention.models import DeletionEvent, EventOutcome, Run
from retention.receipts import evidence
from tests.helpers import chain_ok, row_events
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db

PERIOD = timedelta(days=30)


def _seed(now: datetime) -> list[tuple[int, datetime, str]]:
    """Due rows of three tenants, interleaved, with ties on the time (the pk decides)."""
    rows = []
    for i in range(11):
        at = now - timedelta(days=40 + i // 3)  # three rows a time
        rows.append(RequestLog(tenant_id=f"t{i % 3}", path=f"/old/{i}", created_at=at))
    rows.append(RequestLog(tenant_id="t0", path="/new", created_at=now - timedelta(days=1)))
    RequestLog.objects.bulk_create(rows)
    due = RequestLog.objects.filter(path__startswith="/old/").order_by("created_at", "pk")
    return list(due.values_list("pk", "created_at", "tenant_id"))


def _expected(pages: list[list[tuple[int, datetime, str]]], outcome: str) -> list[tuple]:
    events = []
    for page in pages:
        for tenant in sorted({r[2] for r in page}):
            part = [r for r in page if r[2] == tenant]
            events.append(
                (
                    outcome,
                    tenant,
                    len(part),
                    str(part[0][0]),
                    str(part[-1][0]),
                    key_digest("\n".join(str(r[0]) for r in part)),
                    max(r[1] for r in part) + PERIOD,
                )
            )
    return sorted(events)


def _events(run: Run) -> list[tuple]:
    return sorted(
        DeletionEvent.objects.filter(run=run).values_list(
            "outcome", "tenant_id", "row_count", "first_pk", "last_pk", "key_digest", "expires_at"
        )
    )


@pytest.fixture
def logs(register_logs: Any, make_policy: Any) -> Any:
    register_logs(evidence="per_batch")
    return make_policy("logs.request", PERIOD, batch_size=4)


def test_page_evidence__per_batch_pages_are_one_event_per_tenant_of_each_page(
    logs: Any, now: datetime
):
    due = _seed(now)

    run = run_execute(run=run_start(mode="enforce", data_classes=["logs.request"], now=now))

    pages = [due[i : i + 4] for i in range(0, len(due), 4)]
    assert _events(run) == _expected(pages, EventOutcome.DELETED)
    assert (run.claimed, run.deleted) == (11, 11)
    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (11, 11)
    assert list(RequestLog.objects.values_list("path", flat=True)) == ["/new"]
    chain_ok()


def test_page_evidence__a_held_tenant_gets_its_own_events_and_the_rest_the_same(
    logs: Any, now: datetime, author: Any
):
    due = _seed(now)
    hold = api.place_hold(reason="case", placed_by=author, tenant_id="t1", now=now)

    run = run_execute(run=run_start(mode="enforce", data_classes=["logs.request"], now=now))

    # Issue 25: the pages leave the held rows out; the run records them once,
    # as one event of the hold and tenant with their count and Merkle root.
    free = [r for r in due if r[2] != "t1"]
    deleted = [free[i : i + 4] for i in range(0, len(free), 4)]
    held = [r for r in due if r[2] == "t1"]
    leaves = [
        evidence.subject_leaf(key_digest(f"rowhost.RequestLog:{pk}"), evidence.stamp(at + PERIOD))
        for pk, at, _tenant in held
    ]
    held_event = (
        EventOutcome.SKIPPED_HELD,
        "t1",
        len(held),
        "",
        "",
        evidence.merkle_root(leaves).hex(),
        max(r[1] for r in held) + PERIOD,
    )
    assert _events(run) == sorted([*_expected(deleted, EventOutcome.DELETED), held_event])
    skip = DeletionEvent.objects.get(run=run, outcome=EventOutcome.SKIPPED_HELD)
    assert (skip.evidence, skip.reason) == ("held", f"legal hold applies (hold {hold.pk})")
    run.refresh_from_db()
    assert (run.deleted, run.skipped_held) == (7, 4)
    assert sorted(RequestLog.objects.values_list("tenant_id", flat=True)) == ["t0"] + ["t1"] * 4
    chain_ok()


def test_page_evidence__a_primary_key_used_again_is_deleted_and_evidenced_once(
    register_logs: Any, make_policy: Any, now: datetime
):
    """Its event's key is recorded already: the page rolls back and is done again,
    its keys looked up; the row goes, and the first event stays the only one."""
    register_logs(tenant_field=None)
    make_policy("logs.request", PERIOD, batch_size=10)
    old = now - timedelta(days=40)
    first = RequestLog.objects.create(tenant_id="t1", path="/a", created_at=old)
    RequestLog.objects.create(tenant_id="t1", path="/b", created_at=old)
    run_execute(run=run_start(mode="enforce", data_classes=["logs.request"], now=now))
    RequestLog.objects.create(pk=first.pk, tenant_id="t1", path="/a-again", created_at=old)
    RequestLog.objects.create(tenant_id="t1", path="/c", created_at=old)

    run = run_execute(run=run_start(mode="enforce", data_classes=["logs.request"], now=now))

    assert not RequestLog.objects.exists()
    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (2, 2)
    subject = key_digest(f"rowhost.RequestLog:{first.pk}")
    assert [e.key_digest for e in row_events(DeletionEvent.objects.all())].count(subject) == 1
    assert len(row_events(DeletionEvent.objects.filter(run=run))) == 1
    chain_ok()
