"""The data map as people and machines read it: instants, counts, the JSON object."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.duration import duration_iso_string

from retention.formatting import NOTHING, exact, format_duration, human
from retention.selectors.datamap import DataMap, Governance


def when_text(value: datetime | None) -> str:
    """An instant as people read it: '2026-12-03 08:02 UTC'; '—' for none."""
    return human(value, none=NOTHING)


def rows_text(value: int | None, *, estimated: bool) -> str:
    if value is None:
        return "unknown"
    return f"~{value}" if estimated else str(value)


def period_text(governance: Governance) -> str:
    if governance.retention_period is None:
        return "—"
    return format_duration(governance.retention_period)


def _rfc3339(value: datetime | None) -> str | None:
    return None if value is None else exact(value)


def _governance_json(g: Governance) -> dict[str, Any]:
    return {
        "data_class": g.data_class,
        "policy_version": g.version,
        "retention_period": (
            duration_iso_string(g.retention_period) if g.retention_period is not None else None
        ),
        "disposition": g.disposition,
        "on_erasure": g.on_erasure,
        "subject_field": g.subject_field,
        "tenant_field": g.tenant_field,
        "time_field": g.time_field,
        "oldest_row_at": _rfc3339(g.oldest_row_at),
        "last_run": (
            None
            if g.last_run is None
            else {
                "id": g.last_run.run_id,
                "mode": g.last_run.mode,
                "status": g.last_run.status,
                "started_at": _rfc3339(g.last_run.started_at),
                "finished_at": _rfc3339(g.last_run.finished_at),
            }
        ),
        "note": g.note or None,
    }


def data_map_as_json(found: DataMap) -> dict[str, Any]:
    """The map for machines (``--json``, the admin's JSON export)."""
    return {
        "generated_at": _rfc3339(found.generated_at),
        "counts_are_estimates": found.estimated,
        "statuses": found.counts,
        "models": [
            {
                "model": e.label,
                "table": e.table,
                "status": e.status,
                "reason": e.reason or None,
                "note": e.note or None,
                "personal_fields": [{"field": p.name, "why": p.why} for p in e.personal_fields],
                "rows": e.rows,
                "rows_estimated": e.rows_estimated,
                "data_classes": [_governance_json(g) for g in e.governance],
            }
            for e in found.models
        ],
        "tracked_classes": [
            {
                **_governance_json(t.governance),
                "storage": t.storage or None,
                "records": t.records,
                "records_estimated": t.records_estimated,
            }
            for t in found.tracked
        ],
        "stores": [
            {
                "storage": s.alias,
                "backend": s.backend or None,
                "last_reconciliation": (
                    None
                    if s.reconciliation is None
                    else {
                        "run_id": s.reconciliation.run_id,
                        "finished_at": _rfc3339(s.reconciliation.finished_at),
                        "dry_run": s.reconciliation.dry_run,
                        "orphans": s.reconciliation.counts["orphans"],
                    }
                ),
            }
            for s in found.stores
        ],
        "ungoverned": [
            {"model": e.label, "fields": [p.name for p in e.personal_fields]}
            for e in found.ungoverned_personal
        ],
    }
