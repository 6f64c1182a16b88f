"""The run ledger: a run is written before any work, and closed exactly once.

``run_start`` writes the row, takes the single-flight leases and checks the
storages; a run that cannot proceed stays in the ledger as ``refused`` with
its reason. ``run_finish`` closes a run only while it is still running, so a
run that another trigger marked ``abandoned`` keeps that status and counts.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NoReturn

from django.db import connection, transaction
from django.db.models import Count

from retention.chain.anchors import chain_anchor_on_commit
from retention.clock import HostClock
from retention.engine.disposal import ObjectDisposer
from retention.engine.leases import run_leases_acquire, run_leases_release, runs_abandon_stale
from retention.engine.outage import runs_abandon_orphaned
from retention.engine.rules import class_rules_for, erase_rules, expired_pending
from retention.exceptions import RunRefused
from retention.models import (
    DISPOSING_MODES,
    RUN_COUNT_FIELDS,
    DataClassMode,
    DeletionEvent,
    ErasureRequest,
    EventOutcome,
    Policy,
    Run,
    RunBatch,
    RunExecutor,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.selectors.control import kill_switch_paused
from retention.selectors.erasure_execution import RUN_KEY as ERASE_KEY
from retention.selectors.erasure_execution import erasure_plan, erasure_run_entry
from retention.services.erasure_settle import erasure_settle
from retention.storage import StorageUnavailable
from retention.storage.s3_outage import UNANSWERED_REASON, run_unanswered_warn

logger = logging.getLogger("retention.engine")


def run_start(
    *,
    mode: str,
    trigger: str = RunTrigger.COMMAND,
    data_classes: Sequence[str] | None = None,
    tenant_id: str | None = None,
    limit: int | None = None,
    record_ids: Sequence[int] | None = None,
    executor: str = RunExecutor.INLINE,
    schedule_slot: datetime | None = None,
    deadline_at: datetime | None = None,
    erasure: ErasureRequest | None = None,
    now: datetime,
) -> Run:
    """Write the run and take its leases; raise RunRefused when it cannot run.

    A refused run stays in the ledger with status ``refused`` and its reason.
    A ``schedule_slot`` is unique: a second run for the same slot raises
    IntegrityError (the scheduled task joins the first instead).

    Mode ``erase`` executes ``erasure`` (an approved request): the classes
    its frozen scope says it disposes of, whatever their enforcement mode,
    each by what it does on erasure, within the scope's bounds.
    """
    if mode not in RunMode.values:
        raise RunRefused(f"Unknown mode {mode!r}.", reason="bad_arguments")
    if (mode == RunMode.ERASE) != (erasure is not None):
        raise RunRefused("An erase run executes one erasure request.", reason="bad_arguments")
    if limit is not None and limit < 1:
        raise RunRefused("--limit must be at least 1.", reason="bad_arguments")
    policies = list(Policy.objects.all())
    known = {p.data_class: p for p in policies}
    if data_classes:
        unknown = sorted(set(data_classes) - set(known))
        if unknown:
            raise RunRefused(
                f"Unknown data class(es): {', '.join(unknown)}. Known: "
                f"{', '.join(sorted(known)) or 'none'}.",
                reason="bad_arguments",
            )
        chosen = [known[name] for name in dict.fromkeys(data_classes)]
    else:
        chosen = sorted(policies, key=lambda p: p.data_class)

    plan = erasure_plan(erasure) if erasure is not None else {}
    if erasure is not None:
        chosen = [known[name] for name in plan if name in known]
        tenant_id = erasure.tenant_id or None

    refusal: tuple[str, str] | None = None
    if mode == RunMode.ERASE and kill_switch_paused():
        refusal = ("Retention is paused (kill switch); resume it first.", "paused")
    if mode == RunMode.ENFORCE:
        report_only = [p.data_class for p in chosen if p.mode != DataClassMode.ENFORCE]
        if data_classes and report_only:
            refusal = (
                f"Data class(es) {', '.join(report_only)} are report-only: review a dry run "
                "and enable enforcement first.",
                "report_only",
            )
        chosen = [p for p in chosen if p.mode == DataClassMode.ENFORCE]
        if refusal is None and kill_switch_paused():
            refusal = ("Retention is paused (kill switch); resume it first.", "paused")

    rules = [class_rules_for(p, started_at=now) for p in chosen]
    if erasure is not None:
        rules = [erase_rules(r, plan[r.data_class]) for r in rules]
    margin = max((r.safety_margin for r in rules), default=timedelta(0))
    report: dict[str, Any] = {"rules": {r.data_class: r.as_json() for r in rules}}
    if record_ids:
        report["record_ids"] = list(record_ids)
    if erasure is not None:
        report[ERASE_KEY] = erasure_run_entry(erasure, plan)
    with transaction.atomic():
        run = Run.objects.create(
            trigger=trigger,
            mode=mode,
            data_classes=[p.data_class for p in chosen],
            tenant_id=tenant_id or None,
            limit=limit,
            started_at=now,
            cutoff=now - margin,
            report=report,
            executor=executor,
            schedule_slot=schedule_slot,
            deadline_at=deadline_at,
            erasure=erasure,
        )
    if refusal is not None:
        run_refuse(run, refusal[0], refusal[1], now)
    if mode in DISPOSING_MODES and run.data_classes:
        # A run whose process stopped (the database was away too long) is
        # closed at once, not when its lease lapses.
        runs_abandon_orphaned(now)
        runs_abandon_stale(now)
        holder = run_leases_acquire(run, now)
        if holder is not None:
            run_refuse(
                run,
                f"Another enforcing run ({holder}) holds the lease on this data class; "
                "not starting a second sweep.",
                "lease_held",
                now,
            )
        try:
            _check_storages(run)
        except StorageUnavailable as exc:
            run_leases_release(run)
            run_refuse(run, f"Storage unreachable: {exc}", "storage_unavailable", now)
    logger.info(
        "run %s started (%s, %s) over %s",
        run.pk,
        mode,
        trigger,
        ", ".join(run.data_classes) or "nothing",
        extra={
            "run_id": str(run.pk),
            "tenant_id": run.tenant_id,
            "mode": mode,
            "data_classes": list(run.data_classes),
        },
    )
    return run


def run_refuse(run: Run, message: str, reason: str, now: datetime) -> NoReturn:
    """Close a run as ``refused`` with its reason, and raise RunRefused."""
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.REFUSED, status_reason=f"{reason}: {message}", finished_at=now
    )
    # The reason code only: a storage's message may name a bucket or a path.
    logger.info(
        "run %s refused: %s",
        run.pk,
        reason,
        extra={"run_id": str(run.pk), "tenant_id": run.tenant_id, "status": RunStatus.REFUSED},
    )
    raise RunRefused(message, reason=reason, run_id=run.pk)


def _check_storages(run: Run) -> None:
    aliases = expired_pending(run).values_list("storage", flat=True).distinct()
    disposer = ObjectDisposer()
    for alias in sorted(set(aliases)):
        disposer.adapter(alias).check()


def run_finish(run: Run, status: str, reason: str, now: datetime) -> Run:
    """Close a running run with ``status``; a run already closed is left as it is.

    Another trigger may have marked this run ``abandoned`` (its lease had
    lapsed): that verdict, and the counts, stay.
    """
    with transaction.atomic():
        closed = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=status, status_reason=reason, finished_at=now, lease_expires_at=None
        )
        if closed:
            _uncounted_close(run)
        run_leases_release(run)
    run.refresh_from_db()
    if not closed:
        logger.warning(
            "run %s was already %s; not recording it as %s",
            run.pk,
            run.status,
            status,
            extra={"run_id": str(run.pk), "status": run.status},
        )
        return run
    counts = {**run.counts(), "retried": run.retried}
    logger.info(
        "run %s %s (%s): %s",
        run.pk,
        status,
        run.mode,
        " ".join(f"{k}={n}" for k, n in counts.items()),
        extra={
            "run_id": str(run.pk),
            "tenant_id": run.tenant_id,
            "mode": run.mode,
            "status": status,
            "counts": counts,
        },
    )
    if run.retried:
        run_unanswered_warn(run.pk, _unanswered_retries(run))
    if run.erasure is not None:
        # What the request's runs did, and its state (the last run to end decides).
        erasure_settle(request=run.erasure, now=now)
    # The chain head, signed, outside the database (when configured); never fails the run.
    chain_anchor_on_commit(now=now)
    return run


def _uncounted_close(run: Run) -> None:
    """Count what claims of batches whose worker died before their finalize left."""
    left = dict(
        RunBatch.objects.select_for_update()
        .filter(run=run, uncounted__gt=0)
        .values_list("token", "uncounted")
    )
    if left:
        RunBatch.objects.filter(token__in=list(left)).update(uncounted=0)
        run_counts_add(run.pk, Counter(claimed=sum(left.values())))


def _unanswered_retries(run: Run) -> dict[str, int]:
    """The run's deletes retried because their store did not answer, by storage alias."""
    return dict(
        DeletionEvent.objects.filter(
            run=run,
            outcome=EventOutcome.RETRY_SCHEDULED,
            record__isnull=False,
            reason__endswith=UNANSWERED_REASON,
        )
        .values_list("record__storage")
        .annotate(count=Count("pk"))
        .order_by()
    )


