"""Exit non-zero when retention lag breaks the promise (SPEC §3.1), for paging.

It also prints what the last reconciliation of each store found, and fails
when an object that reappeared after its deletion is still there a promise later,
or when an erasure request is past its due date unfinished (``erasure_overdue``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retention.clock import db_now
from retention.formatting import approximate_duration, human, rfc3339
from retention.selectors.breaker import trip_summary
from retention.selectors.erasure import ErasureStatus, erasure_status
from retention.selectors.health import (
    BREAKER_TRIPPED,
    FAILED_FOR_REVIEW,
    NO_RECENT_SUCCESS,
    OVERDUE,
    REAPPEARED_NOT_DELETED,
    REGISTRATION_CHANGED,
    ClassCheck,
    LagCheck,
    lag_check,
    lag_check_as_json,
)
from retention.selectors.reconcile_health import StorageReconciliation
from retention.selectors.workers import (
    CLOCK_SKEW,
    WATCHDOG_MISSING,
    WATCHDOG_SCHEDULE,
    WorkersCheck,
    workers_check,
    workers_check_as_json,
)

ERASURE_OVERDUE = "erasure_overdue"

REASONS = {
    OVERDUE: "overdue records",
    FAILED_FOR_REVIEW: "failures waiting for review",
    NO_RECENT_SUCCESS: "no successful run",
    REAPPEARED_NOT_DELETED: "reappeared objects not deleted again",
    BREAKER_TRIPPED: "held by the volume breaker for review",
    REGISTRATION_CHANGED: "registration changed, nothing is disposed of",
}


def _span(value: timedelta) -> str:
    """Two largest units: '3 days 2 hours', '40 minutes'."""
    return approximate_duration(abs(value), units=2)


def _class_lines(check: ClassCheck, promise: timedelta) -> list[str]:
    h = check.health
    if not h.enforced:
        verdict = "report-only, not checked"
    elif check.ok:
        verdict = "ok"
    else:
        verdict = "BROKEN: " + _reasons(check)
    lines = [f"{h.data_class} [{'enforce' if h.enforced else 'report-only'}] {verdict}"]
    if check.registration_changed:
        lines.append(f"  {check.registration_changed}")
    if h.kind == "rows":
        return lines + _row_class_lines(check, promise)
    lines.append(_backlog_line(check, promise, unit="", oldest="oldest expired"))
    lines.append(
        f"  failed, waiting for review {h.failed_for_review}; retrying {h.retrying}; "
        f"expired but held {h.held}"
    )
    lines.append(_last_success_line(check))
    if h.breaker is not None:
        lines.append(_breaker_line(check, "nothing of it is deleted"))
    if check.reappeared is not None:
        since = check.now - check.reappeared.oldest_reappeared_at
        lines.append(
            f"  reappeared after deletion, not deleted again {check.reappeared.records}; "
            f"oldest reappeared {human(check.reappeared.oldest_reappeared_at)}, "
            f"{_span(since)} ago (over the promise)"
        )
    return lines


def _reasons(check: ClassCheck) -> str:
    """Why a class is broken, in words; a class of rows has overdue rows, not records."""
    rows = check.health.kind == "rows"
    return ", ".join("overdue rows" if rows and r == OVERDUE else REASONS[r] for r in check.broken)


def _row_class_lines(check: ClassCheck, promise: timedelta) -> list[str]:
    """A class of model rows: due by its own deadline, held by the one hold rule."""
    h = check.health
    lines = [
        _backlog_line(check, promise, unit=" rows", oldest="oldest due"),
        f"  due but held {h.held} rows",
        _last_success_line(check, f": {h.last_success_disposed} rows {h.disposed_verb}"),
    ]
    if h.breaker is not None:
        lines.append(_breaker_line(check, "none of its rows is disposed of"))
    return lines


def _backlog_line(check: ClassCheck, promise: timedelta, *, unit: str, oldest: str) -> str:
    h = check.health
    if h.oldest_eligible_at is None or h.overdue is None:
        return f"  backlog 0{unit}"
    late = "over" if h.overdue > promise else "within"
    return (
        f"  backlog {h.backlog}{unit}; {oldest} {human(h.oldest_eligible_at)}, "
        f"{_span(h.overdue)} ago ({late} the promise)"
    )


def _last_success_line(check: ClassCheck, what: str = "") -> str:
    """The last run that disposed of the class (``what``: what it disposed of there)."""
    run, age = check.health.last_success, check.last_success_age
    if run is None or run.finished_at is None or age is None:
        return "  last successful run: never"
    return f"  last successful run {human(run.finished_at)}, {_span(age)} ago (run {run.pk}){what}"


def _breaker_line(check: ClassCheck, held_back: str) -> str:
    trip = check.health.breaker
    assert trip is not None
    return (
        f"  volume breaker tripped {human(trip.tripped_at)} (trip {trip.pk}): "
        f"{trip_summary(trip.limit, trip.figures or {})}; {held_back} "
        "until an approver releases it"
    )


def _reconcile_line(item: StorageReconciliation, now: datetime) -> str:
    found = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in item.findings.items())
    if item.row_files is not None:
        found += f", files of deleted rows {item.row_files['files_of_deleted_rows']}"
    dry = " (dry run)" if item.dry_run else ""
    return (
        f"  {item.storage}: {found}; reconciled {human(item.finished_at)}, "
        f"{_span(item.age(now))} ago{dry} (run {item.run_id})"
    )


def _lines(check: LagCheck) -> list[str]:
    lines = [
        f"Promise: expired records of enforced data classes are deleted within "
        f"{_span(check.promise)} of their deadline (checked at {human(check.now)})."
    ]
    if check.paused is not None:
        lines.append(f"Kill switch engaged: nothing new is claimed ({check.paused.reason}).")
    for item in check.classes:
        lines.extend(_class_lines(item, check.promise))
    if not check.classes:
        lines.append("No data class yet.")
    if check.reconciliations:
        lines.append("Last reconciliation per storage (the store compared with the records):")
        lines.extend(_reconcile_line(item, check.now) for item in check.reconciliations)
    else:
        lines.append("Last reconciliation per storage: none finished yet.")
    return lines


def _erasure_lines(status: ErasureStatus) -> list[str]:
    counts = ", ".join(f"{n} {state}" for state, n in status.by_state.items() if n)
    lines = [f"Erasure requests: {counts or 'none'}."]
    lines.extend(
        f"  {r.pk} ({r.state}) OVERDUE: due {human(r.due_at)}, received {human(r.received_at)}"
        for r in status.overdue
    )
    return lines


def _erasure_as_json(status: ErasureStatus) -> dict[str, Any]:
    return {
        "ok": status.ok,
        "by_state": status.by_state,
        "overdue": [
            {"id": str(r.pk), "state": r.state, "due_at": rfc3339(r.due_at)} for r in status.overdue
        ],
    }


def _worker_lines(check: WorkersCheck) -> list[str]:
    """Each host's clock against the database's, and the watchdog schedule."""
    limit = check.clock_skew_limit
    lines = [
        f"Worker clocks (host minus database, hosts seen in the last day; limit {limit:g} seconds):"
    ]
    for h in check.hosts:
        way = "ahead of" if h.offset_seconds >= 0 else "behind"
        verdict = "SKEWED" if h.skewed(limit) else "ok"
        lines.append(
            f"  {h.host}: {abs(h.offset_seconds):.1f} seconds {way} the database, "
            f"{human(h.seen_at)} (run {h.run_id}) {verdict}"
        )
    if not check.hosts:
        lines.append("  no run or batch reported one yet")
    if check.watchdog_installed:
        lines.append(f"Watchdog schedule ({WATCHDOG_SCHEDULE}): installed.")
    elif check.queued_runs_recent:
        lines.append(
            f"Watchdog schedule ({WATCHDOG_SCHEDULE}): NOT INSTALLED while queued runs are used; "
            "run `manage.py retention_schedule`."
        )
    else:
        lines.append(f"Watchdog schedule ({WATCHDOG_SCHEDULE}): not installed (no queued run).")
    return lines


def _workers_broken(check: WorkersCheck) -> str:
    parts = []
    if CLOCK_SKEW in check.broken:
        hosts = ", ".join(
            f"{h.host} {h.offset_seconds:+.0f} s"
            for h in check.hosts
            if h.skewed(check.clock_skew_limit)
        )
        parts.append(
            f"{CLOCK_SKEW}: a worker's clock is more than {check.clock_skew_limit:g} seconds "
            f"from the database's ({hosts}); run NTP on it"
        )
    if WATCHDOG_MISSING in check.broken:
        parts.append(
            f"{WATCHDOG_MISSING}: queued runs are used and the {WATCHDOG_SCHEDULE} schedule is "
            "not installed; run `manage.py retention_schedule`"
        )
    return "; ".join(parts)


class Command(BaseCommand):
    help = (
        "Print per data class the backlog, the oldest overdue record, failures waiting for "
        "review and the last successful run, and per storage the last reconciliation's "
        "findings, and the erasure requests; exit 1 when a promise is broken or an erasure "
        "request is overdue."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(self, *, as_json: bool, **options: Any) -> None:
        check = lag_check(now=db_now())
        workers = workers_check(now=check.now)
        erasures = erasure_status(now=check.now)
        if as_json:
            data = lag_check_as_json(check)
            data["ok"] = data["ok"] and workers.ok and erasures.ok
            data["workers"] = workers_check_as_json(workers)
            data["erasures"] = _erasure_as_json(erasures)
            self.stdout.write(json.dumps(data))
        else:
            lines = _lines(check)
            # The workers and the erasure requests after the classes, before
            # the stores' reconciliation.
            at = next(i for i, line in enumerate(lines) if line.startswith("Last reconciliation"))
            lines[at:at] = [*_worker_lines(workers), *_erasure_lines(erasures)]
            for line in lines:
                self.stdout.write(line)
        failures = []
        if not check.ok:
            broken = "; ".join(f"{c.health.data_class} ({_reasons(c)})" for c in check.broken)
            failures.append(f"retention promise broken: {broken}")
        if not workers.ok:
            failures.append(f"workers unfit: {_workers_broken(workers)}")
        if not erasures.ok:
            overdue = ", ".join(str(r.pk) for r in erasures.overdue)
            failures.append(
                f"{ERASURE_OVERDUE}: {len(erasures.overdue)} erasure request(s) past their "
                f"due date unfinished ({overdue})"
            )
        if failures:
            raise CommandError("; ".join(failures))
