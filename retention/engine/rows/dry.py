"""A dry run's view of a class of model rows: per tenant, and a sample by row digest.

The reviewer reads the rows a run would dispose of as the records' report
shows objects: counted per tenant (when the class has a ``tenant_field``),
and a few of them first by deadline, each named by the keyed digest of
``app_label.Model:pk`` (as their events name them) with its primary key
beside it. Counted in the database; the sample reads a handful of rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min, QuerySet

from retention.digest import key_digests
from retention.rows.registry import RowClass
from retention.selectors.rows import as_instant as instant


def _deadline(row: RowClass, period: timedelta, value: Any) -> datetime:
    at = instant(value)
    return at if row.by_expiry else at + period


def row_tenants(
    row: RowClass, free: QuerySet[Any], *, period: timedelta, top: int
) -> list[dict[str, Any]]:
    """The tenants with the most rows a run would take, each with its oldest deadline."""
    if not row.tenant_field:
        return []
    tenant = row.tenant_field
    counted = (
        free.order_by()
        .values(tenant)
        .annotate(n=Count("pk"), oldest=Min(row.time_field))
        .order_by("-n", tenant)[:top]
    )
    return [
        {
            "tenant_id": str(r[tenant]),
            "eligible": r["n"],
            "oldest_eligible_at": _deadline(row, period, r["oldest"]).isoformat(),
        }
        for r in counted
    ]


def row_sample(
    row: RowClass, free: QuerySet[Any], *, period: timedelta, size: int
) -> list[dict[str, Any]]:
    """The first rows a run would take, by deadline: digest, primary key, tenant, deadline."""
    tenant = row.tenant_field or "pk"
    picked = list(
        free.order_by(row.time_field, "pk").values_list("pk", row.time_field, tenant)[:size]
    )
    digests = key_digests([f"{row.label}:{pk}" for pk, _, _ in picked])
    return [
        {
            "pk": str(pk),
            "tenant_id": str(tenant_id) if row.tenant_field else None,
            "key_digest": digest,
            "due_at": _deadline(row, period, at).isoformat(),
            # A row dated by its own column has an age; one carrying its deadline has none.
            "created_at": None if row.by_expiry else at.isoformat(),
        }
        for (pk, at, tenant_id), digest in zip(picked, digests, strict=True)
    ]
