"""Redactions are receipts too: the list, the CSV, the report, offline proofs (issue 30, point 4).

A row class whose disposition is ``redact`` keeps its rows and replaces
their personal fields; each run records events of outcome ``redacted``.
A tenant sees them beside its deletions, told apart by ``disposition`` and
``outcome``, and counted apart in its report.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.http import StreamingHttpResponse
from freezegun import freeze_time

from retention import redaction
from retention.engine import run_execute, run_start
from retention.models import DeletionEvent
from retention.receipts.verify import verify_receipt
from tests.rowhost.models import Account

pytestmark = pytest.mark.django_db


@pytest.fixture
def redacted(register_accounts: Any, make_policy: Any, now: datetime) -> Any:
    """Three closed accounts of acme and one of globex, redacted by an enforcing run at ``now``;
    acme's third one a day late (its deadline more than the promise before the run)."""

    def make(**evidence: str) -> list[Account]:
        register_accounts(
            redact={"name": redaction.Constant("[redacted]"), "email": redaction.Digest()},
            **evidence,
        )
        make_policy("accounts.redact", timedelta(days=90), disposition="redact")
        closed = [
            ("acme", now - timedelta(days=90, hours=1)),
            ("acme", now - timedelta(days=90, hours=2)),
            ("acme", now - timedelta(days=92)),
            ("globex", now - timedelta(days=91)),
        ]
        accounts = [
            Account.objects.create(
                tenant_id=tenant, name=f"A{n}", email=f"a{n}@x.test", closed_at=at
            )
            for n, (tenant, at) in enumerate(closed)
        ]
        run = run_start(mode="enforce", data_classes=["accounts.redact"], now=now)
        assert run_execute(run=run, clock=lambda: now).redacted == 4
        return accounts

    return make


@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_receipts__redacted_rows_are_listed_with_disposition_redact_and_outcome_redacted(
    client: Any, acme: dict[str, str], redacted: Any, evidence: str
) -> None:
    redacted(evidence=evidence)

    results = client.get("/api/v1/deletions/", headers=acme).json()["results"]

    assert {(r["kind"], r["data_class"], r["disposition"], r["outcome"]) for r in results} == {
        ("row", "accounts.redact", "redact", "redacted")
    }
    assert sum(r["row_count"] or 1 for r in results) == 3
    assert {r["evidence"] for r in results} == {"per_row" if evidence == "per_row" else ""}
    for receipt in results:
        assert receipt["proof"]["batch"]["seq"] >= 1


def test_receipts__a_redaction_receipt_verifies_offline(
    client: Any, acme: dict[str, str], redacted: Any
) -> None:
    redacted()
    (listed,) = client.get("/api/v1/deletions/", headers=acme).json()["results"]

    receipt = client.get(f"/api/v1/deletions/{listed['id']}/receipt/", headers=acme).json()
    head = client.get("/api/v1/deletions/chain/", headers=acme).json()

    assert receipt["event"]["outcome"] == "redacted"
    assert receipt["event"]["disposition"] == "redact"
    assert verify_receipt(receipt, head) == []
    rows = client.get(f"/api/v1/deletions/{listed['id']}/rows/", headers=acme).json()["rows"]
    assert len(rows) == 3
    row_receipt = client.get(
        f"/api/v1/deletions/{listed['id']}/receipt/?row={rows[0]['key_digest']}", headers=acme
    ).json()
    assert verify_receipt(row_receipt, head) == []


def test_receipts__csv_holds_redactions_with_their_evidence_column(
    client: Any, acme: dict[str, str], redacted: Any
) -> None:
    redacted()

    response = client.get("/api/v1/deletions/?format=csv", headers=acme)

    assert isinstance(response, StreamingHttpResponse)
    body = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [
        (r["kind"], r["disposition"], r["outcome"], r["row_count"], r["evidence"]) for r in rows
    ] == [("row", "redact", "redacted", "3", "per_row")]
    assert body.splitlines()[0].endswith(",kind,row_count,evidence")


def test_receipts__another_tenants_redactions_stay_out(
    client: Any, globex: dict[str, str], redacted: Any
) -> None:
    redacted(evidence="per_batch")

    results = client.get("/api/v1/deletions/", headers=globex).json()["results"]

    assert [(r["outcome"], r["row_count"]) for r in results] == [("redacted", 1)]
    events = DeletionEvent.objects.filter(outcome="redacted").values_list("tenant_id", flat=True)
    assert sorted(events) == ["acme", "globex"]


@pytest.mark.parametrize(
    ("evidence", "on_time_late"),
    [
        # Each row's deadline is known: two within a day of it, one two days after.
        ("per_row", (2, 1)),
        # One event for the page, dated by its latest deadline, which was kept.
        ("per_batch", (3, 0)),
    ],
)
def test_report__counts_redactions_per_class_apart_from_deletions_on_time_and_late(
    client: Any,
    acme: dict[str, str],
    redacted: Any,
    settings: Any,
    now: datetime,
    evidence: str,
    on_time_late: tuple[int, int],
) -> None:
    settings.RETENTION_LAG_PROMISE = timedelta(days=1)
    redacted(evidence=evidence)

    with freeze_time(now + timedelta(hours=1)):
        body = client.get("/api/v1/deletions/report/", headers=acme).json()

    (accounts,) = body["data_classes"]
    assert accounts["data_class"] == "accounts.redact"
    assert (accounts["redacted"], accounts["deleted"], accounts["already_absent"]) == (3, 0, 0)
    assert (accounts["on_time"], accounts["late"]) == on_time_late
