"""What the next run of a data class will do, from its latest dry run: what the
confirmation pages for enabling and disabling enforcement say before anything changes.

The dry run is the one enabling would record as reviewed (``dry_run_reviewable``);
its stored report holds the counts (per class, the top tenants, failures, the
volume breaker's verdict), so the page costs no scan of the records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime

from retention.conf import settings
from retention.models import Disposition, Policy, PolicyVersion, Run, RunMode, RunStatus
from retention.rows.registry import row_class
from retention.selectors.policies import version_in_force
from retention.selectors.runs import dry_run_reviewable, run_last


@dataclass(frozen=True, slots=True)
class TenantCount:
    tenant_id: str
    eligible: int
    oldest_due: datetime | None


@dataclass(frozen=True, slots=True)
class Outlook:
    policy: Policy
    in_force: PolicyVersion | None
    dry_run: Run | None  # the dry run enabling would record as reviewed; None: none fresh
    last_dry_run: Run | None  # the newest finished one, fresh or not
    dry_run_age: timedelta | None
    max_age: timedelta
    rows: bool  # a class of model rows (else tracked records)
    redact: bool
    eligible: int = 0
    held: int = 0
    oldest_due: datetime | None = None
    failed_for_review: int = 0
    tenants: tuple[TenantCount, ...] = ()
    tenants_limited: bool = False  # the report keeps the top tenants only
    has_tenants: bool = True
    breaker_would_trip: bool = False
    breaker_reason: str = ""

    @property
    def noun(self) -> str:
        return "rows" if self.rows else "records"

    @property
    def verb(self) -> str:
        return "redact" if self.redact else "delete"

    @property
    def done(self) -> str:
        return "redacted" if self.redact else "deleted"


def _instant(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    return parse_datetime(value) if isinstance(value, str) else None


def enforcement_outlook(policy: Policy, *, now: datetime) -> Outlook:
    name = policy.data_class
    in_force = version_in_force(policy_id=policy.pk)
    row = row_class(name)
    run = dry_run_reviewable(data_class=name, now=now)
    last = run_last(name, mode=RunMode.DRY_RUN, statuses=[RunStatus.FINISHED])
    report: dict[str, Any] = run.report if run is not None and isinstance(run.report, dict) else {}
    data: dict[str, Any] = (report.get("per_data_class") or {}).get(name) or {}
    disposition = data.get("disposition") or (in_force.disposition if in_force else None)
    tenants = [
        TenantCount(
            tenant_id=str(t.get("tenant_id") or "—"),
            eligible=int(t.get("eligible") or 0),
            oldest_due=_instant(t.get("oldest_eligible_at") or t.get("oldest_due_at")),
        )
        for t in (report.get("per_tenant") or {}).get(name) or []
    ]
    breaker: dict[str, Any] = (report.get("breaker") or {}).get(name) or {}
    return Outlook(
        policy=policy,
        in_force=in_force,
        dry_run=run,
        last_dry_run=last,
        dry_run_age=now - run.finished_at if run is not None and run.finished_at else None,
        max_age=settings.DRY_RUN_MAX_AGE,
        rows=data.get("kind") == "rows" or row is not None,
        redact=disposition == Disposition.REDACT,
        eligible=int(data.get("eligible") or 0),
        held=int(data.get("held") or 0),
        oldest_due=_instant(data.get("oldest_due_at") or data.get("oldest_eligible_at")),
        failed_for_review=int((report.get("failed_for_review") or {}).get(name) or 0),
        tenants=tuple(tenants),
        tenants_limited=len(tenants) >= settings.REPORT_TOP_TENANTS,
        has_tenants=row is None or bool(row.tenant_field),
        breaker_would_trip=bool(breaker.get("would_trip")),
        breaker_reason=str(breaker.get("reason") or ""),
    )
