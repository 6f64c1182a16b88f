"""Selecting a page of a class of model rows: the due rows, the keyset, the locks.

Shared by deleting (``retention.engine.rows.page``) and redacting
(``retention.engine.rows.redact``) pages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sized
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection, models
from django.db.models import Q, Value

from retention.conf import settings
from retention.models import Run, RunMode
from retention.rows.registry import RowClass
from retention.selectors.erasure_execution import erase_rows
from retention.selectors.holds import RowHolds, held_rows
from retention.selectors.run_rules import ClassRules

ReadT = TypeVar("ReadT", bound=Sized | int)

# A page read again because holds were placed while it was read, at most this
# often in a row; then it takes nothing (a page left for the next run).
_HOLD_READS = 5

# (time, pk) of the last row a page looked at: the next page starts after it.
# The time as the column holds it (a date for a DateField): compared with it.
RowCursor = tuple[datetime, Any]


@dataclass
class RowPage:
    """What one page did: its counts, and where the next page starts."""

    counts: Counter[str] = field(default_factory=Counter)
    cursor: RowCursor | None = None
    seen: int = 0
    stopped: str = ""


# An erase run's pages walk the rows in primary-key order, each due when the
# run started: their own time column plays no part (it may even be empty).
ERASE_TIME = "retention_erase_due"


@dataclass(frozen=True, eq=False)
class EraseRows(RowClass):
    """A class's rows as an erase run walks them (``erase_view``)."""

    @property
    def time_field(self) -> str:
        return ERASE_TIME

    @property
    def by_expiry(self) -> bool:
        return True


def erase_view(row: RowClass) -> RowClass:
    """The class's registration, its pages ordered and stamped as an erase run's."""
    return EraseRows(**{f.name: getattr(row, f.name) for f in fields(row)})


def rows_due(row: RowClass, rules: ClassRules, run: Run) -> models.QuerySet[Any]:
    """The class's rows past the run's cutoff, in its scope and the run's tenant
    (an erase run: its request's rows within the frozen bound, whatever their age)."""
    if run.mode == RunMode.ERASE:
        due = Value(run.started_at, output_field=models.DateTimeField())
        erasing: models.QuerySet[Any] = erase_rows(row, run).annotate(**{ERASE_TIME: due})
        return erasing
    assert rules.row_cutoff is not None
    qs = row.queryset().filter(**{f"{row.time_field}__lte": rules.row_cutoff})
    if run.tenant_id:
        if not row.tenant_field:
            return qs.none()
        qs = qs.filter(**{row.tenant_field: run.tenant_id})
    return qs


def after_cursor(row: RowClass, cursor: RowCursor | None) -> Q:
    if cursor is None:
        return Q()
    at, pk = cursor
    t = row.time_field
    # After (at, pk) is "time >= at, but not the rows at `at` up to pk". The
    # ">=" is the index bound: without it PostgreSQL would walk every row
    # behind the cursor (all the redacted rows behind a class's mark) on every
    # page. The exclusion is spelled as a NOT, not as "time > at OR (time = at
    # AND pk > ...)": the planner takes that OR for a second, independent
    # range, underestimates the page's rows by the table's size (376 for
    # 20,000 at 1,000,000 rows), and sorts a bitmap scan of all of them
    # instead of reading the index in order.
    return Q(**{f"{t}__gte": at}) & ~Q(**{t: at, "pk__lte": pk})


def page_timeouts() -> None:
    """Bound the page's waits for locks and its statements (PostgreSQL; local to the page)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('lock_timeout', %s, true), "
            "set_config('statement_timeout', %s, true)",
            [f"{settings.ROWS_LOCK_TIMEOUT_MS}ms", f"{settings.ROWS_STATEMENT_TIMEOUT_MS}ms"],
        )


def locked_page(
    qs: models.QuerySet[Any], row: RowClass, cursor: RowCursor | None
) -> models.QuerySet[Any]:
    """The rows after ``cursor`` in keyset order, locked as read; locked ones skipped."""
    page = qs.filter(after_cursor(row, cursor)).order_by(row.time_field, "pk")
    if connection.features.has_select_for_update_skip_locked:
        of = ("self",) if connection.features.has_select_for_update_of else ()
        page = page.select_for_update(skip_locked=True, of=of)
    return page


def select_page(
    qs: models.QuerySet[Any], row: RowClass, cursor: RowCursor | None, limit: int
) -> list[tuple[Any, datetime, Any]]:
    """Lock and read (pk, time, tenant) of the next ``limit`` rows; skip locked ones."""
    tenant = row.tenant_field or "pk"
    page = locked_page(qs, row, cursor)
    rows = list(page.values_list("pk", row.time_field, tenant)[:limit])
    if not row.tenant_field:
        return [(pk, at, None) for pk, at, _ in rows]
    return rows


def unheld_read(
    row: RowClass, qs: models.QuerySet[Any], read: Callable[[models.QuerySet[Any]], ReadT]
) -> tuple[RowHolds, ReadT]:
    """``read(qs without the held rows)`` (what it read, or how many rows it took),
    and the holds it was read with.

    The holds are read now (inside the page's transaction, right before the
    statement that locks and re-checks its rows), and ``RowHolds.unheld``
    makes that statement take nothing should any other hold that can touch
    the class be active when it starts; an empty read with such a hold is
    done again with it. So the statement excludes every hold committed
    before it started, however long the page took to get there: a hold
    committed after it is placed after the re-check, as for tracked records.
    """
    holds = held_rows(row.data_class, label=row.label, tenant_field=row.tenant_field)
    for _ in range(_HOLD_READS):
        found = read(holds.unheld(qs, row.tenant_field))
        if found or not holds.placed_since():
            return holds, found
        holds = held_rows(row.data_class, label=row.label, tenant_field=row.tenant_field)
    return holds, read(qs.none())
