"""Reconciliation of mirrored holds: objects whose Object Lock legal hold disagrees with the holds.

For a storage in ``RETENTION_OBJECT_LOCK_HOLDS``, each record whose object
should be in the store (``active`` or ``failed``, tracked before the run
began, within its prefix and classes) is compared with its object's legal
hold: ON while no active hold covers the record, or OFF while one does, is a
``legal_hold_mismatch``; an object the store would not answer for is
``legal_hold_unchecked``. Listings carry no legal hold, so this costs one
GetObjectLegalHold request per such record (a few in flight at once), on top
of the listing. Reported, never acted on: a person decides whether the hold
or the lock is wrong. A hold whose mirror is still applying or releasing
shows its objects here until it is done.
"""

from __future__ import annotations

from collections.abc import Collection

from retention.engine.reconcile.act import Findings
from retention.models import RecordState, RetentionRecord
from retention.selectors.holds import held_record_ids

PAGE = 1000
FIELDS = ("id", "object_key", "key_digest", "data_class", "created_at")


def legal_holds_compare(
    findings: Findings,
    *,
    prefix: str,
    selected: Collection[str] | None,
    last_id: int,
) -> None:
    """Count the storage's mismatched legal holds into ``findings``, one keyset page at a time."""
    from retention.storage.object_lock import LockState, NotLockable, ObjectLock

    try:
        lock = ObjectLock.for_alias(findings.alias)
    except NotLockable:
        return  # retention.E025 reports it
    records = RetentionRecord.objects.filter(
        storage=findings.alias,
        state__in=(RecordState.ACTIVE, RecordState.FAILED),
        id__lte=last_id,
    )
    if prefix:
        records = records.filter(object_key__startswith=prefix)
    if selected is not None:
        records = records.filter(data_class__in=sorted(selected))
    mismatch = unchecked = 0
    after = 0
    while True:
        rows = list(records.filter(id__gt=after).order_by("id").values(*FIELDS)[:PAGE])
        if not rows:
            break
        held = held_record_ids(row["id"] for row in rows)
        answers = lock.get_many(row["object_key"] for row in rows)
        for row in rows:
            state = answers[row["object_key"]].state
            if state is LockState.ERROR:
                unchecked += 1
            elif state is not LockState.ABSENT and (state is LockState.ON) != (row["id"] in held):
                mismatch += 1
                findings.lock_mismatch(row, locked=state is LockState.ON)
        if len(rows) < PAGE:
            break
        after = rows[-1]["id"]
    findings.lock_counts = {"legal_hold_mismatch": mismatch, "legal_hold_unchecked": unchecked}
