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

from retention.engine.claims import CLAIM_FIELDS, claimed_item
from retention.engine.events import event_for
from retention.engine.ledger import run_counts_add
from retention.models import EventOutcome, LegalHold, RecordState, RetentionRecord, Run
from retention.rows.registry import RowClass
from retention.services.evidence import events_append

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
    the pks whose objects are all gone now."""
    fields = _file_fields(row)
    gone: set[Any] = set()
    closed: list[tuple[str, str]] = []
    for values in rows:
        ok = True
        for (file_field, alias), name in zip(fields, values[3:], strict=True):
            if not name:
                continue
            try:
                file_field.storage.delete(str(name))
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
                closed.append((alias, str(name)))
        if ok:
            gone.add(values[0])
    if closed:
        _close_tracked(closed, run=run, now=now)
    return gone


def _close_tracked(objects: list[tuple[str, str]], *, run: Run, now: datetime) -> None:
    """Records of objects just deleted with their rows: deleted, with their event."""
    keys = {key for _, key in objects}
    aliases = {alias for alias, _ in objects}
    with transaction.atomic():
        records = list(
            RetentionRecord.objects.select_for_update()
            .filter(
                object_key__in=keys,
                storage__in=aliases,
                state__in=(RecordState.ACTIVE, RecordState.FAILED),
            )
            .values(*CLAIM_FIELDS)
        )
        wanted = set(objects)
        records = [r for r in records if (r["storage"], r["object_key"]) in wanted]
        if not records:
            return
        RetentionRecord.objects.filter(pk__in=[r["id"] for r in records]).update(
            state=RecordState.DELETED, deleted_at=now, lease_owner=None, lease_expires_at=None
        )
        appended = events_append(
            [
                event_for(
                    claimed_item(r),
                    run_id=run.pk,
                    outcome=EventOutcome.DELETED,
                    now=now,
                    reason="deleted with the row that holds it",
                )
                for r in records
            ],
            run_id=run.pk,
            now=now,
        )
        # Counted with their events, in the same transaction.
        run_counts_add(run.pk, Counter(deleted=len(appended)))
