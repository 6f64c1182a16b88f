"""Reconciliation and the files of governed rows: never orphans; the files a deleted row
left in the store are reported (issue 25)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.utils import timezone

from retention import engine
from retention.digest import key_digest
from retention.engine.reconcile import row_files
from retention.models import RetentionRecord
from tests.rowhost.models import Shipment

pytestmark = pytest.mark.django_db


def _write(key: str) -> str:
    saved = storages["default"].save(key, ContentFile(b"x"))
    assert saved == key
    return key


@pytest.fixture
def shipments(register_shipments: Any, make_policy: Any, now: datetime) -> list[Shipment]:
    register_shipments(data_class="shipments", tenant_field="tenant_id")
    make_policy("shipments", timedelta(days=365))
    rows = [
        Shipment.objects.create(
            tenant_id="t1", proof=_write(f"proofs/p{i}.pdf"), delivered_at=now - timedelta(days=i)
        )
        for i in range(5)
    ]
    # A row deleted outside retention (a host's own delete): its file stayed.
    gone = Shipment.objects.create(
        tenant_id="t1", proof=_write("proofs/gone.pdf"), delivered_at=now
    )
    Shipment.objects.filter(pk=gone.pk).delete()
    _write("misc/stray.bin")  # no row, no record: an orphan
    return rows


def test_reconcile__files_of_governed_rows_are_not_orphans(shipments, now, monkeypatch):
    # Pages of two names: the merge crosses pages of the file column.
    monkeypatch.setattr(row_files, "PAGE", 2)

    run = engine.reconcile_run(now=now)

    counts = run.report["storages"]["default"]
    assert run.status == "finished"
    assert counts["orphans"] == 1
    assert counts["row_files"] == 5
    assert counts["files_of_deleted_rows"] == 1
    assert run.report["row_files"] == {"row_files": 5, "files_of_deleted_rows": 1}
    samples = run.report["samples"]["default"]
    assert [s["key_digest"] for s in samples["orphans"]] == [key_digest("misc/stray.bin")]
    assert [s["key_digest"] for s in samples["files_of_deleted_rows"]] == [
        key_digest("proofs/gone.pdf")
    ]
    assert "proofs/" not in json.dumps(run.report)


def test_reconcile__adopting_orphans_leaves_the_files_of_rows_alone(shipments, make_policy, now):
    make_policy("idv.photo", timedelta(days=30))

    # Files written more than a few minutes ago are adopted (younger ones may be uploading).
    run = engine.reconcile_run(adopt="idv.photo", now=timezone.now() + timedelta(minutes=10))

    assert run.report["counts"]["adopted"] == 1
    assert list(RetentionRecord.objects.values_list("object_key", flat=True)) == ["misc/stray.bin"]
    assert all(storages["default"].exists(s.proof.name) for s in shipments)
    assert storages["default"].exists("proofs/gone.pdf")


def test_retention_reconcile__prints_the_files_of_rows(shipments):
    human, as_json = StringIO(), StringIO()
    call_command("retention_reconcile", "--dry-run", stdout=human)
    call_command("retention_reconcile", "--dry-run", "--json", stdout=as_json)

    assert (
        "Files of database rows: named by a row 5 (governed through their rows, left alone), "
        "of deleted rows 1 (reported only)" in human.getvalue()
    )
    assert "orphans 1," in human.getvalue()
    payload = json.loads(as_json.getvalue())
    assert payload["counts"]["orphans"] == 1
    assert payload["row_files"] == {"row_files": 5, "files_of_deleted_rows": 1}


def test_reconcile__a_store_without_row_files_reports_no_row_figures(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    _write("misc/stray.bin")

    run = engine.reconcile_run(now=now)

    assert "row_files" not in run.report
    assert "row_files" not in run.report["storages"]["default"]


def test_retention_check__prints_the_files_deleted_rows_left(shipments, now):
    from freezegun import freeze_time

    run = engine.reconcile_run(now=now)
    out = StringIO()
    with freeze_time(now + timedelta(hours=1)):
        call_command("retention_check", stdout=out)

    assert "files of deleted rows 1; reconciled" in out.getvalue()
    assert f"(run {run.pk})" in out.getvalue()
