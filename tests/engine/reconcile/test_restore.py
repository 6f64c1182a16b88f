"""After a restore, reconciliation and the next run bring store, records and chain in line.

A database dump is taken with ``dumpdata`` before a run (a logical backup,
the same on PostgreSQL and SQLite) and loaded back after it; a bucket
restore puts the objects the run deleted back in the store.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from retention import engine
from retention.models import RecordState, RetentionRecord
from tests.helpers import chain_ok, database_dump, database_restore, enforce, put_tracked

pytestmark = pytest.mark.django_db


def _agree(now: datetime) -> None:
    """Store, records and chain agree: every live record's object is there, no other."""
    for record in RetentionRecord.objects.all():
        present = storages["default"].exists(record.object_key)
        if record.state in (RecordState.DELETED, RecordState.MISSING):
            assert not present, (record.pk, record.state)
        else:
            assert present, (record.pk, record.state)
    chain_ok()
    check = engine.reconcile_run(dry_run=True, now=now)
    assert {k: v for k, v in check.report["counts"].items() if k not in ("listed", "tracked")} == {
        "orphans": 0,
        "missing": 0,
        "reappeared": 0,
        "leftover_versions": 0,
        "adopted": 0,
    }


@pytest.mark.parametrize("restored", ["database", "bucket", "both"])
def test_restore__reconcile_then_run_brings_store_records_and_chain_in_line(
    make_policy: Any, now: datetime, tmp_path: Path, restored: str
) -> None:
    make_policy("idv.photo", timedelta(days=30))
    doomed = [put_tracked(key=f"acme/old-{n}", now=now - timedelta(days=40)) for n in range(3)]
    kept = [put_tracked(key=f"acme/new-{n}", now=now) for n in range(2)]
    # An earlier run, so that the chain has a history before the dump.
    put_tracked(key="acme/oldest", now=now - timedelta(days=90))
    assert enforce(now=now - timedelta(days=20)).deleted == 1
    dump = database_dump(tmp_path / "before.json")
    bodies = {}
    for record in doomed:
        with storages["default"].open(record.object_key) as handle:
            bodies[record.object_key] = handle.read()

    run = enforce(now=now)
    assert run.deleted == 3
    if restored in ("database", "both"):
        database_restore(dump)
        assert RetentionRecord.objects.filter(state=RecordState.ACTIVE).count() == 5
    if restored in ("bucket", "both"):
        for key, body in bodies.items():
            storages["default"].save(key, ContentFile(body))

    later = now + timedelta(minutes=5)
    reconciliation = engine.reconcile_run(now=later)
    counts = reconciliation.report["counts"]
    # The database forgot the run: its deletions are found missing.
    assert counts["missing"] == (3 if restored == "database" else 0)
    # The bucket brought back what the records say is deleted.
    assert counts["reappeared"] == (3 if restored == "bucket" else 0)
    assert counts["orphans"] == 0

    rerun = enforce(now=later + timedelta(minutes=1))

    # Both restored: the records and objects are as before the run, which runs again.
    assert rerun.deleted == {"database": 0, "bucket": 3, "both": 3}[restored]
    for record in doomed:
        assert not storages["default"].exists(record.object_key)
    for record in kept:
        assert RetentionRecord.objects.get(pk=record.pk).state == RecordState.ACTIVE
    expected = RecordState.MISSING if restored == "database" else RecordState.DELETED
    assert {RetentionRecord.objects.get(pk=r.pk).state for r in doomed} == {expected}
    _agree(later + timedelta(minutes=2))
