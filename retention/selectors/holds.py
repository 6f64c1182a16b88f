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

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import connection
from django.db.models import Exists, Field, OuterRef, Q, QuerySet, Subquery

from retention.conf import settings
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


def mirrored_storages() -> tuple[str, ...]:
    """The storage aliases whose objects carry an Object Lock legal hold while held.

    Empty while ``RETENTION_OBJECT_LOCK_HOLDS`` cannot be read (check
    retention.E025 reports it): the mirror, tracking and reconciliation
    read it here, so all three agree.
    """
    try:
        return settings.OBJECT_LOCK_HOLDS
    except ValueError:
        return ()


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
# "tenant", "row") and what it names (the tenant id, the row's pk, or ""), as
# the field reads it (``held_rows``).
RowHold = tuple[int, str, str]


@dataclass(frozen=True, slots=True)
class RowHolds:
    """What the active holds protect of one class of model rows, as the holds are now.

    ``holds`` lists them oldest first (placed, then id): a row under several
    holds is kept by, and its evidence names, the first (``first_hold``).
    ``read``: the ids of every hold that could touch the class when these were
    read; ``unheld`` refuses any page its statement would take while another
    one is active (``placed_since``).
    """

    whole_class: bool
    tenants: frozenset[str]
    pks: frozenset[str]
    holds: tuple[RowHold, ...] = ()
    data_class: str = ""
    read: frozenset[int] = frozenset()

    @property
    def empty(self) -> bool:
        """No hold covers any row of the class."""
        return not (self.whole_class or self.pks or self.tenants)

    def covers(self, pk: object, tenant_id: object) -> bool:
        return self.first_hold(pk, tenant_id) is not None

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
        """The id of the oldest hold covering the row ``(pk, tenant_id)``; None if none does.

        ``pk`` and ``tenant_id`` as the ORM reads them from the row: their
        text is the text ``held_rows`` made of the holds' values.
        """
        for hold_id, kind, value in self.holds:
            if (
                kind == "class"
                or (kind == "row" and value == str(pk))
                or (kind == "tenant" and tenant_id is not None and value == str(tenant_id))
            ):
                return hold_id
        return None

    def unheld(self, qs: QuerySet[Any], tenant_field: str | None) -> QuerySet[Any]:
        """``qs`` (rows of the class) without the rows a hold covers, as the holds are
        when its statement starts.

        The holds read are excluded by value; should any other hold that can
        touch the class be active when the statement starts (placed since
        they were read), the statement takes no row at all. A caller finding
        nothing asks ``placed_since`` and reads the holds again
        (``retention.engine.rows.select.unheld_read``).
        """
        if self.whole_class:
            return qs.none()
        if self.data_class:
            qs = qs.filter(~Exists(self._others()))
        held = self.q(tenant_field)
        return qs if held is None else qs.exclude(held)

    def placed_since(self) -> bool:
        """Whether a hold that can touch the class is active now that was not read here."""
        return bool(self.data_class) and self._others().exists()

    def _others(self) -> QuerySet[LegalHold]:
        others = LegalHold.objects.rows_covering(self.data_class)
        return others.exclude(pk__in=sorted(self.read)) if self.read else others

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
    A hold's row or tenant is read as its field reads a value (``to_python``:
    "07" is row 7, an upper-case UUID is that UUID), so that the filter the
    database applies (``q``) and the texts compared here (``first_hold``)
    agree; a value the field cannot take names no row of the class.
    """
    whole = False
    tenants: set[str] = set()
    pks: set[str] = set()
    order: list[RowHold] = []
    read: set[int] = set()
    pk_field, tenant = _row_fields(label, tenant_field)
    # Asked before every page: the query is built once per class (building
    # it cost three times what running it does), then only run.
    sql, params = _rows_covering_sql(data_class)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        holds = cursor.fetchall()
    for hold_id, subject_pk, subject_type, tenant_id, hold_class in holds:
        read.add(hold_id)
        if subject_pk is not None:
            if subject_type == label and (pk := _as_read(pk_field, subject_pk)) is not None:
                pks.add(pk)
                order.append((hold_id, "row", pk))
        elif tenant_id:
            if tenant is not None and (value := _as_read(tenant, tenant_id)) is not None:
                tenants.add(value)
                order.append((hold_id, "tenant", value))
        elif hold_class == data_class:
            whole = True
            order.append((hold_id, "class", ""))
    return RowHolds(
        whole, frozenset(tenants), frozenset(pks), tuple(order), data_class, frozenset(read)
    )


def hold_subject_as_read(
    hold: LegalHold, *, label: str, tenant_field: str | None
) -> tuple[str | None, str | None]:
    """(row pk, tenant) a hold names, as the class's fields read them (``held_rows``'s
    rule for one hold); None where it names none, or a value the field cannot take."""
    pk_field, tenant = _row_fields(label, tenant_field)
    pk = _as_read(pk_field, hold.subject_pk) if hold.subject_pk is not None else None
    tenant_id = None
    if hold.tenant_id and tenant_field:
        tenant_id = _as_read(tenant, hold.tenant_id) if tenant is not None else hold.tenant_id
    return pk, tenant_id


def _as_read(field: Field[Any, Any] | None, value: str) -> str | None:
    """``value`` as the text of what ``field`` reads it as; None if it cannot be one."""
    if field is None:
        return value
    try:
        python = field.to_python(value)
    except (ValidationError, ValueError, TypeError):
        return None
    return None if python is None else str(python)


@functools.lru_cache(maxsize=256)
def _row_fields(
    label: str, tenant_field: str | None
) -> tuple[Field[Any, Any] | None, Field[Any, Any] | None]:
    """The model's primary key field and the field at the end of ``tenant_field``'s path
    (None for a tenant field that is not a column: its value is compared as typed)."""
    try:
        model = apps.get_model(label)
    except (LookupError, ValueError):
        return None, None
    pk = model._meta.pk
    if not tenant_field:
        return pk, None
    meta = model._meta
    field: Any = None
    for part in tenant_field.split("__"):
        try:
            field = meta.get_field(part)
        except FieldDoesNotExist:
            return pk, None
        if field.related_model is not None and field.is_relation:
            meta = field.related_model._meta
    return pk, field if isinstance(field, Field) else None


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
