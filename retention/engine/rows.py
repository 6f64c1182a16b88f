"""Model rows as data classes: one short transaction per page of a host's table.

A page is selected in ``(time, pk)`` order after the run's cursor, under row
locks (``FOR UPDATE SKIP LOCKED``: a row another worker holds is left to it),
re-checked in the same statement (past the run's fixed cutoff, in the
class's scope), sorted into held and not held by the holds as they are now,
then deleted or redacted and recorded, all before the commit. No lock is held
across pages, and each page runs under ``RETENTION_ROWS_LOCK_TIMEOUT_MS`` and
``RETENTION_ROWS_STATEMENT_TIMEOUT_MS``.

A delete goes through Django's deletion collector, so the host's signals
fire and its cascade is Django's; a page whose collector would touch a
model outside the cascade approved with the version rolls back, and the
class stops for review. A row that a PROTECT relation blocks is skipped.
The objects of ``files`` fields are deleted first, outside the page's
transaction (the store is a network call), then the rows; a crash in between
leaves rows whose objects are gone, which the next run deletes (absent is a
success).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connections, models, router, transaction
from django.db.models.deletion import Collector, ProtectedError, RestrictedError

from retention.engine.ledger import run_counts_add
from retention.engine.row_evidence import RowEvents
from retention.engine.row_files import files_delete, held_file_rows
from retention.engine.row_redact import redact_page
from retention.engine.row_select import (
    RowCursor,
    RowPage,
    after_cursor,
    locked_page,
    page_timeouts,
    rows_due,
    select_page,
)
from retention.engine.rules import ClassRules
from retention.models import Disposition, EventOutcome, Policy, Run
from retention.rows.cascade import cascade_models, collected_models, label
from retention.rows.registry import RowClass
from retention.selectors.holds import RowHolds, held_rows

logger = logging.getLogger("retention.engine")


class CascadeViolation(Exception):
    """A page's delete would touch models outside the approved cascade."""


def rows_page(
    *,
    run: Run,
    row: RowClass,
    rules: ClassRules,
    cursor: RowCursor | None,
    limit: int,
    now: datetime,
) -> RowPage:
    """Dispose of the next page of a class of model rows; see the module docstring."""
    if rules.disposition == Disposition.REDACT:
        return redact_page(
            run=run, row=row, rules=rules, first=cursor is None, limit=limit, now=now
        )
    holds = held_rows(row.data_class, label=row.label, tenant_field=row.tenant_field)
    due = rows_due(row, rules, run)
    if row.files:
        return _delete_with_files(run, row, rules, due, holds, cursor, limit, now)
    result = RowPage(cursor=cursor)
    db = router.db_for_write(row.model)
    returning = _returning(row, db) if holds.empty and _plain_delete(row, db) else None
    try:
        with transaction.atomic():
            page_timeouts()
            if returning is not None:
                _delete_returning(run, row, rules, due, cursor, limit, returning, result, now)
            else:
                rows = select_page(due, row, cursor, limit)
                _delete_locked(run, row, rules, rows, holds, result, now)
    except CascadeViolation as exc:
        _stop_for_review(row, result, str(exc), now)
    return result


def _delete_locked(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    rows: Sequence[tuple[Any, datetime, Any]],
    holds: RowHolds,
    result: RowPage,
    now: datetime,
) -> None:
    """Delete the locked rows that no hold covers, with their events (inside the page)."""
    result.seen = len(rows)
    if not rows:
        return
    result.cursor = (rows[-1][1], rows[-1][0])
    counts = result.counts
    events = RowEvents(run=run, row=row, rules=rules, now=now)
    held, free = holds.split(rows)
    events.add(EventOutcome.SKIPPED_HELD, held, reason="legal hold applies")
    # Counted with their events, as held records are (``held_skips_record``).
    counts["skipped_held"] += len(held)
    counts["claimed"] += len(free)
    db = router.db_for_write(row.model)
    if free and _plain_delete(row, db):
        _refuse_outside(rules, row, {label(row.model)})
        _delete_ids(row, db, [r[0] for r in free])
    elif free:
        protected, collector = _collect(row, db, [r[0] for r in free])
        if protected:
            blocked = [r for r in free if r[0] in protected]
            free = [r for r in free if r[0] not in protected]
            events.add(
                EventOutcome.SKIPPED_PROTECTED, blocked, reason="a PROTECT relation blocks it"
            )
            counts["skipped_protected"] += len(blocked)
        if collector is not None:
            _refuse_outside(rules, row, collected_models(collector))
            collector.delete()
    events.add(EventOutcome.DELETED, free)
    counts["deleted"] += len(free)
    events.append()
    run_counts_add(run.pk, counts)


