"""Holds as filters over records, built on the one coverage rule.

``LegalHold.objects.covering()`` says which holds protect a record; the
engine's claims and re-checks use it through ``RecordQuerySet.held()`` (a
correlated EXISTS). Aggregates over a whole class (dashboard, impact preview)
turn the few active holds into a plain boolean over the record's columns
instead (``held_q``), so a conditional count over a million rows costs one scan.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any, TypeVar

from django.db import connection
from django.db.models import OuterRef, Q, QuerySet, Subquery

from retention.models import LegalHold, RecordState, RetentionRecord

# A page's row: (pk, time, tenant), as the row engine reads them.
RowT = TypeVar("RowT", bound=tuple[Any, ...])


def held_q(data_class: str) -> Q | None:
    """A filter matching the records of ``data_class`` under an active hold.

    ``None`` when no active hold can touch the class. Matches exactly what
    ``RecordQuerySet.held()`` matches for records of that class.
    """
    scopes = [hold.scope_q() for hold in LegalHold.objects.covering(data_class=data_class)]
    if not scopes:
        return None
    return reduce(or_, scopes)


def held_record_ids(record_ids: Iterable[int]) -> set[int]:
    """Which of these records an active hold protects, as the holds are now."""
    ids = list(record_ids)
    if not ids:
        return set()
    return set(RetentionRecord.objects.filter(id__any_of=ids).held().values_list("id", flat=True))


def hold_in_flight(hold: LegalHold) -> int:
    """How many records the hold covers that are past their re-check now.

    Their claimer deletes them anyway (the re-check was its last look); the
    events of their deletion say the hold came after it.
    """
    return (
        RetentionRecord.objects.filter(hold.scope_q())
        .filter(state=RecordState.DELETING, disposal_started_at__isnull=False)
        .count()
    )


def holds_after_recheck(record_ids: Sequence[int], *, data_class: str) -> dict[int, int]:
    """Of these records of ``data_class``, past their re-check, those an active hold
    covers now: record id → the first such hold's id.

    Their re-check found no hold under the row's lock, and a hold placed
    before it would have been seen: every such hold came after it. Read
    that way, not by comparing ``placed_at`` with ``disposal_started_at``,
    the answer does not depend on two hosts' clocks agreeing. One query on
    the holds when none can touch the class (the usual case), one more over
    the records otherwise.
    """
    if not record_ids or not LegalHold.objects.covering(data_class=data_class).exists():
        return {}
    return _first_holds(
        RetentionRecord.objects.filter(
            id__any_of=list(record_ids), disposal_started_at__isnull=False
        )
    )


def holds_first_covering(record_ids: Sequence[int]) -> dict[int, int]:
    """Of these records, those an active hold covers now: record id → the first
    such hold's id (the earliest placed), the one a held skip names."""
    if not record_ids:
        return {}
    return _first_holds(RetentionRecord.objects.filter(id__any_of=list(record_ids)))


def _first_holds(records: Any) -> dict[int, int]:
    first = (
        LegalHold.objects.covering(
            tenant_id=OuterRef("tenant_id"),
            data_class=OuterRef("data_class"),
            record_id=OuterRef("pk"),
        )
        .order_by("placed_at", "pk")
        .values("pk")[:1]
    )
    return dict(
        records.annotate(late_hold=Subquery(first))
        .filter(late_hold__isnull=False)
        .values_list("id", "late_hold")
    )


# A hold over rows as ``RowHolds`` keeps it: its id, its kind ("class",
# "tenant", "row") and what it names (the tenant id, the row's pk, or "").
RowHold = tuple[int, str, str]


