"""The inline executor: one process sweeps a started run to its end.

It claims a page per class in turn, deletes it and finalizes it, asking the
``Stepper`` before every page whether to stop. Its claim is the re-check:
the inline engine deletes right after claiming, so the claim selects, under
row locks, only rows that are expired and unheld as the holds are now, and
marks them as being disposed of in the same write. On a thread-safe store
with no rate to keep, a page's delete runs in a thread while the previous
page is finalized (``Overlap``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from django.db import InterfaceError, OperationalError, connection

from retention.clock import db_now
from retention.engine.breaker import REPORT_KEY as BREAKER_REPORT_KEY
from retention.engine.breaker import breaker_decide, breaker_held, breaker_preview
from retention.engine.claims import Claim, Cursors, records_claim_next
from retention.engine.disposal import Disposer, ObjectDisposer, can_overlap
from retention.engine.events import ClaimOutcome, held_skips_record
from retention.engine.ledger import run_columns, run_finish
from retention.engine.measure import dry_run_report, retry_next_due, run_measure
from retention.engine.outage import Liveness, as_unavailable, connection_lost, db_retry, page_token
from retention.engine.overlap import Overlap
from retention.engine.pacing import gate_for
from retention.engine.page import claim_dispose, stranded_settle
from retention.engine.rows.sweep import RowSweep, row_class_names
from retention.engine.stepping import Clock, Monotonic, Stepper, Stop
from retention.models import DISPOSING_MODES, Run, RunMode, RunStatus
from retention.selectors.run_rules import run_rules

logger = logging.getLogger("retention.engine")

ProgressFn = Callable[[Run], None]


def run_execute(
    *,
    run: Run,
    clock: Clock = db_now,
    max_seconds: float | None = None,
    progress: ProgressFn | None = None,
    disposer: Disposer | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Monotonic = time.monotonic,
) -> Run:
    """Sweep a started run to the end, to its limit, or to its time budget."""
    if run.status != RunStatus.RUNNING:
        return run
    stepper = Stepper(run=run, clock=clock, monotonic=monotonic, max_seconds=max_seconds)
    liveness = Liveness(run)
    try:
        if run.mode in DISPOSING_MODES:
            liveness.start()
        return _execute(
            stepper, progress=progress, disposer=disposer, sleep=sleep, liveness=liveness
        )
    except BaseException as exc:
        down = as_unavailable(exc)
        if down is not None:
            # Nothing can be recorded now: the next trigger closes the run
            # once the database is back (``outage.runs_abandon_orphaned``).
            # One line, the caller's to show: no chain of tracebacks.
            raise down from None
        # The rows in flight keep their leases and are probed by the next
        # claimer; the run itself must not stay "running" for ever.
        logger.error(
            "retention run %s failed: %s",
            run.pk,
            type(exc).__name__,
            extra={"run_id": str(run.pk), "tenant_id": run.tenant_id},
        )
        try:
            run_finish(run, RunStatus.ERROR, f"{type(exc).__name__}: {exc}"[:2000], clock())
        except Exception as recording:
            logger.error(
                "could not record the failure of run %s: %s",
                run.pk,
                as_unavailable(recording) or type(recording).__name__,
                extra={"run_id": str(run.pk)},
            )
        raise
    finally:
        liveness.close()


def _execute(
    stepper: Stepper,
    *,
    progress: ProgressFn | None,
    disposer: Disposer | None,
    sleep: Callable[[float], None],
    liveness: Liveness,
    retry: Callable[..., Any] = db_retry,
) -> Run:
    run, clock = stepper.run, stepper.clock
    measured = retry(partial(run_measure, run), what="measure")
    if run.mode == RunMode.DRY_RUN:
        report = dict(run.report)
        report.update(dry_run_report(run, measured.rows))
        # Never trips: says what the breaker would do to an enforcing run.
        preview = breaker_preview(run, eligible=measured.eligible, rows=measured.rows)
        if preview:
            report[BREAKER_REPORT_KEY] = preview
        Run.objects.filter(pk=run.pk).update(report=report)
        return run_finish(run, RunStatus.FINISHED, "", clock())

    # Rows a dead claimer left under a hold placed since: settled before
    # the held skips are recorded, so no skip is recorded for a gone object.
    retry(partial(stranded_settle, run=run, clock=clock, disposer=disposer), what="settle")
    retry(lambda: held_skips_record(run, clock()), what="held skips")
    # Once per class, before the class's first page.
    retry(
        lambda: breaker_decide(run, eligible=measured.eligible, rows=measured.rows, now=clock()),
        what="breaker",
    )

    def page_done(claim: Claim | None, outcome: ClaimOutcome) -> None:
        """Add a finalized page's outcomes to the run's counts in memory
        (already in the database, by the finalize), then report progress."""
        for name, n in run_columns(outcome.counts).items():
            setattr(run, name, getattr(run, name) + n)
        if progress:
            progress(run)

    overlap = Overlap(clock, page_done)
    try:
        while True:
            try:
                stop = _sweep(
                    stepper, disposer or ObjectDisposer(), overlap, page_done, sleep, liveness
                )
                break
            except (OperationalError, InterfaceError) as exc:
                if not connection_lost(exc):
                    raise
                # Lost between two steps of a page: once the database is
                # back, the sweep goes on from its claims (a page's finalize
                # waits for the database itself).
                retry(_ping, what="sweep")
    finally:
        overlap.close()
    if stop is None:
        finished: Run = retry(
            lambda: run_finish(run, RunStatus.FINISHED, "", clock()), what="finish"
        )
        return finished
    if stop.status == RunStatus.ABANDONED:
        logger.warning("run %s stopped: %s", run.pk, stop.reason, extra={"run_id": str(run.pk)})
    # A run another trigger closed (abandoned) keeps its status and counts.
    closed: Run = retry(lambda: run_finish(run, stop.status, stop.reason, clock()), what="finish")
    return closed


def _ping() -> None:
    """Fails until the database answers (for ``db_retry``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _sweep(
    stepper: Stepper,
    disposer: Disposer,
    overlap: Overlap,
    page_done: Callable[[Claim | None, ClaimOutcome], None],
    sleep: Callable[[float], None],
    liveness: Liveness,
) -> Stop | None:
    """Claim and dispose page after page; return why it stopped (None: nothing left)."""
    run, clock = stepper.run, stepper.clock
    # The counts as measured; from here on this engine, holding the run's
    # lease, is their only writer, and keeps its copy current page by page.
    run.refresh_from_db()
    rules = run_rules(run)
    gates = {name: gate_for(data_class=name, rate_limit=r.rate_limit) for name, r in rules.items()}
    cursors: Cursors = {}
    held = breaker_held(run)
    names = [name for name in run.data_classes if name not in held]
    row_sweeps = {
        name: RowSweep(run, name, rules[name], clock=clock)
        for name in row_class_names(run, rules)
        if name in names
    }
    try:
        while True:
            claimed_any = False
            for name in names:
                now = clock()
                size = stepper.page_size(rules[name])
                stepper.heartbeat(now, extra_seconds=stepper.pacing_seconds(size, rules[name]))
                stop = stepper.stop(now)
                if stop is not None:
                    overlap.settle()
                    return stop
                # No page without the run's liveness lock: a run that cannot
                # hold it may be closed, and its class swept, by another.
                liveness.check()
                if name in row_sweeps:
                    sweep = row_sweeps[name]
                    if sweep.done or size <= 0:
                        continue
                    gates[name].acquire(size)
                    page = sweep.next_page(size, clock())
                    page_done(None, ClaimOutcome(page.counts))
                    claimed_any = claimed_any or not sweep.done
                    continue
                claim = records_claim_next(
                    cursors=cursors,
                    run=run,
                    data_class=name,
                    limit=size,
                    now=now,
                    lease_seconds=stepper.page_lease_seconds(size, rules[name]),
                    start_disposal=True,
                    # Marked as this run's: a takeover frees them at once.
                    token=page_token(run),
                )
                if not claim.items:
                    continue
                claimed_any = True
                # Counted at once (the claim wrote it): the limit must see a page in flight.
                run.claimed += len(claim)
                max_attempts = rules[name].max_attempts
                if can_overlap(disposer, {i.storage for i in claim.items}, gates[name]):
                    overlap.submit(claim, disposer, gates[name], max_attempts=max_attempts)
                else:
                    overlap.settle()
                    outcome = claim_dispose(
                        claim=claim,
                        clock=clock,
                        disposer=disposer,
                        gate=gates[name],
                        max_attempts=max_attempts,
                    )
                    page_done(claim, outcome)
            if claimed_any:
                continue
            # Nothing left to claim: the page in flight may still schedule retries.
            overlap.settle()
            stop = stepper.stop(clock())
            if stop is not None:
                return stop
            wait = stepper.retry_wait(retry_next_due(run), clock())
            if wait is None:
                return None
            sleep(wait)
    finally:
        # Their second lane's thread and connection (``RowSweep``).
        for sweep in row_sweeps.values():
            sweep.close()
