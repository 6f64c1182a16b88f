"""The objects of a row's ``files`` fields, deleted before the row (issue 14).

Through the field's own storage: an absent object is a success (Django's
storages delete a missing name without complaint). An object that is also a
tracked record (same storage, same key) is the same object: its record is
closed as deleted with its own event, so it is deleted once and both agree.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from functools import reduce
from operator import or_
from typing import Any

from django.core.files.storage import Storage, default_storage, storages
from django.db import transaction
from django.db.models import FileField, Q

from retention.chain.events import events_append
from retention.engine.claims import CLAIM_FIELDS, claimed_item
from retention.engine.events import event_for
from retention.engine.ledger import run_counts_add
from retention.models import EventOutcome, LegalHold, RecordState, RetentionRecord, Run
from retention.rows.registry import RowClass
from retention.selectors.holds import holds_after_recheck

logger = logging.getLogger("retention.engine")


def storage_alias(storage: Storage) -> str | None:
    """The STORAGES alias of a field's storage, if it is one of them."""
    # A FileField without storage= has Django's lazy default_storage.
    if storage is default_storage:
        return "default"
    for alias in storages.backends:
        if storages[alias] is storage:
            return alias
    return None


def _file_fields(row: RowClass) -> list[tuple[FileField, str | None]]:
    """The class's file fields, in ``row.files`` order, with their STORAGES alias."""
    fields: list[tuple[FileField, str | None]] = []
    for name in row.files:
        file_field = row.model._meta.get_field(name)
        assert isinstance(file_field, FileField)  # the checks refuse any other field
        fields.append((file_field, storage_alias(file_field.storage)))
    return fields


def held_file_rows(*, row: RowClass, rows: Sequence[tuple[Any, ...]]) -> set[Any]:
    """The pks of rows (``(pk, time, tenant, *file names)``) one of whose objects is a
    tracked record under a legal hold: such an object must not go with its row."""
    wanted: set[tuple[str, str]] = set()
    by_object: dict[tuple[str, str], list[Any]] = {}
    for index, (_field, alias) in enumerate(_file_fields(row), start=3):
        if alias is None:
            continue
        for values in rows:
            if values[index]:
                key = (alias, str(values[index]))
                wanted.add(key)
                by_object.setdefault(key, []).append(values[0])
    if not wanted:
        return set()
    held = (
        RetentionRecord.objects.filter(
            storage__in={alias for alias, _ in wanted},
            object_key__in={key for _, key in wanted},
        )
        .exclude(state=RecordState.DELETED)
        .held()
        .values_list("storage", "object_key")
    )
    return {pk for found in held if found in wanted for pk in by_object[found]}


def held_files_q(row: RowClass) -> Q | None:
    """A filter over the class's rows matching those one of whose objects is a
    tracked record under a legal hold (``held_file_rows``, for a whole class);
    None when the class has no file field in a STORAGES alias, or no hold is active."""
    fields = [(f, alias) for f, alias in _file_fields(row) if alias is not None]
    if not fields or not LegalHold.objects.active().exists():
        return None
    parts = [
        Q(
            **{
                f"{file_field.name}__in": RetentionRecord.objects.filter(storage=alias)
                .exclude(state=RecordState.DELETED)
                .held()
                .values("object_key")
            }
        )
        for file_field, alias in fields
    ]
    return reduce(or_, parts)


def files_delete(
    *, row: RowClass, rows: Sequence[tuple[Any, ...]], run: Run, now: datetime
) -> set[Any]:
    """Delete the objects of these rows (``(pk, time, tenant, *file names)``); return
    the pks whose objects are all gone now.

    The objects that are tracked records are re-checked first, under their
    locks, as a claim re-checks tracked objects (``_tracked_recheck``): a row
    one of whose records a hold now covers keeps its objects. From then on
    they are past their re-check: a renewal is refused, a hold placed while
    the object is deleted is recorded with its deletion.
    """
    fields = _file_fields(row)
    wanted = {
        (alias, str(name))
        for values in rows
        for (_field, alias), name in zip(fields, values[3:], strict=True)
        if name and alias is not None
    }
    checked, held, marked = _tracked_recheck(wanted, now)
    gone: set[Any] = set()
    deleted: set[tuple[str, str]] = set()
    kept = 0
    for values in rows:
        objects = [
            (file_field, alias, str(name))
            for (file_field, alias), name in zip(fields, values[3:], strict=True)
            if name
        ]
        if any((alias, name) in held for _field, alias, name in objects):
            kept += 1  # a hold placed since the page's check: the row and its objects stay
            continue
        ok = True
        for file_field, alias, name in objects:
            try:
                file_field.storage.delete(name)
            except Exception as exc:  # the store's errors are many; the row waits
                ok = False
                logger.warning(
                    "run %s: the %s object of %s row %s was not deleted: %s",
                    run.pk,
                    file_field.name,
                    row.label,
                    values[0],
                    type(exc).__name__,
                    extra={"run_id": str(run.pk)},
                )
                continue
            if alias is not None:
                deleted.add((alias, name))
        if ok:
            gone.add(values[0])
    if kept:
        logger.warning(
            "run %s: %d %s rows kept: a hold on a tracked record of their objects was "
            "placed after the page's check",
            run.pk,
            kept,
            row.label,
            extra={"run_id": str(run.pk)},
        )
    _close_tracked(checked, deleted, marked, run=run, now=now)
    return gone


