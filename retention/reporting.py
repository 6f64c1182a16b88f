"""Plain renderings of a run for the command line and JSON consumers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from retention.engine.rules import class_cutoff
from retention.models import Run as RunModel
from retention.models import RunMode, RunStatus


def rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
        "cutoffs": {name: rfc3339(class_cutoff(run, name)) for name in run.data_classes},
        "counts": run.counts(),
        "oldest_eligible_at": rfc3339(run.oldest_eligible_at),
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
    lines.append(f"  Cutoff: {rfc3339(run.cutoff)}")
    oldest = rfc3339(run.oldest_eligible_at) or "none"
    if run.mode == RunMode.DRY_RUN:
        per_class = run.report.get("per_data_class", {})
        # Eligible rows of redacting classes are counted in run.eligible too.
        redact = sum(
            int(data.get("eligible") or 0)
            for data in per_class.values()
            if data.get("kind") == "rows" and data.get("disposition") == "redact"
        )
        redacting = f" and redact {redact} row(s)" if redact else ""
        lines.append(
            f"  Would delete {run.eligible - redact} expired record(s){redacting} (oldest "
            f"expired {oldest}); {run.skipped_held} expired record(s) are under legal hold "
            "and would be kept."
        )
        for name, data in sorted(per_class.items()):
            note = (
                "; report-only, enable enforcement to delete"
                if data.get("mode") == ("report_only")
                else ""
            )
            if data.get("kind") == "rows":
                lines.append(_rows_dry_run_line(name, data, note))
                continue
            lines.append(
                f"    {name}: would delete {data['eligible']}, held {data['held']}, "
                f"oldest expired {data['oldest_eligible_at'] or 'none'}{note}"
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
    lines.append(
        f"  Eligible {run.eligible} (oldest expired {oldest}); claimed {run.claimed}; "
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


def _rows_dry_run_line(name: str, data: dict[str, Any], note: str) -> str:
    """A class of model rows in a dry run: what would go, and what would go with it."""
    verb = "would redact" if data.get("disposition") == "redact" else "would delete"
    note = note.replace("to delete", "to redact") if verb == "would redact" else note
    line = (
        f"    {name} (rows of {data.get('model')}): {verb} {data['eligible']}, "
        f"held {data['held']}, protected {data.get('protected', 0)}, "
        f"oldest {data['oldest_eligible_at'] or 'none'}{note}"
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
