"""The impact preview of a draft version: what approving it would make eligible, and held.

Counted in the database with one aggregate pass per question (held records
through the holds' plain boolean, ``held_q``), never by loading records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db.models import Count, IntegerField, Q, Value
from django.db.models.functions import Coalesce

from retention.models import PolicyVersion, RetentionRecord
from retention.selectors.holds import held_q
from retention.selectors.policies import version_in_force

PREVIEW_HORIZONS: tuple[tuple[str, timedelta], ...] = (
    ("now", timedelta(0)),
    ("in 7 days", timedelta(days=7)),
    ("in 30 days", timedelta(days=30)),
)
PREVIEW_TOP_TENANTS = 10


@dataclass(frozen=True, slots=True)
class HorizonImpact:
    label: str
    at: datetime
    recorded_eligible: int  # by each record's own expires_at: what will happen
    recorded_held: int
    draft_eligible: int  # if every record were re-evaluated under the version
    draft_held: int


@dataclass(frozen=True, slots=True)
class TenantImpact:
    tenant_id: str
    counts: tuple[int, ...]  # draft-eligible per horizon
    held: int  # held among the draft-eligible at the last horizon


@dataclass(frozen=True, slots=True)
class ImpactPreview:
    data_class: str
    pending: int  # records of the class not yet deleted
    horizons: tuple[HorizonImpact, ...]
    tenants: tuple[TenantImpact, ...]
    in_force: PolicyVersion | None


def impact_preview(version: PolicyVersion, *, now: datetime) -> ImpactPreview:
    """What approving ``version`` would do, counted in one pass per question.

    Records keep the ``expires_at`` computed when they were written: a new
    version governs new uploads (and renewals). The "draft" figures answer a
    different question: what if every pending record were re-evaluated under
    this version, its clock restarting at its last renewal or its creation.
    """
    data_class = version.policy.data_class
    in_force = version_in_force(policy_id=version.policy_id)
    recorded_margin = in_force.safety_margin if in_force is not None else timedelta(0)
    held = held_q(data_class)
    records = (
        RetentionRecord.objects.filter(data_class=data_class)
        .pending()
        .annotate(clock_start=Coalesce("renewed_at", "created_at"))
    )

    def draft_q(at: datetime) -> Q:
        return Q(clock_start__lte=at - version.safety_margin - version.retention_period)

    def recorded_q(at: datetime) -> Q:
        return Q(expires_at__lte=at - recorded_margin)

    aggregates: dict[str, Count] = {"pending": Count("id")}
    for index, (_, offset) in enumerate(PREVIEW_HORIZONS):
        at = now + offset
        for kind, q in (("recorded", recorded_q(at)), ("draft", draft_q(at))):
            aggregates[f"{kind}_{index}"] = Count("id", filter=q)
            if held is not None:
                aggregates[f"{kind}_held_{index}"] = Count("id", filter=q & held)
    counts = records.aggregate(**aggregates)
    horizons = tuple(
        HorizonImpact(
            label=label,
            at=now + offset,
            recorded_eligible=counts[f"recorded_{i}"] - counts.get(f"recorded_held_{i}", 0),
            recorded_held=counts.get(f"recorded_held_{i}", 0),
            draft_eligible=counts[f"draft_{i}"] - counts.get(f"draft_held_{i}", 0),
            draft_held=counts.get(f"draft_held_{i}", 0),
        )
        for i, (label, offset) in enumerate(PREVIEW_HORIZONS)
    )

    last = len(PREVIEW_HORIZONS) - 1
    per_tenant: dict[str, Count | Value] = {}
    for index, (_, offset) in enumerate(PREVIEW_HORIZONS):
        q = draft_q(now + offset)
        if held is not None:
            q &= ~held
        per_tenant[f"h{index}"] = Count("id", filter=q)
    per_tenant["held"] = (
        Count("id", filter=draft_q(now + PREVIEW_HORIZONS[last][1]) & held)
        if held is not None
        else Value(0, output_field=IntegerField())
    )
    rows = (
        records.values("tenant_id")
        .annotate(**per_tenant)
        .filter(Q(**{f"h{last}__gt": 0}) | Q(held__gt=0))
        .order_by(f"-h{last}", "tenant_id")[:PREVIEW_TOP_TENANTS]
    )
    # The annotations are named at run time: rows are plain dicts here.
    tenant_rows = cast("Iterable[dict[str, Any]]", rows)
    tenants = tuple(
        TenantImpact(
            tenant_id=row["tenant_id"],
            counts=tuple(row[f"h{i}"] for i in range(len(PREVIEW_HORIZONS))),
            held=row["held"],
        )
        for row in tenant_rows
    )
    return ImpactPreview(
        data_class=data_class,
        pending=counts["pending"],
        horizons=horizons,
        tenants=tenants,
        in_force=in_force,
    )
