"""One class of model rows within a run: its pages in order, until none is left.

The executors ask a ``RowSweep`` for the next page as they ask the claims for
the next page of records; the sweep keeps the class's keyset cursor and knows
when the class is done (a page that found nothing), or stopped for review.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from retention.engine.row_select import RowCursor, RowPage
from retention.engine.rows import rows_page
from retention.engine.rules import ClassRules
from retention.models import Policy, Run
from retention.rows.registry import row_class, row_class_required


def row_class_names(run: Run, rules: Mapping[str, ClassRules]) -> list[str]:
    """The run's classes that are registered model rows with a version to work by."""
    return [
        name
        for name in run.data_classes
        if row_class(name) is not None and rules[name].row_cutoff is not None
    ]


class RowSweep:
    def __init__(self, run: Run, data_class: str, rules: ClassRules) -> None:
        row = row_class_required(data_class)
        self.run, self.row, self.rules = run, row, rules
        self.cursor: RowCursor | None = None
        self.started = False
        # A class waiting for review (its delete left the approved cascade) is skipped.
        self.done = Policy.objects.filter(data_class=data_class).exclude(review_reason="").exists()

    def next_page(self, size: int, now: datetime) -> RowPage:
        page = rows_page(
            run=self.run,
            row=self.row,
            rules=self.rules,
            cursor=self.cursor if self.started else None,
            limit=size,
            now=now,
        )
        self.started = True
        if page.cursor is not None:
            self.cursor = page.cursor
        if page.stopped or page.seen < size:
            self.done = True
        return page
