"""A page of a class of model rows: one short transaction on a host's table.

A page is selected in ``(time, pk)`` order after the run's cursor, under row
locks (``FOR UPDATE SKIP LOCKED``: a row another worker holds is left to it),
re-checked in the same statement (past the run's fixed cutoff, in the
class's scope, not covered by a hold as the holds are when it starts: they
are read inside the page, ``select.unheld_read``), then deleted or
redacted and recorded, all before the commit. Held rows are left out of the
select: a run records them once per class, hold and tenant when it has swept
the class (``held``). No lock is held across pages, and each page runs
under ``RETENTION_ROWS_LOCK_TIMEOUT_MS`` and
``RETENTION_ROWS_STATEMENT_TIMEOUT_MS``.

A delete goes through Django's deletion collector, so the host's signals
fire and its cascade is Django's; a page whose collector would touch a
model outside the cascade approved with the version rolls back, and the
class stops for review. A row that a PROTECT relation blocks is skipped.
The objects of ``files`` fields are deleted first, outside the page's
transaction (the store is a network call), then the rows; a crash in between
leaves rows whose objects are gone, which the next run deletes (absent is a
success). A hold placed once a row's objects have gone keeps the row, and
the row's event says its objects went before the hold.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import models, router, transaction
from django.db.models.deletion import Collector, ProtectedError, RestrictedError

from retention.engine.rows.evidence import RowEvents, new_events_trusted
from retention.engine.rows.files import files_delete, held_file_rows
from retention.engine.rows.plain import (
    CascadeViolation,
    delete_ids,
    delete_returning,
    plain_delete,
    refuse_outside,
    returning_columns,
)
from retention.engine.rows.redact import erase_redact_page, redact_page
from retention.engine.rows.select import (
    RowCursor,
    RowPage,
    after_cursor,
    page_timeouts,
    rows_due,
    select_page,
    unheld_read,
)
from retention.models import Disposition, EventOutcome, Policy, Run, RunMode
from retention.rows.cascade import collected_models, label
from retention.rows.registry import RowClass
from retention.selectors.holds import RowHolds
from retention.selectors.run_rules import ClassRules

logger = logging.getLogger("retention.engine")


@new_events_trusted
def rows_page(
    *,
    run: Run,
    row: RowClass,
    rules: ClassRules,
    cursor: RowCursor | None,
    limit: int,
    now: datetime,
) -> RowPage:
    """Dispose of the next page of a class of model rows; see the module docstring.

    Its events are trusted to be new (the rows were there, locked); should
    one be recorded already, the page rolls back and is done again with its
    keys looked up (``new_events_trusted``).
    """
    if rules.disposition == Disposition.REDACT and run.mode == RunMode.ERASE:
        return erase_redact_page(run=run, row=row, rules=rules, cursor=cursor, limit=limit, now=now)
    if rules.disposition == Disposition.REDACT:
        return redact_page(
            run=run, row=row, rules=rules, first=cursor is None, limit=limit, now=now
        )
    due = rows_due(row, rules, run)
    if row.files:
        return _delete_with_files(run, row, rules, due, cursor, limit, now)
    result = RowPage(cursor=cursor)
    db = router.db_for_write(row.model)
    returning = returning_columns(row, db) if plain_delete(row, db) else None
    try:
        with transaction.atomic():
            page_timeouts()
            # The rows a hold covers are not the page's (``held`` records
            # them); the holds are read here, inside the page, and its select
            # sees any placed since (``unheld_read``).
            if returning is not None:
                unheld_read(
                    row,
                    due,
                    lambda free: delete_returning(
                        run, row, rules, free, cursor, limit, returning, result, now
                    ),
                )
            else:
                holds, rows = unheld_read(
                    row, due, lambda free: select_page(free, row, cursor, limit)
                )
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
    """Delete the locked rows, with their events (inside the page).

    The select left the held rows out; a row a hold covers all the same
    (the holds and the select are one spelling) is kept, and the class's
    held evidence (``held``) records it.
    """
    result.seen = len(rows)
    if not rows:
        return
    result.cursor = (rows[-1][1], rows[-1][0])
    counts = result.counts
    events = RowEvents(run=run, row=row, rules=rules, now=now)
    _held, free = holds.split(rows)
    counts["claimed"] += len(free)
    db = router.db_for_write(row.model)
    if free and plain_delete(row, db):
        refuse_outside(rules, row, {label(row.model)})
        delete_ids(row, db, [r[0] for r in free])
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
            refuse_outside(rules, row, collected_models(collector))
            collector.delete()
    events.add(EventOutcome.DELETED, free)
    counts["deleted"] += len(free)
    events.append(counts=counts)


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
    cursor: RowCursor | None,
    limit: int,
    now: datetime,
) -> RowPage:
    """Rows with files: read the page, delete its unheld rows' objects, then the rows.

    The objects are deleted with no row lock held (a network call); the rows
    are locked, re-checked and deleted afterwards, and only those whose
    objects are gone (or absent) go. The holds are read again right before
    the objects go, and once more under the rows' locks: a row a hold came
    to cover meanwhile stays. Should its objects be gone already (the hold
    came after their re-check), its event says so.
    """
    result = RowPage(cursor=cursor)
    columns = ("pk", row.time_field, row.tenant_field or "pk", *row.files)
    _holds, page = unheld_read(
        row,
        due.filter(after_cursor(row, cursor)),
        lambda free: list(free.order_by(row.time_field, "pk").values_list(*columns)[:limit]),
    )
    if not page:
        return result
    # The select left out the rows a hold covers; an object that is also a
    # tracked record under a hold keeps its row too (``held`` records it
    # with the held rows, at the class's end).
    file_held = held_file_rows(row=row, rows=page)
    keys = [r[0] for r in page if r[0] not in file_held]
    _holds, still = unheld_read(
        row, due.filter(pk__in=keys), lambda free: set(free.values_list("pk", flat=True))
    )
    candidates = [r for r in page if r[0] in still]
    gone = files_delete(row=row, rows=candidates, run=run, now=now)
    try:
        with transaction.atomic():
            page_timeouts()
            holds, locked = unheld_read(
                row,
                due.filter(pk__in=[r[0] for r in page]),
                lambda free: select_page(free, row, None, limit),
            )
            ready = [r for r in locked if r[0] in gone]
            _delete_locked(run, row, rules, ready, holds, result, now)
            taken = {r[0] for r in locked}
            _late_held(
                run,
                row,
                rules,
                [r for r in candidates if r[0] in gone and r[0] not in taken],
                holds,
                result,
                now,
            )
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
    except CascadeViolation as exc:
        _stop_for_review(row, result, str(exc), now)
    result.cursor = (page[-1][1], page[-1][0])
    result.seen = len(page)
    return result


def _late_held(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    rows: Sequence[tuple[Any, ...]],
    holds: RowHolds,
    result: RowPage,
    now: datetime,
) -> None:
    """Rows whose objects went before a hold came to cover them: the row stays.

    A row of ``rows`` (objects gone, not locked by the page) that no hold
    covers was locked by another worker, or left the class: not ours.
    """
    by_hold: dict[int, list[tuple[Any, ...]]] = {}
    for r in rows:
        hold_id = holds.first_hold(r[0], r[2] if row.tenant_field else None)
        if hold_id is not None:
            by_hold.setdefault(hold_id, []).append(r)
    for hold_id, kept in sorted(by_hold.items()):
        _rows_kept(
            run,
            row,
            rules,
            kept,
            result,
            now,
            outcome=EventOutcome.SKIPPED_HELD,
            count="skipped_held",
            reason=f"hold #{hold_id} placed after the re-check; its objects were deleted "
            "before it, and the row is kept",
        )


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
    kept: Counter[str] = Counter({count: len(rows)})
    events.append(counts=kept)
    result.counts.update(kept)


def _stop_for_review(row: RowClass, result: RowPage, reason: str, now: datetime) -> None:
    """The page rolled back: it counts nothing, and the class waits for a new version."""
    logger.error("data class %s stopped for review: %s", row.data_class, reason)
    Policy.objects.filter(data_class=row.data_class).update(review_reason=reason, review_since=now)
    result.counts.clear()
    result.stopped = reason
