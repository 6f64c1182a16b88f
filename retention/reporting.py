"""Plain renderings of a run for the command line and JSON consumers.

Each class is shown with its own cutoff, compared with its own column: the
deadline of a tracked record (``expires_at``), the deadline a row carries
(``expires_field``), or the row's own date (``age_field``). "Oldest due" is
always a deadline: for a class cut by age, the oldest row's date plus the
period, when the row came due, not when it was written.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime

from retention.formatting import format_duration, human, rfc3339
from retention.models import Run as RunModel
from retention.models import RunMode, RunStatus
from retention.rows.registry import row_class
from retention.selectors.run_rules import ClassRules, class_cutoff, run_rules

__all__ = ["human", "rfc3339", "run_as_json", "summary_lines", "progress_line", "oldest_due"]


def _rules(run: RunModel, name: str) -> ClassRules | None:
    return run_rules(run).get(name) if isinstance(run.report, dict) else None


def _age_period(run: RunModel, name: str) -> timedelta | None:
    """The period of a class of rows cut by their own age, as the run fixed it; else None."""
    rules = _rules(run, name)
    row = row_class(name)
    if rules is None or rules.row_cutoff is None or row is None or row.by_expiry:
        return None
    return run.started_at - rules.safety_margin - rules.row_cutoff


def own_cutoff(run: RunModel, name: str) -> datetime:
    """The class's own cutoff: its rows' or records' column is compared with it."""
    rules = _rules(run, name)
    if rules is not None and rules.row_cutoff is not None:
        return rules.row_cutoff
    return class_cutoff(run, name)


def _unit(run: RunModel, name: str) -> str:
    rules = _rules(run, name)
    kind = run.report.get("per_data_class", {}).get(name, {}).get("kind") if run.report else None
    if kind == "rows" or (rules is not None and rules.row_cutoff is not None):
        return "rows"
    return "records"


def _due(run: RunModel, name: str, oldest: datetime | None) -> datetime | None:
    """When the oldest eligible item of the class came due (its deadline)."""
    if oldest is None:
        return None
    period = _age_period(run, name)
    return oldest if period is None else oldest + period


def oldest_due(run: RunModel) -> datetime | None:
    """The earliest deadline among the run's eligible items.

    A dry run records each class's oldest (a class of rows cut by age, its
    oldest row's date); the run's own ``oldest_eligible_at`` is a deadline
    for every class.
    """
    per_class = run.report.get("per_data_class", {}) if isinstance(run.report, dict) else {}
    if per_class:
        dues = [
            _due(run, name, parse_datetime(data.get("oldest_eligible_at") or ""))
            for name, data in per_class.items()
        ]
        known = [due for due in dues if due is not None]
        return min(known) if known else None
    return run.oldest_eligible_at


def _cutoff_line(run: RunModel, name: str) -> str:
    row = row_class(name) if _unit(run, name) == "rows" else None
    cutoff = human(own_cutoff(run, name))
    if row is None:
        return f"    {name}: records whose deadline is {cutoff} or earlier"
    period = _age_period(run, name)
    if period is None:
        return f"    {name}: rows whose {row.time_field} is {cutoff} or earlier"
    return (
        f"    {name}: rows whose {row.time_field} is {cutoff} or earlier "
        f"(kept {format_duration(period)})"
    )


def _would_header(run: RunModel, per_class: dict[str, Any]) -> str:
    """ "Would delete 2 row(s) and redact 3 row(s)": what a dry run found, each in its unit."""
    delete = {"records": 0, "rows": 0}
    redact = 0
    for name, data in per_class.items():
        eligible = int(data.get("eligible") or 0)
        if data.get("kind") == "rows" and data.get("disposition") == "redact":
            redact += eligible
        else:
            delete[_unit(run, name)] += eligible
    # Classes a run measured without a per-class figure count as records, as before.
    delete["records"] += max(run.eligible - redact - sum(delete.values()), 0)
    parts = [f"{n} expired {unit[:-1]}(s)" for unit, n in delete.items() if n]
    header = "Would delete " + (" and ".join(parts) or "0 expired item(s)")
    return header + (f" and redact {redact} row(s)" if redact else "")


def _kept_unit(run: RunModel) -> str:
    units = {_unit(run, name) for name in run.data_classes}
    if units == {"rows"}:
        return "row(s) are"
    if units == {"records"}:
        return "record(s) are"
    return "record(s) or row(s) are"


def run_as_json(run: RunModel) -> dict[str, Any]:
    return {
        "run_id": str(run.pk),
        "mode": run.mode,
        "trigger": run.trigger,
        "status": run.status,
        "status_reason": run.status_reason,
        "data_classes": list(run.data_classes),
        "tenant_id": run.tenant_id,
        "cutoff": rfc3339(run.cutoff),
        "cutoffs": {name: rfc3339(own_cutoff(run, name)) for name in run.data_classes},
        "units": {name: _unit(run, name) for name in run.data_classes},
        "counts": run.counts(),
        # Transient failures put back for a retry (an unreachable store): not one of
        # §2's counts, so beside them.
        "retried": run.retried,
        "oldest_eligible_at": rfc3339(run.oldest_eligible_at),
        "oldest_due_at": rfc3339(oldest_due(run)),
        "started_at": rfc3339(run.started_at),
        "finished_at": rfc3339(run.finished_at),
    }