def _returning(row: RowClass, db: str) -> str | None:
    """The ``RETURNING`` list of (pk, time, tenant) when all three are the table's columns."""
    columns = [_own_column(row, name) for name in ("pk", row.time_field, row.tenant_field or "pk")]
    if any(column is None for column in columns):
        return None  # a lookup path, or a value the ORM would convert: read it first
    quote = connections[db].ops.quote_name
    return ", ".join(quote(str(column)) for column in columns)


def _own_column(row: RowClass, name: str) -> str | None:
    """The column of the model's own field ``name``, if the ORM reads it unconverted."""
    meta = row.model._meta
    try:
        field = meta.pk if name == "pk" else meta.get_field(name)
    except FieldDoesNotExist:
        return None
    if not isinstance(field, models.Field) or hasattr(field, "from_db_value"):
        return None
    if field.model is not row.model:
        return None
    return field.column


def _delete_returning(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    due: models.QuerySet[Any],
    cursor: RowCursor | None,
    limit: int,
    returning: str,
    result: RowPage,
    now: datetime,
) -> None:
    """A page of a class no hold touches, in one statement: lock, re-check, delete.

    ``DELETE ... WHERE pk = ANY(ARRAY(<the page select, FOR UPDATE SKIP
    LOCKED>)) RETURNING pk, time, tenant``: what the two statements of a held
    class do, without the ids going out and back in. (``pk IN (<select>)``
    is planned as a join, ten times slower; the array makes the select run
    first, then the delete goes by the primary key.)
    """
    db = router.db_for_write(row.model)
    connection = connections[db]
    quote = connection.ops.quote_name
    table, pk = quote(row.model._meta.db_table), quote(_pk_column(row))
    page = locked_page(due, row, cursor).values_list("pk")[:limit]
    select, params = page.query.get_compiler(using=db).as_sql()
    with connection.cursor() as db_cursor:
        db_cursor.execute(
            f"DELETE FROM {table} WHERE {pk} = ANY(ARRAY({select})) RETURNING {returning}",
            params,
        )
        # RETURNING follows no order; the keyset (and the events) do.
        rows = sorted(db_cursor.fetchall(), key=lambda r: (r[1], r[0]))
    result.seen = len(rows)
    if not rows:
        return
    _refuse_outside(rules, row, {label(row.model)})
    result.cursor = (rows[-1][1], rows[-1][0])
    if not row.tenant_field:
        rows = [(key, at, None) for key, at, _ in rows]
    events = RowEvents(run=run, row=row, rules=rules, now=now)
    events.add(EventOutcome.DELETED, rows)
    result.counts["claimed"] += len(rows)
    result.counts["deleted"] += len(rows)
    events.append()
    run_counts_add(run.pk, result.counts)


def _refuse_outside(rules: ClassRules, row: RowClass, touched: set[str]) -> None:
    """Stop a page whose delete would touch models the approved cascade does not name."""
    outside = touched - cascade_models(rules.cascade or {})
    if outside:
        raise CascadeViolation(
            f"deleting rows of {row.label} would also touch "
            f"{', '.join(sorted(outside))}, outside the cascade approved with "
            f"version {rules.version_number}"
        )


def _plain_delete(row: RowClass, db: str) -> bool:
    """Whether deleting the rows is one statement and nothing else (PostgreSQL).

    That is when Django's collector would only fast-delete the page: no
    delete signal listens to the model, no relation cascades from it, no
    parent or generic relation. Its ``DELETE ... WHERE pk IN (...)`` binds
    the page's 1,000 ids one by one; the same delete takes them as one
    array parameter. Asked on every page: a receiver may connect at any time.
    """
    if connections[db].vendor != "postgresql":
        return False
    # A model class is what the collector asks about (django-stubs types only instances).
    return Collector(using=db, origin=None).can_fast_delete(row.model)  # type: ignore[arg-type]


def _delete_ids(row: RowClass, db: str, pks: list[Any]) -> None:
    connection = connections[db]
    meta = row.model._meta
    quote = connection.ops.quote_name
    values = [meta.pk.get_db_prep_value(pk, connection) for pk in pks]
    table, pk = quote(meta.db_table), quote(_pk_column(row))
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {pk} = ANY(%s)", [values])


