"""What a run works by, fixed when it starts: each class's rules, cutoff and scope.

The rules of every class in a run are copied into the run's report when it
starts (``ClassRules.as_json``), so a retry, a continuation task or a batch
on another host follows the same batch size, pace and cutoff even if a new
policy version was approved in between.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from retention.conf import settings
from retention.models import Policy, RecordQuerySet, RetentionRecord, Run
from retention.selectors.policies import version_governing

DEFAULT_BATCH_SIZE = 500


@dataclass(frozen=True, slots=True)
class ClassRules:
    data_class: str
    batch_size: int
    rate_limit: float | None
    max_attempts: int
    safety_margin: timedelta

    @classmethod
    def for_policy(cls, policy: Policy) -> ClassRules:
        version = version_governing(policy)
        if version is None:
            return cls(
                policy.data_class, DEFAULT_BATCH_SIZE, None, settings.MAX_ATTEMPTS, timedelta(0)
            )
        return cls(
            data_class=policy.data_class,
            batch_size=version.batch_size,
            rate_limit=version.rate_limit,
            max_attempts=version.max_attempts or settings.MAX_ATTEMPTS,
            safety_margin=version.safety_margin,
        )

    @classmethod
    def from_json(cls, data_class: str, data: dict[str, Any] | None) -> ClassRules:
        """The rules a run recorded for the class (defaults for a run without them)."""
        data = data or {}
        return cls(
            data_class=data_class,
            batch_size=int(data.get("batch_size") or DEFAULT_BATCH_SIZE),
            rate_limit=data.get("rate_limit"),
            max_attempts=int(data.get("max_attempts") or settings.MAX_ATTEMPTS),
            safety_margin=timedelta(seconds=float(data.get("safety_margin_seconds") or 0)),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "rate_limit": self.rate_limit,
            "max_attempts": self.max_attempts,
            "safety_margin_seconds": self.safety_margin.total_seconds(),
        }


def _stored_rules(run: Run) -> dict[str, Any]:
    report = run.report if isinstance(run.report, dict) else {}
    rules = report.get("rules")
    return rules if isinstance(rules, dict) else {}


def run_rules(run: Run) -> dict[str, ClassRules]:
    """Each class's rules as the run recorded them when it started."""
    stored = _stored_rules(run)
    return {name: ClassRules.from_json(name, stored.get(name)) for name in run.data_classes}


def class_cutoff(run: Run, data_class: str) -> datetime:
    """start − the class's own safety margin, fixed when the run started."""
    stored = _stored_rules(run).get(data_class)
    if not stored:
        return run.cutoff
    return run.started_at - ClassRules.from_json(data_class, stored).safety_margin


def run_scope(run: Run) -> RecordQuerySet:
    """The records a run may touch: its classes, its tenant, its records."""
    qs: RecordQuerySet = RetentionRecord.objects.filter(data_class__in=run.data_classes)
    if run.tenant_id:
        qs = qs.filter(tenant_id=run.tenant_id)
    record_ids = run.report.get("record_ids") if isinstance(run.report, dict) else None
    if record_ids:
        qs = qs.filter(pk__in=record_ids)
    return qs


def expired_q(run: Run) -> Q:
    q = Q(pk__in=[])
    for name in run.data_classes:
        q |= Q(data_class=name, expires_at__lte=class_cutoff(run, name))
    return q


def expired_pending(run: Run) -> RecordQuerySet:
    """What the run owes: pending records of its scope expired at its cutoffs."""
    return run_scope(run).pending().filter(expired_q(run))
