"""How far a hold reaches: the records and rows it keeps, and how many of them are past due.

Shown on the holds' admin pages. Counted in the database
with one aggregate over the records and one per class of rows, never by
loading rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q

from retention.models import LegalHold, Policy, RecordState, RetentionRecord
from retention.rows.registry import row_classes
from retention.selectors.policies import version_governing
from retention.selectors.rows import hold_row_reach


@dataclass(frozen=True, slots=True)
class HoldReach:
    protected: int  # records in scope that still exist
    expired: int  # of which past their deadline: kept only because of holds
    # Rows of registered models the hold covers, and of those past their class's cutoff.
    rows: int = 0
    rows_expired: int = 0
    row_classes: int = 0  # classes of model rows the hold can touch
    on_row: bool = False  # a hold on one row (subject): it covers no record


def hold_reach(hold: LegalHold, *, now: datetime) -> HoldReach:
    counts = (
        RetentionRecord.objects.filter(hold.scope_q())
        .exclude(state=RecordState.DELETED)
        .aggregate(protected=Count("id"), expired=Count("id", filter=Q(expires_at__lte=now)))
    )
    names = [name for name in row_classes() if hold.data_class in (None, "", name)]
    versions = {
        policy.data_class: version_governing(policy)
        for policy in Policy.objects.filter(data_class__in=names)
    }
    rows = hold_row_reach(hold, now=now, versions=versions)
    return HoldReach(
        protected=counts["protected"],
        expired=counts["expired"],
        rows=rows.rows,
        rows_expired=rows.expired,
        row_classes=rows.classes,
        on_row=hold.subject_pk is not None,
    )


def hold_reach_many(holds: Iterable[LegalHold], *, now: datetime) -> dict[int, HoldReach]:
    return {hold.pk: hold_reach(hold, now=now) for hold in holds if hold.released_at is None}
