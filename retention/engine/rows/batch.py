"""A queued batch of a class of model rows: the class's next page, after its cursor.

The advance publishes one batch of a row class at a time, and a batch's
deliveries go one after another under its own row's lock, so the pages of
one class follow each other, each from where the last one ended (the cursor
in the run's report), and a batch delivered twice finds the page it did
already gone from the due rows.

Each batch first checks the class's registration against the version the
run works by (``rules.registration_recheck``): the worker may run newer
code than the process that started the run.

Locks are taken in the order every page's events take them: the chain head,
then the run's row (``events_append`` with the page's counts), never the run
first: a page of tracked objects finalizing beside it locks the head, then
the run, and the two would wait for each other.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils.dateparse import parse_datetime

from retention.chain.events import chain_head_lock
from retention.conf import settings
from retention.engine.rows.held import held_rows_record
from retention.engine.rows.page import rows_page
from retention.engine.rows.select import RowCursor
from retention.engine.rules import registration_recheck
from retention.engine.stepping import Stepper
from retention.models import PolicyVersion, Run, RunBatch, RunStatus
from retention.rows.registry import row_class_required
from retention.selectors.run_rules import run_rules


def rows_batch(
    run: Run, batch: RunBatch, now: datetime, *, version: PolicyVersion | None = None
) -> bool:
    """Dispose of the class's next page; return whether the class has more.

    ``version``: the one the run works by for the class, if the caller read it.
    """
    row = row_class_required(batch.data_class)
    with transaction.atomic():
        # A second delivery of this batch waits here for the first to commit.
        list(RunBatch.objects.select_for_update().filter(token=batch.token).values_list("pk"))
        current = Run.objects.get(pk=run.pk)
        if current.limit is not None:
            # A limit counts the claims of all the run's batches: decided under
            # the run's row, taken after the chain head, as a page's events take them.
            chain_head_lock()
            current = Run.objects.select_for_update().get(pk=run.pk)
        rules = run_rules(current)[batch.data_class]
        stepper = Stepper(
            run=current, clock=lambda: now, pages_in_flight=settings.MAX_BATCHES_IN_FLIGHT
        )
        if current.status != RunStatus.RUNNING or stepper.stop(now) is not None:
            return False  # closed, paused or past its deadline: the advance ends it
        if registration_recheck(current, rules, version=version):
            # This worker's code no longer registers the class as its version
            # approved (a deploy since the run started): nothing more of it.
            return False
        size = stepper.page_size(rules)
        before = current.report if isinstance(current.report, dict) else {}
        kept = before.get("row_cursors") or {}
        started = batch.data_class in kept
        cursor = _cursor(row.model._meta.pk.to_python, kept.get(batch.data_class))
        page = (
            rows_page(
                run=current,
                row=row,
                rules=rules,
                cursor=cursor if started else None,
                limit=size,
                now=now,
            )
            if size > 0
            else None
        )
        if page is not None and not page.stopped and page.seen < size:
            # The class swept to its end: its held rows, once (a second delivery adds nothing).
            held_rows_record(run=current, row=row, rules=rules, now=now)
        # The report as it is now (batches of other classes write it too).
        locked = Run.objects.select_for_update().get(pk=run.pk)
        report = dict(locked.report) if isinstance(locked.report, dict) else {}
        cursors = dict(report.get("row_cursors") or {})
        taken, more = 0, False
        if page is not None:
            taken = page.counts["claimed"]
            more = not (page.stopped or page.seen < size)
            if page.cursor is not None:
                cursor = page.cursor
            cursors[batch.data_class] = (
                [cursor[0].isoformat(), str(cursor[1])] if cursor is not None else None
            )
            report["row_cursors"] = cursors
            if not more:
                report.setdefault("rows_done", {})[batch.data_class] = True
        else:
            report.setdefault("rows_done", {})[batch.data_class] = True
        Run.objects.filter(pk=run.pk).update(report=report)
        RunBatch.objects.filter(token=batch.token).update(size=F("size") + taken)
    return more


def _cursor(to_python: Callable[[Any], Any], value: list[str] | None) -> RowCursor | None:
    """A cursor as the run's report keeps it: ``[time, pk as text]``."""
    if not value:
        return None
    at = parse_datetime(value[0])
    if at is None:
        return None
    return at, to_python(value[1])
