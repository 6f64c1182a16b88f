"""A zero-period object disposed of when it is written, through the ordinary engine.

A retention period of zero deletes at write time. Tracking the object is a
service (``record_track``) and knows nothing of runs; whoever tracks for a
host (``retention.api.track``) asks here, and the object is swept by a run
of its own — one class, one record — as soon as the host's transaction
has committed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from retention.engine.inline import run_execute
from retention.engine.ledger import run_start
from retention.exceptions import RunRefused
from retention.models import DataClassMode, Policy, RetentionRecord, Run, RunMode, RunTrigger


def record_dispose_at_write(*, record: RetentionRecord, now: datetime) -> None:
    """Dispose of a record just tracked with a zero period once the host commits; else nothing."""
    if record.policy_version.retention_period != timedelta(0):
        return
    # Only once the host's transaction has committed: the object must
    # not be deleted for a record that is then rolled back.
    transaction.on_commit(lambda: _dispose(record=record, now=now))


def _dispose(*, record: RetentionRecord, now: datetime) -> Run | None:
    """Nothing happens while the record's data class is report-only; with a
    safety margin, or while another run holds the class's lease, the next
    run deletes it instead."""
    if not Policy.objects.filter(data_class=record.data_class, mode=DataClassMode.ENFORCE).exists():
        return None
    try:
        run = run_start(
            mode=RunMode.ENFORCE,
            trigger=RunTrigger.API,
            data_classes=[record.data_class],
            record_ids=[record.pk],
            now=now,
        )
    except RunRefused:
        return None
    return run_execute(run=run, clock=lambda: now)
