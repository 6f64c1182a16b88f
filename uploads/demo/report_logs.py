"""The request logs in the report: what was deleted, what is kept and why; none old left."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from retention.models import DataClassMode, DeletionEvent, EventOutcome, Policy
from uploads.apps import REQUEST_LOGS
from uploads.demo.checks import DemoCheck
from uploads.demo.classes import mode, rows_in_force
from uploads.demo.formatting import Out, fmt, per_tenant, period
from uploads.demo.seeds import LOG_ROWS
from uploads.models import ApiRequestLog


def report_request_logs(out: Out, now: datetime, policy: Policy) -> DemoCheck:
    """What was deleted of the request logs and what is kept; no old row may remain."""
    run, cutoff, keep, holds = rows_in_force(REQUEST_LOGS, policy)
    out(f"Request logs, data class {REQUEST_LOGS}: {mode(policy)}")

    deleted: Counter[str] = Counter()
    pages = 0
    for event in DeletionEvent.objects.filter(
        data_class=REQUEST_LOGS, outcome=EventOutcome.DELETED
    ):
        deleted[event.tenant_id] += event.row_count or 1
        pages += 1
    if run is None or cutoff is None:
        out("  Deleted nothing: no enforce run has covered the class yet.")
    else:
        out(
            f"  Deleted {deleted.total()} row(s) created at or before {fmt(cutoff)}, the "
            f"cutoff of run {run.pk} ({per_tenant(deleted) or 'none'}); "
            f"evidence: {pages} event(s), one per page and tenant."
        )

    kinds: dict[str, list[tuple[int, str, datetime]]] = defaultdict(list)
    for pk, tenant, created in ApiRequestLog.objects.order_by("created_at", "pk").values_list(
        "pk", "tenant_id", "created_at"
    ):
        if holds.covers(pk, tenant):
            kind = "held"
        elif cutoff is not None and created <= cutoff:
            kind = "stale"
        elif created <= now - keep:
            kind = "due"
        else:
            kind = "young"
        kinds[kind].append((pk, tenant, created))
    kept = sum(len(rows) for rows in kinds.values())
    if kinds["young"]:
        young = kinds["young"]
        tenants = Counter(t for _, t, _ in young)
        out(
            f"  Kept {len(young)} row(s) ({per_tenant(tenants)}) created "
            f"{young[0][2]:%Y-%m-%d} to {young[-1][2]:%Y-%m-%d}: younger than "
            f"{period(keep)}; the oldest is due {fmt(young[0][2] + keep)}."
        )
    if kinds["held"]:
        out(f"  Kept {len(kinds['held'])} row(s) under legal hold.")
    if kinds["due"]:
        why = (
            "due at the next enforce run"
            if policy.mode == DataClassMode.ENFORCE
            else "the class is report-only"
        )
        out(f"  Kept {len(kinds['due'])} row(s) older than {period(keep)}: {why}.")

    problems = []
    if kinds["stale"]:
        assert run is not None and cutoff is not None
        problems.append(
            f"{len(kinds['stale'])} request log(s) created at or before the cutoff "
            f"{fmt(cutoff)} of run {run.pk} remain, under no hold: ids "
            + ", ".join(str(pk) for pk, _, _ in kinds["stale"][:10])
        )
    if deleted.total() + kept != LOG_ROWS:
        problems.append(
            f"{LOG_ROWS} request logs were seeded, {deleted.total()} deleted with evidence "
            f"and {kept} are left: {LOG_ROWS - deleted.total() - kept:+d} unaccounted for"
        )
    when = f"at or before the cutoff {fmt(cutoff)} " if cutoff else ""
    return DemoCheck(
        agrees=(
            f"no request log created {when}remains; {deleted.total()} deleted, each in "
            f"the evidence, and {kept} kept make the {LOG_ROWS} seeded."
        ),
        disagrees=f"the request logs ({REQUEST_LOGS}) disagree with the run",
        problems=problems,
    )
