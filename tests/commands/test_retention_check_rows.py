"""`retention_check` over classes of model rows: due by the class's own deadline (issue 25)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retention import api
from retention.engine import run_execute, run_start
from retention.models import Policy, Run, RunMode, RunStatus
from retention.selectors.health import lag_check
from tests.commands.test_retention_check import by_class
from tests.helpers import retention_check as check
from tests.helpers import retention_check_json as check_json
from tests.rowhost.models import RequestLog, Shipment

pytestmark = pytest.mark.django_db

PERIOD = timedelta(days=30)


@pytest.fixture
def logs(register_logs: Any, make_policy: Any) -> Any:
    register_logs()
    return make_policy("logs.request", PERIOD)


def _log(now: datetime, *, age: timedelta, tenant: str = "t1", n: int = 1) -> list[RequestLog]:
    return [
        RequestLog.objects.create(tenant_id=tenant, path="/x", created_at=now - age)
        for _ in range(n)
    ]


def test_check__a_row_class_with_overdue_rows_is_broken(logs, now):
    _log(now, age=PERIOD + timedelta(days=5), n=3)
    oldest = _log(now, age=PERIOD + timedelta(days=9))[0]
    _log(now, age=PERIOD + timedelta(days=2))
    _log(now, age=timedelta(days=3), n=4)  # not due

    code, out, error = check(at=now)
    _, report = check_json(at=now)

    assert code == 1
    assert "logs.request [enforce] BROKEN" in out
    # The oldest row's deadline is its date plus the period, not its own date.
    deadline = oldest.created_at + PERIOD
    assert "backlog 5 rows; oldest due 2026-03-05 12:00 UTC, 9 days ago" in out
    assert "backlog 0" not in out
    row = by_class(report)["logs.request"]
    assert (row["backlog"], row["held"], row["ok"]) == (5, 0, False)
    assert "overdue" in row["broken"]
    assert row["oldest_eligible_at"] == deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert row["overdue_seconds"] == 9 * 86400
    assert "logs.request [enforce] BROKEN: overdue rows" in out
    assert error.startswith("retention promise broken: logs.request (overdue rows")


def test_check__a_row_class_counts_by_its_margin_and_scope(register_logs, make_policy, now):
    register_logs(scope=lambda qs: qs.filter(status=200))
    make_policy("logs.request", PERIOD, safety_margin=timedelta(days=2))
    _log(now, age=PERIOD + timedelta(days=3), n=2)  # past period + margin
    _log(now, age=PERIOD + timedelta(days=1))  # within the margin
    out_of_scope = _log(now, age=PERIOD + timedelta(days=10))[0]
    RequestLog.objects.filter(pk=out_of_scope.pk).update(status=500)

    _, report = check_json(at=now)

    assert by_class(report)["logs.request"]["backlog"] == 2


def test_check__held_rows_are_counted_as_held_not_backlog(logs, author, now):
    _log(now, age=PERIOD + timedelta(days=5), tenant="t1", n=2)
    _log(now, age=PERIOD + timedelta(days=5), tenant="t2", n=3)
    one = _log(now, age=PERIOD + timedelta(days=6), tenant="t1")[0]
    _log(now, age=timedelta(days=1), tenant="t2", n=4)  # held but not due
    api.place_hold(reason="case 7", placed_by=author, tenant_id="t2", now=now)
    api.place_hold(reason="case 8", placed_by=author, subject=one, now=now)

    code, out, _ = check(at=now)
    _, report = check_json(at=now)

    row = by_class(report)["logs.request"]
    assert (row["backlog"], row["held"]) == (2, 4)
    assert "backlog 2 rows;" in out
    assert "due but held 4 rows" in out


def test_check__a_class_hold_holds_every_due_row(logs, author, now):
    _log(now, age=PERIOD + timedelta(days=5), n=5)
    api.place_hold(reason="audit", placed_by=author, data_class="logs.request", now=now)

    code, report = check_json(at=now)

    row = by_class(report)["logs.request"]
    assert (row["backlog"], row["held"], row["ok"]) == (0, 5, True)


def test_check__a_row_class_by_deadline_is_due_at_its_deadline(row_registry, make_policy, now):
    api.register_model(
        Shipment, data_class="shipments", expires_field="expires_at", tenant_field="tenant_id"
    )
    make_policy("shipments", timedelta(days=365))
    for days in (3, 2, -1):
        Shipment.objects.create(
            tenant_id="t1",
            delivered_at=now - timedelta(days=400),
            expires_at=now - timedelta(days=days),
        )

    _, report = check_json(at=now)

    row = by_class(report)["shipments"]
    assert row["backlog"] == 2
    assert row["oldest_eligible_at"] == "2026-03-11T12:00:00Z"


def test_check__the_last_successful_run_is_the_one_that_disposed_of_the_class(logs, now):
    _log(now - timedelta(days=2), age=PERIOD + timedelta(days=1), n=5)
    run = run_start(mode="enforce", data_classes=["logs.request"], now=now - timedelta(days=1))
    run = run_execute(run=run, clock=lambda: now - timedelta(days=1))
    assert run.deleted == 5

    code, out, _ = check(at=now)
    _, report = check_json(at=now)

    assert code == 0
    assert f"(run {run.pk}): 5 rows deleted" in out
    assert by_class(report)["logs.request"]["last_success_run_id"] == str(run.pk)


def _closed_run(now: datetime, data_class: str, **fields: Any) -> Run:
    return Run.objects.create(
        trigger="command",
        mode=RunMode.ENFORCE,
        status=RunStatus.FINISHED,
        data_classes=[data_class],
        started_at=now,
        cutoff=now,
        finished_at=now,
        **fields,
    )


def test_check__a_run_in_which_the_breaker_held_the_class_is_not_a_success(logs, now):
    _log(now, age=PERIOD + timedelta(days=1), n=16)
    _closed_run(
        now - timedelta(hours=1),
        "logs.request",
        eligible=16,
        tripped=16,
        report={"breaker": {"logs.request": {"about_to_delete": 16, "held": True}}},
    )

    code, out, error = check(at=now)

    assert code == 1
    assert "last successful run: never" in out
    assert "no successful run" in error


def test_check__a_run_that_disposed_of_none_of_its_due_rows_is_not_a_success(logs, now):
    _log(now, age=PERIOD + timedelta(days=1), n=16)
    earlier = _closed_run(now - timedelta(days=3), "logs.request", eligible=0)
    # Stopped for review before its first page: finished, nothing disposed of.
    _closed_run(now - timedelta(hours=1), "logs.request", eligible=16)

    _, report = check_json(at=now)

    assert by_class(report)["logs.request"]["last_success_run_id"] == str(earlier.pk)


def test_check__a_redacting_class_does_not_count_its_redacted_rows(
    register_accounts, make_policy, now
):
    from tests.rowhost.models import Account

    register_accounts(data_class="accounts.closed")
    make_policy("accounts.closed", PERIOD, disposition="redact")
    for i in range(4):
        Account.objects.create(
            tenant_id="t1", name=f"n{i}", email=f"a{i}@example.com", closed_at=now - 2 * PERIOD
        )
    run = run_start(mode="enforce", data_classes=["accounts.closed"], now=now)
    run = run_execute(run=run, clock=lambda: now)
    assert run.redacted == 4
    Account.objects.create(
        tenant_id="t1", name="late", email="late@example.com", closed_at=now - 2 * PERIOD
    )

    code, out, _ = check(at=now + timedelta(minutes=5))
    _, report = check_json(at=now + timedelta(minutes=5))

    assert by_class(report)["accounts.closed"]["backlog"] == 1
    assert f"(run {run.pk}): 4 rows redacted" in out


def test_check__row_figures_are_counted_in_the_database(logs, now):
    _log(now, age=PERIOD + timedelta(days=5), n=50)
    policy = Policy.objects.get(data_class="logs.request")
    assert policy.mode == "enforce"

    with CaptureQueriesContext(connection) as queries:
        result = lag_check(now=now)

    assert result.classes[0].health.backlog == 50
    selects = [q["sql"] for q in queries.captured_queries if "rowhost_requestlog" in q["sql"]]
    assert selects and all("COUNT(" in sql.upper() for sql in selects)