def _pk_column(row: RowClass) -> str:
    column = row.model._meta.pk.column
    assert column is not None  # a concrete field; django-stubs types columns optional
    return column


def _collect(row: RowClass, db: str, pks: list[Any]) -> tuple[set[Any], Collector | None]:
    """A collector over the rows that can go, and the rows a PROTECT relation blocks."""
    manager = row.model._base_manager
    page = manager.filter(pk__in=pks)
    # The origin is what the host's delete signals see, as for QuerySet.delete().
    collector = Collector(using=db, origin=page)
    try:
        collector.collect(page)
        return set(), collector
    except (ProtectedError, RestrictedError):
        pass
    # Some rows are blocked: find which, one by one (rare, and only on such pages).
    protected: set[Any] = set()
    for pk in pks:
        one = manager.filter(pk=pk)
        try:
            Collector(using=db, origin=one).collect(one)
        except (ProtectedError, RestrictedError):
            protected.add(pk)
    rest = [pk for pk in pks if pk not in protected]
    if not rest:
        return protected, None
    page = manager.filter(pk__in=rest)
    collector = Collector(using=db, origin=page)
    collector.collect(page)
    return protected, collector


def _delete_with_files(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    due: models.QuerySet[Any],
    holds: RowHolds,
    cursor: RowCursor | None,
    limit: int,
    now: datetime,
) -> RowPage:
    """Rows with files: read the page, delete its unheld rows' objects, then the rows.

    The objects are deleted with no row lock held (a network call); the rows
    are locked, re-checked and deleted afterwards, and only those whose
    objects are gone (or absent) go.
    """
    result = RowPage(cursor=cursor)
    page = list(
        due.filter(after_cursor(row, cursor))
        .order_by(row.time_field, "pk")
        .values_list("pk", row.time_field, row.tenant_field or "pk", *row.files)[:limit]
    )
    if not page:
        return result
    candidates = [r for r in page if not holds.covers(r[0], r[2] if row.tenant_field else None)]
    # An object that is also a tracked record under a hold keeps its row too.
    file_held = held_file_rows(row=row, rows=candidates)
    candidates = [r for r in candidates if r[0] not in file_held]
    gone = files_delete(row=row, rows=candidates, run=run, now=now)
    try:
        with transaction.atomic():
            page_timeouts()
            locked = select_page(due.filter(pk__in=[r[0] for r in page]), row, None, limit)
            ready = [r for r in locked if r[0] in gone or holds.covers(r[0], r[2])]
            _delete_locked(run, row, rules, ready, holds, result, now)
            _rows_kept(
                run,
                row,
                rules,
                [r for r in candidates if r[0] not in gone],
                result,
                now,
                outcome=EventOutcome.FAILED,
                count="failed",
                reason="its objects could not be deleted; the row waits for the next run",
            )
            _rows_kept(
                run,
                row,
                rules,
                [r for r in page if r[0] in file_held],
                result,
                now,
                outcome=EventOutcome.SKIPPED_HELD,
                count="skipped_held",
                reason="one of its objects is a tracked record under a legal hold",
            )
    except CascadeViolation as exc:
        _stop_for_review(row, result, str(exc), now)
    result.cursor = (page[-1][1], page[-1][0])
    result.seen = len(page)
    return result


def _rows_kept(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    rows: Sequence[tuple[Any, ...]],
    result: RowPage,
    now: datetime,
    *,
    outcome: str,
    count: str,
    reason: str,
) -> None:
    """Rows of a page with files that stay, for the next run: counted under
    ``count``, with their events of ``outcome`` (inside the page)."""
    if not rows:
        return
    events = RowEvents(run=run, row=row, rules=rules, now=now)
    events.add(
        outcome, [(r[0], r[1], r[2] if row.tenant_field else None) for r in rows], reason=reason
    )
    events.append()
    kept: Counter[str] = Counter({count: len(rows)})
    run_counts_add(run.pk, kept)
    result.counts.update(kept)


def _stop_for_review(row: RowClass, result: RowPage, reason: str, now: datetime) -> None:
    """The page rolled back: it counts nothing, and the class waits for a new version."""
    logger.error("data class %s stopped for review: %s", row.data_class, reason)
    Policy.objects.filter(data_class=row.data_class).update(review_reason=reason, review_since=now)
    result.counts.clear()
    result.stopped = reason
