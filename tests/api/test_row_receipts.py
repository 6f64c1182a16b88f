"""A tenant's receipts carry the deletions of its rows of registered models (issue 14)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import api
from retention.engine import run_execute, run_start
from retention.models import DeletionEvent
from retention.receipts import verify_receipt
from retention.selectors.evidence import chain_head, receipt_for
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_receipts__row_deletions_show_as_kind_row_for_their_tenant_only(
    client: Any,
    acme: dict[str, str],
    row_registry: Any,
    make_policy: Any,
    now: datetime,
    evidence: str,
):
    api.register_model(
        RequestLog,
        data_class="logs.request",
        age_field="created_at",
        tenant_field="tenant_id",
        evidence=evidence,
    )
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
    rows = sum(r["row_count"] or 1 for r in results)
    assert rows == 2
    assert len(results) == (2 if evidence == "per_row" else 1)
    # The proof verifies offline like an object's.
    event = DeletionEvent.objects.get(pk=results[0]["id"])
    assert verify_receipt(receipt_for(event), chain_head()) == []
