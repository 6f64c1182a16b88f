"""The rules a run fixed for each class when it started, as its report stores them.

The engine fixes them at a run's start (``retention.engine.rules``) and
copies them into the run's report (``ClassRules.as_json``), so a retry, a
continuation task or a batch on another host follows the same batch size,
pace and cutoff even if a new policy version was approved in between. This
module reads them back: for the engine, and for whoever shows a run
(``retention.reporting``, the admin, ``retention.api``) without importing
the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime

from retention.conf import settings
from retention.models import Disposition, Run, RunMode

DEFAULT_BATCH_SIZE = 500
# An erase run's cutoff: its items go whatever their deadline or age (its
# scope is the request's subject or tenant, within the frozen bound).
ERASE_CUTOFF = datetime(9999, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ClassRules:
    data_class: str
    batch_size: int
    rate_limit: float | None
    max_attempts: int
    safety_margin: timedelta
    # Model rows (a registered model): the version that governs them, its
    # disposition and approved cascade, and the cutoff fixed at run start.
    disposition: str = Disposition.DELETE
    version_id: int | None = None
    version_number: int | None = None
    row_cutoff: datetime | None = None
    cascade: dict[str, Any] | None = None
    # Why the class disposes of nothing in this run: the code's registration
    # no longer matches the version's (empty: it matches).
    registration_changed: str = ""

    @classmethod
    def from_json(cls, data_class: str, data: dict[str, Any] | None) -> ClassRules:
        """The rules a run recorded for the class (defaults for a run without them)."""
        data = data or {}
        row_cutoff = parse_datetime(data["row_cutoff"]) if data.get("row_cutoff") else None
        return cls(
            data_class=data_class,
            batch_size=int(data.get("batch_size") or DEFAULT_BATCH_SIZE),
            rate_limit=data.get("rate_limit"),
            max_attempts=int(data.get("max_attempts") or settings.MAX_ATTEMPTS),
            safety_margin=timedelta(seconds=float(data.get("safety_margin_seconds") or 0)),
            disposition=str(data.get("disposition") or Disposition.DELETE),
            version_id=data.get("version_id"),
            version_number=data.get("version_number"),
            row_cutoff=row_cutoff,
            cascade=data.get("cascade"),
            registration_changed=str(data.get("registration_changed") or ""),
        )

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "batch_size": self.batch_size,
            "rate_limit": self.rate_limit,
            "max_attempts": self.max_attempts,
            "safety_margin_seconds": self.safety_margin.total_seconds(),
        }
        if self.row_cutoff is not None:
            data.update(
                disposition=self.disposition,
                version_id=self.version_id,
                version_number=self.version_number,
                row_cutoff=self.row_cutoff.isoformat(),
                cascade=self.cascade,
            )
        if self.registration_changed:
            data["registration_changed"] = self.registration_changed
        return data


def _stored_rules(run: Run) -> dict[str, Any]:
    report = run.report if isinstance(run.report, dict) else {}
    rules = report.get("rules")
    return rules if isinstance(rules, dict) else {}


def run_rules(run: Run) -> dict[str, ClassRules]:
    """Each class's rules as the run recorded them when it started."""
    stored = _stored_rules(run)
    return {name: ClassRules.from_json(name, stored.get(name)) for name in run.data_classes}


def class_cutoff(run: Run, data_class: str) -> datetime:
    """start − the class's own safety margin, fixed when the run started
    (an erase run: ``ERASE_CUTOFF``)."""
    if run.mode == RunMode.ERASE:
        return ERASE_CUTOFF
    stored = _stored_rules(run).get(data_class)
    if not stored:
        return run.cutoff
    return run.started_at - ClassRules.from_json(data_class, stored).safety_margin
