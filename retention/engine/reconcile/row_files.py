"""Reconciliation and the files of governed rows (a registered class's ``files=`` fields).

A file a row of such a model names is governed through its row: it goes
when its row goes, so it is no orphan, and it is never adopted as a record.
A file in such a field's own directory (the static part of its
``upload_to``) that no row names any more is a file whose row was deleted
but which stayed in the store: reported (``files_of_deleted_rows``, a
sample by digest), never acted on, since no version approved deleting it.

The names are read from each field's column in keyset pages, in the
order the store lists keys (by their bytes), and merged with the listing:
memory holds one page per field, never the table.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import connection, models
from django.db.models import F, FileField, Q
from django.db.models.functions import Collate
from django.db.models.lookups import GreaterThan

from retention.engine.rows.files import storage_alias
from retention.rows.registry import row_classes

PAGE = 1000
# The collation in which the database orders keys as S3 and Python do (by their bytes).
_BYTE_ORDER = {"postgresql": "C", "sqlite": "BINARY"}


@dataclass(frozen=True, slots=True)
class RowFileField:
    model: type[models.Model]  # the concrete model: every row of the table names its files
    name: str
    directory: str | None  # where the field writes, when its upload_to says so


def _directory(field: FileField) -> str | None:
    """The fixed directory a field's files go to ("documents/"), None when it is not fixed."""
    upload_to = field.upload_to
    if not isinstance(upload_to, str) or not upload_to:
        return None
    fixed = upload_to.split("%", 1)[0]
    if "%" in upload_to:
        fixed = fixed.rpartition("/")[0]
    fixed = fixed.strip("/")
    return f"{fixed}/" if fixed else None


def row_file_fields(alias: str) -> list[RowFileField]:
    """The ``files=`` fields of the registered classes whose storage is ``alias``."""
    seen: dict[tuple[str, str], RowFileField] = {}
    for _, row in sorted(row_classes().items()):
        for name in row.files:
            field = row.model._meta.get_field(name)
            if not isinstance(field, FileField) or storage_alias(field.storage) != alias:
                continue
            concrete = row.model._meta.concrete_model or row.model
            key = (concrete._meta.label, name)
            seen.setdefault(key, RowFileField(concrete, name, _directory(field)))
    return list(seen.values())


def _names(item: RowFileField, prefix: str) -> Iterator[str]:
    """The names of one field's column, in byte order, one keyset page at a time."""
    collation = _BYTE_ORDER.get(connection.vendor)
    column = Collate(item.name, collation) if collation else F(item.name)
    base = item.model._base_manager.exclude(
        Q(**{item.name: ""}) | Q(**{f"{item.name}__isnull": True})
    )
    if prefix:
        base = base.filter(**{f"{item.name}__startswith": prefix})
    after: str | None = None
    while True:
        page = base if after is None else base.filter(GreaterThan(column, after))
        names = list(page.order_by(column).values_list(item.name, flat=True).distinct()[:PAGE])
        yield from (str(n) for n in names)
        if len(names) < PAGE:
            return
        after = str(names[-1])


class RowFiles:
    """The governed row files of one store, walked beside its listing (keys ascending)."""

    def __init__(self, fields: list[RowFileField], prefix: str) -> None:
        self.directories = tuple(sorted({f.directory for f in fields if f.directory}))
        self._names = heapq.merge(*(_names(f, prefix) for f in fields))
        self._current: str | None = next(self._names, None)

    def named(self, key: str) -> bool:
        """Whether a row names ``key``; keys must be asked in ascending order."""
        while self._current is not None and self._current < key:
            self._current = next(self._names, None)
        return self._current == key

    def in_directory(self, key: str) -> bool:
        """Whether ``key`` is where a governed field writes its files."""
        return key.startswith(self.directories) if self.directories else False


def row_files_for(alias: str, prefix: str) -> RowFiles | None:
    """The store's governed row files, or None when no registered class keeps files there."""
    fields = row_file_fields(alias)
    return RowFiles(fields, prefix) if fields else None
