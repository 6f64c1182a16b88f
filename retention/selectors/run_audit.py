"""A run's counts against the events recorded for it (``retention_verify --runs``).

The chain check proves no event was edited or removed; this proves the run
ledger tells the same story as the events. The engine adds each outcome to
its run in the transaction that writes the outcome's events (a page's
finalize or re-check, a page of model rows, the held skips recorded after a
run's measure), so for a closed run each of these counts equals its events:
an object's event counts one, a model-row event its ``row_count`` (a page
with ``evidence="per_batch"`` or ``"per_row"``, or a run's rows kept under one
hold, ``"held"``; events written before ``row_count`` existed count one).

Eligible, claimed and deferred have no events, and no identity between them
and the outcomes holds by construction: eligible is measured once at the
cutoff; a claim counts again a record it retries and a row a PROTECT relation
then keeps; a renewal or a hold after the measure takes a record out of the
claims without an event; a limit, a time budget or the kill switch stop a
run short; deferred is the backlog when the foreground guard last held
dispatch back. So none of them is compared.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.db.models import Case, F, IntegerField, QuerySet, Sum, Value, When

from retention.models import DeletionEvent, EventKind, EventOutcome, Run, RunMode, RunStatus

# Each count a run keeps, and the outcome of the events that record it.
EVIDENCED: dict[str, str] = {
    "deleted": EventOutcome.DELETED,
    "already_absent": EventOutcome.ALREADY_ABSENT,
    "skipped_held": EventOutcome.SKIPPED_HELD,
    "skipped_renewed": EventOutcome.SKIPPED_RENEWED,
    "failed": EventOutcome.FAILED,
    "retried": EventOutcome.RETRY_SCHEDULED,
    "redacted": EventOutcome.REDACTED,
    "skipped_protected": EventOutcome.SKIPPED_PROTECTED,
}

# Reconciliation runs keep their figures in their report, not in these
# columns: ``reconcile_disagreement`` checks them; no mode added later is.
CHECKED_MODES = (RunMode.ENFORCE, RunMode.DRY_RUN, RunMode.ERASE)

# Runs whose process may have died between measuring (which sets
# skipped_held) and recording the held skips (which replaces it).
_DIED = (RunStatus.ERROR, RunStatus.ABANDONED)

_CHUNK = 500


@dataclass(frozen=True, slots=True)
class RunDisagreement:
    run_id: uuid.UUID
    count: str
    counted: int
    recorded: int

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.count} is {self.counted}, its events say {self.recorded}"


@dataclass(frozen=True, slots=True)
class RunsAudit:
    checked: int
    # Runs left out: running, or of a mode not checked (reconcile).
    not_checked: int
    # Every count of every run that its events contradict, oldest run first.
    disagreements: tuple[RunDisagreement, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.disagreements

    @property
    def disagreement(self) -> RunDisagreement | None:
        """The first of them (None: every run agrees)."""
        return self.disagreements[0] if self.disagreements else None

    @property
    def runs_disagreeing(self) -> int:
        return len({d.run_id for d in self.disagreements})


def counts_checked(*, mode: str, status: str) -> tuple[str, ...]:
    """The counts of a closed run of ``mode`` and ``status`` that its events must equal.

    A dry run records no events: its skipped_held is the measure's figure
    (its other counts must be zero, as its events are). An enforcing run
    counts the held skips it records, unless it died before recording them.
    """
    if mode == RunMode.DRY_RUN or status in _DIED:
        return tuple(name for name in EVIDENCED if name != "skipped_held")
    return tuple(EVIDENCED)


def runs_checked() -> QuerySet[Run]:
    """The runs ``runs_audit`` checks: closed, of a checked mode, oldest first."""
    return (
        Run.objects.filter(mode__in=CHECKED_MODES)
        .exclude(status=RunStatus.RUNNING)
        .order_by("started_at", "id")
    )


def events_recorded(run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, dict[str, int]]:
    """Per run, each count of ``EVIDENCED`` as its events say it."""
    amount = Case(
        When(kind=EventKind.ROW, row_count__isnull=False, then=F("row_count")),
        default=Value(1),
        output_field=IntegerField(),
    )
    names = {outcome: name for name, outcome in EVIDENCED.items()}
    sums = (
        DeletionEvent.objects.filter(run_id__in=list(run_ids), outcome__in=list(names))
        .values("run_id", "outcome")
        .annotate(n=Sum(amount))
        .order_by()
    )
    recorded: dict[uuid.UUID, dict[str, int]] = defaultdict(dict)
    for row in sums:
        recorded[row["run_id"]][names[row["outcome"]]] = int(row["n"] or 0)
    return recorded


def run_disagreements(run: dict[str, Any], recorded: dict[str, int]) -> list[RunDisagreement]:
    """Each count of ``run`` (its ``values()``) that its events do not bear out."""
    found = []
    for name in counts_checked(mode=run["mode"], status=run["status"]):
        counted, evidenced = int(run[name]), recorded.get(name, 0)
        if counted != evidenced:
            found.append(RunDisagreement(run["id"], name, counted, evidenced))
    return found


def run_disagreement(run: dict[str, Any], recorded: dict[str, int]) -> RunDisagreement | None:
    """The first count of ``run`` (its ``values()``) that its events do not bear out."""
    found = run_disagreements(run, recorded)
    return found[0] if found else None


def _runs_with_events() -> Iterator[tuple[dict[str, Any], dict[str, int]]]:
    """Each checked run (its counts) with its events' counts, a chunk of runs per query."""
    fields = ("id", "mode", "status", *EVIDENCED)
    runs = runs_checked().values(*fields).iterator(chunk_size=_CHUNK)
    while True:
        chunk = list(islice(runs, _CHUNK))
        if not chunk:
            return
        recorded = events_recorded(run["id"] for run in chunk)
        for run in chunk:
            yield run, recorded.get(run["id"], {})


def reconcile_disagreement(run: Run) -> RunDisagreement | None:
    """A reconciliation's ``missing`` against its ``missing`` events.

    It closes each missing record with one event, in the transaction that
    closes it, and counts only the records it closed; a dry run closes none.
    Its other findings are not all acted on (report-only classes), so only
    this one is an identity.
    """
    report = run.report if isinstance(run.report, dict) else {}
    counted = 0
    if not report.get("dry_run") and run.status == RunStatus.FINISHED:
        counted = int((report.get("counts") or {}).get("missing", 0))
    recorded = DeletionEvent.objects.filter(run_id=run.pk, outcome=EventOutcome.MISSING).count()
    if counted != recorded:
        return RunDisagreement(run.pk, "missing", counted, recorded)
    return None


def runs_audit() -> RunsAudit:
    """Check every closed run; list every count its events contradict, of every run."""
    total = Run.objects.count()
    checked = 0
    found: list[RunDisagreement] = []
    for run, recorded in _runs_with_events():
        checked += 1
        found.extend(run_disagreements(run, recorded))
    reconciliations = (
        Run.objects.filter(mode=RunMode.RECONCILE)
        .exclude(status=RunStatus.RUNNING)
        .order_by("started_at", "id")
        .only("id", "status", "report")
    )
    for reconciliation in reconciliations.iterator(chunk_size=_CHUNK):
        checked += 1
        missing = reconcile_disagreement(reconciliation)
        if missing is not None:
            found.append(missing)
    return RunsAudit(
        checked=checked, not_checked=max(total - checked, 0), disagreements=tuple(found)
    )
