"""Redacting model rows: the row stays, its personal fields take their strategies' values.

A redacted row is never taken again, and finding the next rows to redact
does not walk the ones already done: each class keeps a mark (``RowMark``,
in ``(time, pk)`` order) before which every row is redacted or listed as
skipped (``RowSkip``: held, or its strategy failed). A run looks at the
skipped rows first, then pages on from the mark through the time index.
Held rows are recorded once per run, class, hold and tenant (``held``),
not by the pages that list them; a page asks which of its locked rows a
hold covers with deletion's own filter (``RowHolds.unheld``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import models, transaction

from retention import redaction
from retention.engine.rows.evidence import RowEvents
from retention.engine.rows.select import RowPage, page_timeouts, rows_due, select_page, unheld_read
from retention.models import EventOutcome, RowMark, RowSkip, Run
from retention.rows.registry import RowClass
from retention.selectors.run_rules import ClassRules

logger = logging.getLogger("retention.engine")


def row_mark(row: RowClass) -> tuple[datetime, Any] | None:
    """Where the class's redaction has got to, as a keyset cursor."""
    mark = RowMark.objects.filter(data_class=row.data_class).first()
    if mark is None:
        return None
    return mark.through_time, row.model._meta.pk.to_python(mark.through_pk)


def redact_page(
    *, run: Run, row: RowClass, rules: ClassRules, first: bool, limit: int, now: datetime
) -> RowPage:
    """Redact the next page after the class's mark (the first page of a run also
    retries the rows skipped before); return a ``RowPage``."""
    result = RowPage()
    due = rows_due(row, rules, run)
    if first:
        _retry_skipped(run, row, rules, due, result, limit, now)
    with transaction.atomic():
        page_timeouts()
        mark = row_mark(row)
        rows = select_page(due, row, mark, limit)
        result.seen = len(rows)
        if rows:
            _redact(run, row, rules, due, rows, result, now)
            last_time, last_pk = rows[-1][1], rows[-1][0]
            RowMark.objects.update_or_create(
                data_class=row.data_class,
                defaults={
                    "through_time": last_time,
                    "through_pk": str(last_pk),
                    "updated_at": now,
                },
            )
            result.cursor = (last_time, last_pk)
    return result


def erase_redact_page(
    *,
    run: Run,
    row: RowClass,
    rules: ClassRules,
    cursor: tuple[datetime, Any] | None,
    limit: int,
    now: datetime,
) -> RowPage:
    """An erase run's next page of its request's rows, after the run's own cursor.

    The class's mark is retention's walk, not the request's: it is neither
    read nor moved. A held row is not listed as skipped either; the class's
    held evidence records it when the run has swept the class (``held``).
    """
    result = RowPage(cursor=cursor)
    due = rows_due(row, rules, run)
    with transaction.atomic():
        page_timeouts()
        rows = select_page(due, row, cursor, limit)
        result.seen = len(rows)
        if rows:
            _redact(run, row, rules, due, rows, result, now, list_skipped=False)
            result.cursor = (rows[-1][1], rows[-1][0])
    return result


def _retry_skipped(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    due: models.QuerySet[Any],
    result: RowPage,
    limit: int,
    now: datetime,
) -> None:
    after = ""
    while True:
        with transaction.atomic():
            page_timeouts()
            skips = list(
                RowSkip.objects.filter(data_class=row.data_class, subject_pk__gt=after)
                .order_by("subject_pk")
                .values_list("subject_pk", flat=True)[:limit]
            )
            if not skips:
                return
            after = skips[-1]
            pk_field = row.model._meta.pk
            rows = select_page(
                due.filter(pk__in=[pk_field.to_python(s) for s in skips]), row, None, limit
            )
            # A skipped row no longer due (out of scope now) leaves the list.
            present = {str(r[0]) for r in rows}
            RowSkip.objects.filter(
                data_class=row.data_class, subject_pk__in=[s for s in skips if s not in present]
            ).delete()
            if rows:
                _redact(run, row, rules, due, rows, result, now)
        if len(skips) < limit:
            return


def _redact(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    due: models.QuerySet[Any],
    rows: Sequence[tuple[Any, datetime, Any]],
    result: RowPage,
    now: datetime,
    *,
    list_skipped: bool = True,
) -> None:
    """Redact the locked, unheld rows; list the held ones as skipped (inside the page).

    Which rows a hold covers is asked once the rows are locked, with the
    filter deletion's select uses (``RowHolds.unheld``), as the holds are
    when that statement starts. A held row gets no event here: listed as
    skipped, it is among the rows the class's held evidence records once
    the run has swept the class (``held``), and the next run looks at
    it again.
    """
    counts: Counter[str] = Counter()
    events = RowEvents(run=run, row=row, rules=rules, now=now)
    _holds, unheld = unheld_read(
        row,
        due.filter(pk__in=[r[0] for r in rows]),
        lambda page: set(page.values_list("pk", flat=True)),
    )
    held = [r for r in rows if r[0] not in unheld]
    free = [r for r in rows if r[0] in unheld]
    if held and list_skipped:
        RowSkip.objects.bulk_create(
            [
                RowSkip(
                    data_class=row.data_class,
                    subject_pk=str(r[0]),
                    reason="legal hold applies",
                    since=now,
                )
                for r in held
            ],
            ignore_conflicts=True,
        )
    if free:
        counts["claimed"] += len(free)
        pks = [r[0] for r in free]
        _apply(row, pks)
        if list_skipped:
            RowSkip.objects.filter(
                data_class=row.data_class, subject_pk__in=[str(pk) for pk in pks]
            ).delete()
        events.add(EventOutcome.REDACTED, free)
        counts["redacted"] += len(free)
    events.append(counts=counts)
    result.counts.update(counts)


def _apply(row: RowClass, pks: list[Any]) -> None:
    """Write the strategies' values: one UPDATE when none depends on the old value."""
    manager = row.model._base_manager
    meta = row.model._meta
    constant: dict[str, Any] = {}
    computed: dict[str, Any] = {}
    for name, strategy in row.redact.items():
        field = meta.get_field(name)
        assert isinstance(field, models.Field)  # the checks refuse relations' reverse sides
        fixed, value = redaction.sql_constant(strategy, field)
        if fixed:
            constant[field.name] = value
        else:
            computed[name] = strategy
    if constant:
        manager.filter(pk__in=pks).update(**constant)
    if not computed:
        return
    names = list(computed)
    objs = []
    for values in manager.filter(pk__in=pks).values_list("pk", *names):
        obj = row.model(pk=values[0])
        for name, old in zip(names, values[1:], strict=True):
            field = meta.get_field(name)
            assert isinstance(field, models.Field)  # the checks refuse relations' reverse sides
            setattr(obj, name, redaction.apply(computed[name], old, field))
        objs.append(obj)
    manager.bulk_update(objs, names, batch_size=500)
