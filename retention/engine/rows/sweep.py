"""One class of model rows within a run: its pages in order, until none is left.

The executors ask a ``RowSweep`` for the next page as they ask the claims for
the next page of records; the sweep keeps the class's keyset cursor and knows
when the class is done (a page that found nothing), or stopped for review.

Where a page is one plain statement (``plain``: no delete signal, no
relation to follow, no files, no rate to keep, no limit) on PostgreSQL, a
second lane of pages runs beside the engine's: a thread with its own
connection, each page its own short transaction. Each lane walks the keyset
with its own cursor; a row the other lane holds is skipped (``SKIP
LOCKED``) and is that lane's to dispose of, so every row behind a lane's
cursor was disposed of by one of them, or is locked by somebody else (and
left to the next run, as always). The second lane may stop after any page:
the engine's lane takes what it leaves. The pages' writes take the chain
head one after the other; their deletes overlap.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, connections, router
from django.utils import timezone

from retention.engine.rows.held import held_rows_record
from retention.engine.rows.page import rows_page
from retention.engine.rows.plain import plain_delete
from retention.engine.rows.select import RowCursor, RowPage, erase_view
from retention.engine.rules import registration_recheck, rules_version
from retention.engine.stepping import Clock
from retention.models import Disposition, Policy, Run, RunMode
from retention.rows.registry import row_class, row_class_required
from retention.selectors.control import kill_switch_paused
from retention.selectors.run_rules import ClassRules

logger = logging.getLogger("retention.engine")


def row_class_names(run: Run, rules: Mapping[str, ClassRules]) -> list[str]:
    """The run's classes that are registered model rows with a version to work by
    (and a registration that still matches it: ``ClassRules.registration_changed``)."""
    return [
        name
        for name in run.data_classes
        if row_class(name) is not None
        and rules[name].row_cutoff is not None
        and not rules[name].registration_changed
    ]


@dataclass
class Lane:
    """Where one lane of pages stands: its cursor, and whether it found the end."""

    cursor: RowCursor | None = None
    started: bool = False
    done: bool = False


class RowSweep:
    def __init__(
        self, run: Run, data_class: str, rules: ClassRules, *, clock: Clock = timezone.now
    ) -> None:
        row = row_class_required(data_class)
        if run.mode == RunMode.ERASE:
            row = erase_view(row)
        self.run, self.row, self.rules, self.clock = run, row, rules, clock
        self.main, self.second = Lane(), Lane()
        # The second lane's pages as they finish (None: the lane ended), and its error.
        self.finished: queue.SimpleQueue[RowPage | None] = queue.SimpleQueue()
        self.halt = threading.Event()
        self.thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        # A class waiting for review (its delete left the approved cascade) is skipped.
        self.done = Policy.objects.filter(data_class=data_class).exclude(review_reason="").exists()
        # A page stopped the class for review: its held rows are not recorded either.
        self.stopped = False
        # The version the run works by, read once: each check of the
        # registration against it is then a few compilations, no query.
        self.version = rules_version(rules)

    def next_page(self, size: int, now: datetime) -> RowPage:
        """The engine thread's next page, with the second lane's pages finished meanwhile."""
        if self._drifted():
            # Nothing more of the class in this run; what the second lane
            # finished before is counted, its held rows are not recorded.
            self.main.done = self.stopped = True
            self.halt.set()
            page = RowPage()
            while self.thread is not None:
                self._collect(page, wait=True)
            self.done = True
            return page
        if self.thread is None and not self.main.started and self._overlaps():
            self.thread = threading.Thread(
                target=self._second_lane, args=(size,), name="retention-rows", daemon=True
            )
            self.thread.start()
        if not self.main.done:
            page = self._page(self.main, size, now)
            self._collect(page, wait=False)
        else:
            # Only the second lane is left: wait for its next page.
            page = RowPage()
            self._collect(page, wait=True)
        if page.stopped:
            self.main.done = True
            self.halt.set()
            self.stopped = True
        self.done = self.main.done and self.thread is None
        if self.done and not self.stopped:
            # Swept to its end: its held rows, once (``held``).
            page.counts.update(
                held_rows_record(run=self.run, row=self.row, rules=self.rules, now=now)
            )
        return page

    def close(self) -> None:
        """Stop the second lane after the page it is on (its pages are counted in the run).

        Never raises: it runs while the engine stops, perhaps for an error of
        its own. A failure of the second lane's last page (which rolled back)
        is logged.
        """
        if self.thread is None:
            return
        self.halt.set()
        self.thread.join()
        self.thread = None
        if self.failure is not None:
            logger.error(
                "the second lane of %s failed: %s",
                self.row.data_class,
                type(self.failure).__name__,
                extra={"run_id": str(self.run.pk)},
            )

    def _collect(self, into: RowPage, *, wait: bool) -> None:
        """Add the second lane's finished pages to ``into`` (waiting for one, or the end)."""
        while self.thread is not None:
            try:
                page = self.finished.get(block=wait)
            except queue.Empty:
                return
            if page is None:  # the lane ended
                self.thread.join()
                self.thread = None
                if self.failure is not None:
                    raise self.failure
                return
            into.counts.update(page.counts)
            into.seen += page.seen
            into.stopped = into.stopped or page.stopped
            if wait:
                return

    def _second_lane(self, size: int) -> None:
        """Pages on the second thread, with its own connection, until the end or a halt.

        It may stop at any page: the engine's lane walks the whole keyset
        after its cursor, and takes what this one leaves. It claims no page
        once the kill switch is engaged (as the engine's lane, which asks
        before each of its pages), and it stops when a delete receiver
        connects meanwhile, so receivers run on the engine's thread only.
        """
        try:
            while not (self.halt.is_set() or self.second.done or kill_switch_paused()):
                if not self._plain() or self._drifted():
                    break
                page = self._page(self.second, size, self.clock())
                self.finished.put(page)
                if page.stopped:
                    break
        except BaseException as exc:  # re-raised on the engine's thread
            self.failure = exc
        finally:
            connections.close_all()
            self.finished.put(None)

    def _page(self, lane: Lane, size: int, now: datetime) -> RowPage:
        page = rows_page(
            run=self.run,
            row=self.row,
            rules=self.rules,
            cursor=lane.cursor if lane.started else None,
            limit=size,
            now=now,
        )
        lane.started = True
        if page.cursor is not None:
            lane.cursor = page.cursor
        if page.stopped or page.seen < size:
            lane.done = True
        return page

    def _drifted(self) -> bool:
        """Whether the code's registration of the class no longer matches the version the
        run works by (then recorded in the run: ``rules.registration_recheck``)."""
        return bool(registration_recheck(self.run, self.rules, version=self.version))

    def _overlaps(self) -> bool:
        """Whether the second lane may run (asked once, before the class's first page)."""
        rules, row = self.rules, self.row
        return (
            connection.vendor == "postgresql"
            # A caller's open transaction would be invisible to the second connection.
            and not connection.in_atomic_block
            and rules.disposition == Disposition.DELETE
            and not row.files
            and not rules.rate_limit
            and self.run.limit is None
            and self._plain()
        )

    def _plain(self) -> bool:
        return plain_delete(self.row, router.db_for_write(self.row.model))