def _tracked_recheck(
    objects: set[tuple[str, str]], now: datetime
) -> tuple[dict[tuple[str, str], dict[int, int]], set[tuple[str, str]], set[int]]:
    """The last look at the tracked records of these objects (``(alias, key)``) before
    their deletes, under the records' locks, committed before any network call.

    Returns the records past their re-check now (object → record id → the
    row version read), the objects a hold covers now, and the records this
    look marked. A record past its
    re-check is marked as tracked objects are when claimed
    (``disposal_started_at``): a hold placed later no longer bumps its row
    version, and a renewal is refused, since its object may be gone.
    """
    if not objects:
        return {}, set(), set()
    checked: dict[tuple[str, str], dict[int, int]] = {}
    with transaction.atomic():
        records = (
            RetentionRecord.objects.select_for_update()
            .filter(
                storage__in={alias for alias, _ in objects},
                object_key__in={key for _, key in objects},
            )
            .exclude(state=RecordState.DELETED)
        )
        held = set(records.held().values_list("storage", "object_key")) & objects
        free = [
            r
            for r in records.filter(state__in=(RecordState.ACTIVE, RecordState.FAILED)).values(
                "id", "storage", "object_key", "row_version", "disposal_started_at"
            )
            if (r["storage"], r["object_key"]) in objects - held
        ]
        # One already marked (a reappeared object, to be probed) keeps its mark.
        marked = [r["id"] for r in free if r["disposal_started_at"] is None]
        if marked:
            RetentionRecord.objects.filter(id__any_of=marked).update(disposal_started_at=now)
        for r in free:
            checked.setdefault((r["storage"], r["object_key"]), {})[r["id"]] = r["row_version"]
    return checked, held, set(marked)


def _close_tracked(
    checked: dict[tuple[str, str], dict[int, int]],
    deleted: set[tuple[str, str]],
    marked: set[int],
    *,
    run: Run,
    now: datetime,
) -> None:
    """Records of objects just deleted with their rows: deleted, with their event,
    only while their row version is the one read at the re-check. A hold
    placed after it did not stop the delete, and the event says so. Records
    whose object stayed (its delete failed, or its row was kept) are given
    back: no longer past a re-check.
    """
    read = {rid: v for obj, found in checked.items() if obj in deleted for rid, v in found.items()}
    back = [
        rid
        for obj, found in checked.items()
        if obj not in deleted
        for rid in found
        if rid in marked
    ]
    if back:
        RetentionRecord.objects.filter(
            id__any_of=back, state__in=(RecordState.ACTIVE, RecordState.FAILED)
        ).update(disposal_started_at=None)
    if not read:
        return
    with transaction.atomic():
        locked = list(
            RetentionRecord.objects.select_for_update()
            .filter(id__any_of=list(read), state__in=(RecordState.ACTIVE, RecordState.FAILED))
            .values(*CLAIM_FIELDS)
        )
        records = [r for r in locked if r["row_version"] == read[r["id"]]]
        if len(records) < len(read):
            # Changed since the re-check (or closed by another): left as they are;
            # their object is gone, and their next claimer asks the store first.
            logger.warning(
                "run %s: %d tracked records of deleted rows' objects changed since their "
                "re-check and were left as they are",
                run.pk,
                len(read) - len(records),
                extra={"run_id": str(run.pk)},
            )
        if not records:
            return
        late: dict[int, int] = {}
        for data_class in {r["data_class"] for r in records}:
            late.update(
                holds_after_recheck(
                    [r["id"] for r in records if r["data_class"] == data_class],
                    data_class=data_class,
                )
            )
        RetentionRecord.objects.filter(id__any_of=[r["id"] for r in records]).update(
            state=RecordState.DELETED, deleted_at=now, lease_owner=None, lease_expires_at=None
        )
        appended = events_append(
            [
                event_for(
                    claimed_item(r),
                    run_id=run.pk,
                    outcome=EventOutcome.DELETED,
                    now=now,
                    reason=_closed_reason(late.get(r["id"])),
                )
                for r in records
            ],
            run_id=run.pk,
            now=now,
        )
        # Counted with their events, in the same transaction.
        run_counts_add(run.pk, Counter(deleted=len(appended)))


def _closed_reason(late_hold: int | None) -> str:
    reason = "deleted with the row that holds it"
    if late_hold is None:
        return reason
    return f"{reason}; hold #{late_hold} placed after the re-check, while the object was deleted"