def run_abort(*, run: Run, reason: str, now: datetime) -> Run:
    """End a run that will not be executed (e.g. its task could not be queued).

    Its leases are released at once instead of blocking the data class until
    they expire. Rows it may have claimed keep their own leases.
    """
    return run_finish(run, RunStatus.ERROR, reason[:2000], now)


def run_host_clock_record(run: Run | Any, reading: HostClock) -> None:
    """Note in the run's report how far the host running its work was from the database's clock.

    One entry per host (``report["host_clocks"]``), written when the host is
    new to the run or its offset moved by a second or more, so a batch
    usually reads the report and writes nothing. ``retention_check`` reads
    them (``retention.selectors.workers``). Given a Run (not an id), its
    report in memory gets the entry too, so the engine's later writes of
    that report keep it.
    """
    run_id = run.pk if isinstance(run, Run) else run
    report = Run.objects.filter(pk=run_id).values_list("report", flat=True).first()
    known = report.get("host_clocks") or {} if isinstance(report, dict) else {}
    seen = known.get(reading.host)
    if seen is not None and abs(seen["offset_seconds"] - reading.offset_seconds) < 1:
        return
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(pk=run_id).first()
        if locked is None:
            return
        report = dict(locked.report) if isinstance(locked.report, dict) else {}
        clocks = dict(report.get("host_clocks") or {})
        clocks[reading.host] = {
            "offset_seconds": reading.offset_seconds,
            "at": reading.at.isoformat(),
        }
        report["host_clocks"] = clocks
        Run.objects.filter(pk=run_id).update(report=report)
    if isinstance(run, Run):
        run.report = report