def progress_line(run: RunModel) -> str:
    redacted = f"redacted {run.redacted}, " if run.redacted else ""
    return (
        f"run {run.pk}: claimed {run.claimed}/{run.eligible}, deleted {run.deleted}, "
        f"{redacted}already absent {run.already_absent}, deferred {run.deferred}, "
        f"failed {run.failed}, retrying {run.retried}"
    )


def summary_lines(run: RunModel) -> list[str]:
    classes = ", ".join(run.data_classes) or "no data class"
    lines = [f"Run {run.pk} ({run.mode}, {run.trigger}) over {classes}: {run.status}."]
    if run.status_reason:
        lines.append(f"  Reason: {run.status_reason}")
    lines.append(f"  Started {human(run.started_at)}; each class's cutoff:")
    lines.extend(_cutoff_line(run, name) for name in run.data_classes)
    oldest = human(oldest_due(run))
    if run.mode == RunMode.DRY_RUN:
        per_class = run.report.get("per_data_class", {})
        lines.append(
            f"  {_would_header(run, per_class)} (oldest due {oldest}); {run.skipped_held} "
            f"expired {_kept_unit(run)} under legal hold would be kept."
        )
        for name, data in sorted(per_class.items()):
            note = (
                "; report-only, enable enforcement to delete"
                if data.get("mode") == ("report_only")
                else ""
            )
            if data.get("kind") == "rows":
                lines.append(_rows_dry_run_line(run, name, data, note))
                continue
            due = _due(run, name, parse_datetime(data.get("oldest_eligible_at") or ""))
            lines.append(
                f"    {name}: would delete {data['eligible']} record(s), held {data['held']}, "
                f"oldest due {human(due)}{note}"
            )
            for tenant in run.report.get("per_tenant", {}).get(name, [])[:10]:
                lines.append(
                    f"      tenant {tenant['tenant_id']}: would delete {tenant['eligible']}"
                )
        failed = run.report.get("failed_for_review", {})
        if failed:
            lines.append(
                "  Failed records waiting for review: "
                + ", ".join(f"{k}: {v}" for k, v in sorted(failed.items()))
            )
        lines.extend(_breaker_lines(run))
        return lines
    units = {_unit(run, name) for name in run.data_classes}
    items = "records and rows" if len(units) > 1 else (units.pop() if units else "records")
    known = f" (oldest due {oldest})" if oldest != "none" or not run.eligible else ""
    lines.append(
        f"  Eligible {run.eligible} {items}{known}; claimed {run.claimed}; "
        f"deleted {run.deleted}; already absent {run.already_absent}."
    )
    if run.redacted or run.skipped_protected:
        lines.append(
            f"  Rows redacted {run.redacted}; rows kept by a PROTECT relation "
            f"{run.skipped_protected}."
        )
    lines.append(
        f"  Kept: {run.skipped_held} under legal hold, {run.skipped_renewed} renewed; "
        f"deferred {run.deferred}; retries scheduled {run.retried}; failed {run.failed}."
    )
    if run.failed:
        lines.append("  Failed records stay in state 'failed' with their reason, for review.")
    lines.extend(_breaker_lines(run))
    if run.status == RunStatus.FINISHED and not run.data_classes:
        lines.append("  No data class is in enforce mode: nothing to delete.")
    return lines


def _rows_dry_run_line(run: RunModel, name: str, data: dict[str, Any], note: str) -> str:
    """A class of model rows in a dry run: what would go, and what would go with it."""
    verb = "would redact" if data.get("disposition") == "redact" else "would delete"
    note = note.replace("to delete", "to redact") if verb == "would redact" else note
    due = _due(run, name, parse_datetime(data.get("oldest_eligible_at") or ""))
    line = (
        f"    {name} (rows of {data.get('model')}): {verb} {data['eligible']} row(s), "
        f"held {data['held']}, protected {data.get('protected', 0)}, "
        f"oldest due {human(due)}{note}"
    )
    related = data.get("related")
    if related and (related.get("deletes") or related.get("nulls")):
        parts = [f"deletes {n} {m}" for m, n in related["deletes"].items()]
        parts += [f"sets {n} {m} to null" for m, n in related["nulls"].items()]
        line += f"\n      with the first {related['measured_rows']} rows: " + ", ".join(parts)
    return line


def _breaker_lines(run: RunModel) -> list[str]:
    """The classes the volume breaker held (an enforcing run) or would trip on (a dry run)."""
    entries = run.report.get("breaker") if isinstance(run.report, dict) else None
    lines = []
    for name, entry in sorted((entries or {}).items()):
        if entry.get("held"):
            lines.append(
                f"  Volume breaker: {name} held, {entry.get('about_to_delete', 0)} kept "
                f"(tripped): {entry.get('reason', '')}. An approver reviews and releases it."
            )
        elif entry.get("would_trip"):
            lines.append(
                f"  Volume breaker: an enforcing run would trip on {name}: "
                f"{entry.get('reason', '')}."
            )
        elif entry.get("release_used"):
            lines.append(
                f"  Volume breaker: {name} released (trip {entry.get('released_by_trip')}): "
                "deleted without checking the volume."
            )
        elif entry.get("held_by_trip"):
            lines.append(f"  Volume breaker: {name} is held ({entry.get('reason', '')}).")
    return lines
