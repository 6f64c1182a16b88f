"""Each class's own cutoff and "oldest due" in run_retention's output and --json (issue 25).

A class of rows cut by their age compares its rows' own date with
start − period − margin; its rows came due a period after that date. A
tracked class (and a class of rows with a deadline) compares deadlines with
start − margin.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from freezegun import freeze_time

from retention import api
from retention.engine import run_execute, run_start
from retention.models import Run
from retention.reporting import human, run_as_json, summary_lines
from tests.helpers import put_tracked
from tests.rowhost.models import RequestLog, Shipment

pytestmark = pytest.mark.django_db


@pytest.fixture
def classes(register_logs: Any, make_policy: Any, now: datetime) -> None:
    register_logs(tenant_field=None)
    api.register_model(Shipment, data_class="ops.shipments", expires_field="expires_at")
    make_policy("logs.request", timedelta(days=30), safety_margin=timedelta(hours=2))
    make_policy("ops.shipments", timedelta(days=1))
    make_policy("idv.photo", timedelta(days=30))
    for days in (45, 31, 1):
        RequestLog.objects.create(
            tenant_id="t", path=f"/{days}", created_at=now - timedelta(days=days)
        )
    Shipment.objects.create(
        tenant_id="t", delivered_at=now - timedelta(days=9), expires_at=now - timedelta(days=3)
    )
    put_tracked(now=now - timedelta(days=40))  # expired 10 days ago


def _run(now: datetime, *classes: str, mode: str = "enforce") -> Run:
    return run_execute(
        run=run_start(mode=mode, data_classes=list(classes), now=now), clock=lambda: now
    )


def test_json__each_class_has_its_own_cutoff_and_unit(classes: None, now: datetime):
    run = _run(now, "logs.request", "ops.shipments", "idv.photo", mode="dry_run")

    data = run_as_json(run)

    assert data["cutoff"] == "2026-03-14T10:00:00Z"  # one for the run, as before
    assert data["cutoffs"] == {
        "logs.request": "2026-02-12T10:00:00Z",  # start − 30 days − 2 h: rows' own date
        "ops.shipments": "2026-03-14T12:00:00Z",  # start − margin: the rows' deadline
        "idv.photo": "2026-03-14T12:00:00Z",
    }
    assert data["units"] == {
        "logs.request": "rows",
        "ops.shipments": "rows",
        "idv.photo": "records",
    }
    # Rows 45 and 31 days old are due: the oldest came due 15 days ago, not 45.
    # The tracked record expired 10 days ago, the shipment 3 days ago.
    assert data["oldest_due_at"] == "2026-02-27T12:00:00Z"


def test_json__oldest_due_of_an_enforcing_run_of_a_class_cut_by_age_is_its_deadline(
    classes: None, now: datetime
):
    run = _run(now, "logs.request")

    data = run_as_json(run)

    assert data["counts"]["deleted"] == 2
    assert data["cutoffs"] == {"logs.request": "2026-02-12T10:00:00Z"}
    # A deadline, as a record's expires_at: the row's own date (01-28) + 30 days.
    assert data["oldest_eligible_at"] == "2026-02-27T12:00:00Z"
    assert data["oldest_due_at"] == "2026-02-27T12:00:00Z"


def test_json__oldest_due_of_an_enforcing_run_over_several_kinds_of_class_is_known(
    classes: None, now: datetime
):
    run = _run(now, "logs.request", "ops.shipments", "idv.photo")

    data = run_as_json(run)

    assert data["counts"]["deleted"] == 4
    # The rows cut by age came due first (02-27); the record on 03-04, the shipment on 03-11.
    assert data["oldest_eligible_at"] == "2026-02-27T12:00:00Z"
    assert data["oldest_due_at"] == "2026-02-27T12:00:00Z"


def test_summary__a_dry_run_shows_each_cutoff_rows_and_the_oldest_due(classes: None, now: datetime):
    run = _run(now, "logs.request", "ops.shipments", "idv.photo", mode="dry_run")

    text = "\n".join(summary_lines(run))

    assert "  Started 2026-03-14 12:00 UTC; each class's cutoff:" in text
    assert (
        "    logs.request: rows whose created_at is 2026-02-12 10:00 UTC or earlier (kept 30 days)"
    ) in text
    assert "    ops.shipments: rows whose expires_at is 2026-03-14 12:00 UTC or earlier" in text
    assert "    idv.photo: records whose deadline is 2026-03-14 12:00 UTC or earlier" in text
    assert (
        "    logs.request (rows of rowhost.RequestLog): would delete 2 row(s), held 0, "
        "protected 0, oldest due 2026-02-27 12:00 UTC"
    ) in text
    assert "    idv.photo: would delete 1 record(s), held 0, oldest due 2026-03-04 12:00 UTC" in (
        text
    )
    assert "(oldest due 2026-02-27 12:00 UTC)" in text
    assert "T12:00:00" not in text and "None" not in text


def test_summary__an_enforcing_run_counts_rows_as_rows(classes: None, now: datetime):
    rows = "\n".join(summary_lines(_run(now, "logs.request")))
    records = "\n".join(summary_lines(_run(now, "idv.photo")))

    assert "  Eligible 2 rows (oldest due 2026-02-27 12:00 UTC); claimed 2; deleted 2;" in rows
    assert "  Eligible 1 records (oldest due 2026-03-04 12:00 UTC); claimed 1;" in records


def test_run_retention__the_start_line_shows_when_the_run_started(classes: None, now: datetime):
    stdout = StringIO()
    with freeze_time(now):
        call_command(
            "run_retention",
            "--dry-run",
            "--data-class",
            "logs.request",
            stdout=stdout,
            stderr=StringIO(),
        )

    first = stdout.getvalue().splitlines()[0]
    assert first.startswith("Started dry run ")
    assert first.endswith(f" at {human(now)} over logs.request.")
    assert "2026-02-12 10:00 UTC or earlier" in stdout.getvalue()
    with freeze_time(now):
        call_command("run_retention", "--json", "--data-class", "logs.request", stdout=stdout)
    data = json.loads(stdout.getvalue().splitlines()[-1])
    assert data["cutoffs"] == {"logs.request": "2026-02-12T10:00:00Z"}