def run_columns(counts: Counter[str]) -> dict[str, int]:
    """The counts a run keeps (its columns), without the zeros."""
    return {name: n for name, n in counts.items() if n and hasattr(Run, name)}


def run_counts_add(run_id: Any, counts: Counter[str]) -> None:
    statement = run_counts_sql(run_id, counts)
    if statement is not None:
        with connection.cursor() as cursor:
            cursor.execute(*statement)


def run_counts_sql(run_id: Any, counts: Counter[str]) -> tuple[str, list[Any]] | None:
    """The UPDATE adding ``counts`` to the run's columns (None: nothing to add).

    ``run_counts_add`` runs it; a page's finalize hands it to
    ``events_append`` instead, to go in with the page's events in one round trip.
    """
    columns = run_columns(counts)
    if not columns:
        return None
    quote = connection.ops.quote_name
    table, pk = quote(Run._meta.db_table), quote(str(Run._meta.pk.column))
    added = ", ".join(f"{quote(name)} = {quote(name)} + %s" for name in columns)
    run_key = Run._meta.pk.get_db_prep_value(run_id, connection)
    return f"UPDATE {table} SET {added} WHERE {pk} = %s", [*columns.values(), run_key]


def run_counts(run: Run) -> dict[str, int]:
    return {name: getattr(run, name) for name in RUN_COUNT_FIELDS}
