"""Reconciliation of mirrored holds: objects whose S3 legal hold disagrees with the holds."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from retention import engine, services
from retention.models import RunStatus
from tests.helpers import RECONCILE_COUNTS, add_s3_storage

pytestmark = pytest.mark.django_db


def _track(client: Any, bucket: str, key: str, *, now: datetime, tenant: str = "acme") -> Any:
    client.put_object(Bucket=bucket, Key=key, Body=b"12345")
    return services.record_track(
        tenant_id=tenant, data_class="idv.photo", object_key=key, storage="locked", now=now
    )


def _lock(client: Any, bucket: str, key: str, status: str) -> None:
    client.put_object_legal_hold(Bucket=bucket, Key=key, LegalHold={"Status": status})


def test_reconcile__counts_objects_whose_legal_hold_disagrees_with_the_holds(
    make_policy: Any,
    now: datetime,
    approver: Any,
    settings: Any,
    s3_server: Any,
    s3_object_lock_bucket: str,
    s3_client: Any,
) -> None:
    bucket = s3_object_lock_bucket
    add_s3_storage(settings, "locked", s3_server.endpoint_url, bucket)
    make_policy("idv.photo", timedelta(days=30))
    agrees = _track(s3_client, bucket, "acme/agrees", now=now)
    unlocked = _track(s3_client, bucket, "acme/unlocked", now=now)
    stray = _track(s3_client, bucket, "globex/stray", now=now, tenant="globex")
    _track(s3_client, bucket, "globex/free", now=now, tenant="globex")
    # Holds placed before mirroring was asked for; the locks set by hand.
    services.legal_hold_place(reason="Case 4", placed_by=approver, tenant_id="acme", now=now)
    _lock(s3_client, bucket, agrees.object_key, "ON")
    _lock(s3_client, bucket, stray.object_key, "ON")
    settings.RETENTION_OBJECT_LOCK_HOLDS = ["locked"]

    run = engine.reconcile_run(storages=["locked"], now=now + timedelta(minutes=10))

    assert run.status == RunStatus.FINISHED
    counts = run.report["storages"]["locked"]
    assert (counts["legal_hold_mismatch"], counts["legal_hold_unchecked"]) == (2, 0)
    samples = run.report["samples"]["locked"]["legal_hold_mismatch"]
    assert sorted((s["record_id"], s["legal_hold"]) for s in samples) == sorted(
        [(unlocked.pk, "off"), (stray.pk, "on")]
    )
    assert all("acme/" not in json.dumps(s) for s in samples)
    # The --json counts are a contract: the same seven names, no more.
    out = StringIO()
    call_command("retention_reconcile", "--storage", "locked", "--json", stdout=out)
    assert list(json.loads(out.getvalue())["counts"]) == RECONCILE_COUNTS
    human = StringIO()
    call_command("retention_reconcile", "--storage", "locked", stdout=human)
    assert "Object Lock legal holds: mismatch 2, unchecked 0 (reported only)" in human.getvalue()


def test_reconcile__a_storage_not_mirrored_reports_no_legal_hold_figures(
    make_policy: Any,
    now: datetime,
    settings: Any,
    s3_server: Any,
    s3_object_lock_bucket: str,
    s3_client: Any,
) -> None:
    add_s3_storage(settings, "locked", s3_server.endpoint_url, s3_object_lock_bucket)
    make_policy("idv.photo", timedelta(days=30))
    record = _track(s3_client, s3_object_lock_bucket, "acme/a", now=now)
    _lock(s3_client, s3_object_lock_bucket, record.object_key, "ON")

    run = engine.reconcile_run(storages=["locked"], now=now + timedelta(minutes=10))

    assert "legal_hold_mismatch" not in run.report["storages"]["locked"]
