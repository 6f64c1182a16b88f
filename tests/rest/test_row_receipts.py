"""A tenant's receipts carry the deletions of its rows of registered models (issue 14)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from retention.digest import key_digest
from retention.engine import run_execute, run_start
from retention.models import DeletionEvent
from retention.receipts import evidence
from retention.receipts.verify import verify_receipt
from retention.selectors.evidence import chain_head, receipt_for
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_receipts__row_deletions_show_as_kind_row_for_their_tenant_only(
    client: Any,
    acme: dict[str, str],
    register_logs: Any,
    make_policy: Any,
    now: datetime,
    evidence: str,
):
    register_logs(evidence=evidence)
    make_policy("logs.request", timedelta(days=30))
    for tenant in ("acme", "acme", "globex"):
        RequestLog.objects.create(tenant_id=tenant, path="/x", created_at=now - timedelta(days=31))
    run_execute(
        run=run_start(mode="enforce", data_classes=["logs.request"], now=now), clock=lambda: now
    )

    body = client.get("/api/v1/deletions/", headers=acme).json()

    results = body["results"]
    assert {(r["kind"], r["record_id"], r["data_class"]) for r in results} == {
        ("row", None, "logs.request")
    }
    # One event per page and tenant either way; per-row, its rows are events of their own.
    assert [(r["row_count"], r["evidence"]) for r in results] == [
        (2, "per_row" if evidence == "per_row" else "")
    ]
    # The proof verifies offline like an object's.
    event = DeletionEvent.objects.get(pk=results[0]["id"])
    assert verify_receipt(receipt_for(event), chain_head()) == []


def _per_row_deletions(now: datetime, register_logs: Any, make_policy: Any) -> list[RequestLog]:
    register_logs()
    make_policy("logs.request", timedelta(days=30))
    logs = [
        RequestLog.objects.create(tenant_id=tenant, path="/x", created_at=now - timedelta(days=31))
        for tenant in ("acme", "acme", "acme", "globex")
    ]
    run_execute(
        run=run_start(mode="enforce", data_classes=["logs.request"], now=now), clock=lambda: now
    )
    return logs


def test_receipts__each_row_of_a_per_row_page_has_its_own_receipt_verified_offline(
    client: Any, acme: dict[str, str], register_logs: Any, make_policy: Any, now: datetime
):
    logs = _per_row_deletions(now, register_logs, make_policy)
    (receipt,) = client.get("/api/v1/deletions/", headers=acme).json()["results"]

    rows = client.get(f"/api/v1/deletions/{receipt['id']}/rows/", headers=acme).json()

    digests = [key_digest(f"rowhost.RequestLog:{log.pk}") for log in logs[:3]]
    assert [r["key_digest"] for r in rows["rows"]] == digests
    assert [r["index"] for r in rows["rows"]] == [0, 1, 2]
    assert {r["expires_at"] for r in rows["rows"]} == {evidence.timestamp(now - timedelta(days=1))}
    head = client.get("/api/v1/deletions/chain/", headers=acme).json()
    for digest in digests:
        proof = client.get(
            f"/api/v1/deletions/{receipt['id']}/receipt/", {"row": digest}, headers=acme
        ).json()
        assert proof["row"]["key_digest"] == digest
        assert verify_receipt(proof, head) == []
    # Another row's digest, or a row moved to another place, does not verify.
    forged = client.get(
        f"/api/v1/deletions/{receipt['id']}/receipt/", {"row": digests[0]}, headers=acme
    ).json()
    forged["row"]["key_digest"] = key_digest(f"rowhost.RequestLog:{logs[3].pk}")
    assert verify_receipt(forged, head) == [
        "the row is not among its event's rows: its audit path gives another root"
    ]
    forged["row"]["key_digest"], forged["row"]["index"] = digests[0], 1
    assert verify_receipt(forged, head) != []


def test_receipts__a_row_not_in_the_receipt_or_of_another_tenant_is_not_found(
    client: Any, acme: dict[str, str], register_logs: Any, make_policy: Any, now: datetime
):
    logs = _per_row_deletions(now, register_logs, make_policy)
    (receipt,) = client.get("/api/v1/deletions/", headers=acme).json()["results"]
    other = DeletionEvent.objects.exclude(pk=receipt["id"]).get()
    globex_row = key_digest(f"rowhost.RequestLog:{logs[3].pk}")

    missing = client.get(
        f"/api/v1/deletions/{receipt['id']}/receipt/", {"row": globex_row}, headers=acme
    )
    foreign = client.get(f"/api/v1/deletions/{other.pk}/rows/", headers=acme)
    malformed = client.get(
        f"/api/v1/deletions/{receipt['id']}/receipt/", {"row": "not-a-digest"}, headers=acme
    )
    unknown = client.get(f"/api/v1/deletions/{receipt['id']}/rows/", {"rows": 1}, headers=acme)

    assert (missing.status_code, foreign.status_code) == (404, 404)
    assert (malformed.status_code, unknown.status_code) == (400, 400)