@dataclass(frozen=True, slots=True)
class RowHolds:
    """What the active holds protect of one class of model rows, as the holds are now.

    ``holds`` lists them oldest first (placed, then id): a row under several
    holds is kept by, and its evidence names, the first (``first_hold``).
    """

    whole_class: bool
    tenants: frozenset[str]
    pks: frozenset[str]
    holds: tuple[RowHold, ...] = ()

    @property
    def empty(self) -> bool:
        """No hold covers any row of the class."""
        return not (self.whole_class or self.pks or self.tenants)

    def covers(self, pk: object, tenant_id: object) -> bool:
        return (
            self.whole_class
            or str(pk) in self.pks
            or (tenant_id is not None and str(tenant_id) in self.tenants)
        )

    def split(self, rows: Sequence[RowT]) -> tuple[list[RowT], list[RowT]]:
        """(held, free) of a page's ``(pk, time, tenant)`` rows, each in page order."""
        if self.empty:
            return [], list(rows)
        held: list[RowT] = []
        free: list[RowT] = []
        for r in rows:
            (held if self.covers(r[0], r[2]) else free).append(r)
        return held, free

    def first_hold(self, pk: object, tenant_id: object) -> int | None:
        """The id of the oldest hold covering the row ``(pk, tenant_id)``; None if none does."""
        for hold_id, kind, value in self.holds:
            if (
                kind == "class"
                or (kind == "row" and value == str(pk))
                or (kind == "tenant" and tenant_id is not None and value == str(tenant_id))
            ):
                return hold_id
        return None

    def unheld(self, qs: QuerySet[Any], tenant_field: str | None) -> QuerySet[Any]:
        """``qs`` (rows of the class) without the rows a hold covers."""
        if self.whole_class:
            return qs.none()
        held = self.q(tenant_field)
        return qs if held is None else qs.exclude(held)

    def q(self, tenant_field: str | None) -> Q | None:
        """A filter over the class's rows matching the held ones; None when none is held."""
        if self.whole_class:
            return Q()
        parts = []
        if self.pks:
            parts.append(Q(pk__in=sorted(self.pks)))
        if self.tenants and tenant_field:
            parts.append(Q(**{f"{tenant_field}__in": sorted(self.tenants)}))
        return reduce(or_, parts) if parts else None


def held_rows(data_class: str, *, label: str, tenant_field: str | None) -> RowHolds:
    """The holds over a class of model rows (``label``: its model), on the one coverage rule.

    A hold scoped to a tenant covers the rows whose ``tenant_field`` is that
    tenant (a class without one has no tenants to hold); a hold on one row
    covers it by model and primary key; a data-class hold covers them all.
    """
    whole = False
    tenants: set[str] = set()
    pks: set[str] = set()
    order: list[RowHold] = []
    # Asked before every page: the query is built once per class (building
    # it cost three times what running it does), then only run.
    sql, params = _rows_covering_sql(data_class)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        holds = cursor.fetchall()
    for hold_id, subject_pk, subject_type, tenant_id, hold_class in holds:
        if subject_pk is not None:
            if subject_type == label:
                pks.add(subject_pk)
                order.append((hold_id, "row", subject_pk))
        elif tenant_id:
            if tenant_field:
                tenants.add(tenant_id)
                order.append((hold_id, "tenant", tenant_id))
        elif hold_class == data_class:
            whole = True
            order.append((hold_id, "class", ""))
    return RowHolds(whole, frozenset(tenants), frozenset(pks), tuple(order))


@functools.lru_cache(maxsize=256)
def _rows_covering_sql(data_class: str) -> tuple[str, tuple[Any, ...]]:
    """``rows_covering(data_class)``'s values as SQL (no clock, no setting in it)."""
    holds = (
        LegalHold.objects.rows_covering(data_class)
        .order_by("placed_at", "pk")
        .values_list("pk", "subject_pk", "subject_type", "tenant_id", "data_class")
    )
    return holds.query.sql_with_params()


def holds_named(
    *, tenant_id: str | None = None, data_class: str | None = None, active: bool | None = True
) -> QuerySet[LegalHold]:
    """Holds by the scope they name, oldest first: what a host looks up to release one.

    ``tenant_id`` and ``data_class`` match the hold's own scope (a hold on
    tenant "acme", a hold on "logs.api"), not every hold that covers them:
    a hold on one row or one record names neither. ``active``: True for
    holds in force, False for released ones, None for both.
    """
    qs = LegalHold.objects.all()
    if active is not None:
        qs = qs.filter(released_at__isnull=active)
    if tenant_id is not None:
        qs = qs.filter(tenant_id=tenant_id)
    if data_class is not None:
        qs = qs.filter(data_class=data_class)
    return qs.order_by("placed_at", "pk")
