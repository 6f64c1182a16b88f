"""Deleting a page of model rows when the delete is one statement and nothing else.

That is when Django's collector would only fast-delete the page (no delete
signal, no relation to follow) on PostgreSQL. The page is then one
``DELETE ... WHERE pk = ANY(ARRAY(<the locked page select>)) RETURNING``,
its select leaving out the held rows as the holds are when it starts, or
(rows read first) the ids of the rows a hold leaves free bound as one
array. Also here: the approved-cascade guard every delete path of
``retention.engine.rows.page`` goes through.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import EmptyResultSet, FieldDoesNotExist
from django.db import IntegrityError, connections, models, router
from django.db.models.deletion import Collector

from retention.chain.events import EventsRecorded
from retention.chain.row_keys import key_recorded
from retention.engine.rows.evidence import PageGroup, RowEvents
from retention.engine.rows.select import RowCursor, RowPage, locked_page
from retention.models import EventOutcome, RowEventKey, Run
from retention.rows.cascade import cascade_models, label
from retention.rows.registry import RowClass
from retention.selectors.run_rules import ClassRules


class CascadeViolation(Exception):
    """A page's delete would touch models outside the approved cascade."""


def refuse_outside(rules: ClassRules, row: RowClass, touched: set[str]) -> None:
    """Stop a page whose delete would touch models the approved cascade does not name."""
    outside = touched - cascade_models(rules.cascade or {})
    if outside:
        raise CascadeViolation(
            f"deleting rows of {row.label} would also touch "
            f"{', '.join(sorted(outside))}, outside the cascade approved with "
            f"version {rules.version_number}"
        )


def plain_delete(row: RowClass, db: str) -> bool:
    """Whether deleting the rows is one statement and nothing else (PostgreSQL).

    That is when Django's collector would only fast-delete the page: no
    delete signal listens to the model, no relation cascades from it, no
    parent or generic relation. Its ``DELETE ... WHERE pk IN (...)`` binds
    the page's 1,000 ids one by one; the same delete takes them as one
    array parameter. Asked on every page: a receiver may connect at any time.
    """
    if connections[db].vendor != "postgresql":
        return False
    # A model class is what the collector asks about (django-stubs types only instances).
    return Collector(using=db, origin=None).can_fast_delete(row.model)  # type: ignore[arg-type]


def delete_ids(row: RowClass, db: str, pks: list[Any]) -> None:
    connection = connections[db]
    meta = row.model._meta
    quote = connection.ops.quote_name
    values = [meta.pk.get_db_prep_value(pk, connection) for pk in pks]
    table, pk = quote(meta.db_table), quote(_pk_column(row))
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {pk} = ANY(%s)", [values])


def returning_columns(row: RowClass, db: str) -> tuple[str, str, str | None] | None:
    """The quoted columns of (pk, time, tenant) when all are the table's own, else None."""
    names = ("pk", row.time_field, row.tenant_field) if row.tenant_field else ("pk", row.time_field)
    columns = [_own_column(row, name) for name in names]
    if any(column is None for column in columns):
        return None  # a lookup path, or a value the ORM would convert: read it first
    quote = connections[db].ops.quote_name
    quoted = [quote(str(column)) for column in columns]
    return quoted[0], quoted[1], quoted[2] if row.tenant_field else None


def _own_column(row: RowClass, name: str) -> str | None:
    """The column of the model's own field ``name``, if the ORM reads it unconverted."""
    meta = row.model._meta
    try:
        field = meta.pk if name == "pk" else meta.get_field(name)
    except FieldDoesNotExist:
        return None
    if not isinstance(field, models.Field) or hasattr(field, "from_db_value"):
        return None
    if field.model is not row.model:
        return None
    return field.column


def _pk_column(row: RowClass) -> str:
    column = row.model._meta.pk.column
    assert column is not None  # a concrete field; django-stubs types columns optional
    return column


def _keys_as_text(row: RowClass) -> bool:
    """Whether PostgreSQL spells and orders the primary keys as Python does (str, <)."""
    return isinstance(row.model._meta.pk, (models.IntegerField, models.UUIDField))


def delete_returning(
    run: Run,
    row: RowClass,
    rules: ClassRules,
    due: models.QuerySet[Any],
    cursor: RowCursor | None,
    limit: int,
    columns: tuple[str, str, str | None],
    result: RowPage,
    now: datetime,
) -> int:
    """A page in one statement: lock, re-check, delete; return how many rows went.

    ``due`` leaves out the held rows (``RowHolds.unheld``): the statement's
    select sees every hold committed before it starts.

    ``DELETE ... WHERE pk = ANY(ARRAY(<the page select, FOR UPDATE SKIP
    LOCKED>)) RETURNING pk, time, tenant``: what the two statements of a held
    class do, without the ids going out and back in. (``pk IN (<select>)``
    is planned as a join, ten times slower; the array makes the select run
    first, then the delete goes by the primary key.) With ``per_batch``
    evidence the same statement also groups the deleted rows by tenant, so
    a page's 1,000 rows come back as one line per tenant: its count, its
    keys in keyset order (joined by newlines, which the page's digest is
    over), its first and last key and its last time.
    """
    db = router.db_for_write(row.model)
    connection = connections[db]
    table = connection.ops.quote_name(row.model._meta.db_table)
    pk, at, tenant = columns
    page = locked_page(due, row, cursor).values_list("pk")[:limit]
    try:
        select, params = page.query.get_compiler(using=db).as_sql()
    except EmptyResultSet:
        return 0  # every row is held: nothing for a page
    gone = (
        f"DELETE FROM {table} WHERE {pk} = ANY(ARRAY({select})) "
        f"RETURNING {pk} AS pk, {at} AS at, {tenant or 'NULL'} AS tenant"
    )
    gone = f"WITH gone AS ({gone}) "
    events = RowEvents(run=run, row=row, rules=rules, now=now)
    groups: list[PageGroup] | None = None
    rows: list[tuple[Any, datetime, Any]] = []
    stamped: list[tuple[Any, Any, str]] | None = None
    keys_recorded = False
    with connection.cursor() as db_cursor:
        if row.evidence == "per_batch" and _keys_as_text(row):
            db_cursor.execute(f"{gone}{_BY_TENANT}", params)
            groups = [PageGroup(*line) for line in db_cursor.fetchall()]
            seen = sum(group.count for group in groups)
            last = max(((g.latest_at, g.last) for g in groups), default=None)
        elif row.evidence == "per_row" and _stamped_in_sql(row):
            # Each row's deadline spelled by the server: no timestamp parsed in
            # Python; an integer key's row key written by the same statement.
            scope = events.statement_key_scope(EventOutcome.DELETED)
            if router.db_for_write(RowEventKey) != db:
                scope = None  # the keys' table is not on the rows' database
            keys = f", keys AS ({_row_keys_insert()}) " if scope else " "
            try:
                db_cursor.execute(
                    f"{gone.rstrip()}{keys}SELECT pk, tenant, {_STAMP} FROM gone ORDER BY at, pk",
                    [
                        *params,
                        *([scope] if scope else []),
                        events.period // timedelta(microseconds=1),
                    ],
                )
            except IntegrityError as exc:
                if not key_recorded(exc):
                    raise
                raise EventsRecorded(str(exc)) from exc
            keys_recorded = scope is not None
            stamped = db_cursor.fetchall()
            seen = len(stamped)
            last = None
            if stamped:
                pk_last, _tenant, deadline = stamped[-1]
                last = (datetime.fromisoformat(deadline) - events.period, pk_last)
        else:
            db_cursor.execute(f"{gone}SELECT pk, at, tenant FROM gone", params)
            # RETURNING follows no order; the keyset (and the events) do.
            rows = sorted(db_cursor.fetchall(), key=lambda r: (r[1], r[0]))
            seen = len(rows)
            last = (rows[-1][1], rows[-1][0]) if rows else None
    result.seen = seen
    if last is None:
        return 0
    refuse_outside(rules, row, {label(row.model)})
    result.cursor = last
    if groups is not None:
        events.add_groups(EventOutcome.DELETED, groups)
    elif stamped is not None:
        events.add_stamped(EventOutcome.DELETED, stamped, keys_recorded=keys_recorded)
    else:
        events.add(EventOutcome.DELETED, rows)
    result.counts["claimed"] += seen
    result.counts["deleted"] += seen
    events.append(counts=result.counts)
    return seen


def _stamped_in_sql(row: RowClass) -> bool:
    """Whether the server can spell a row's deadline as ``evidence.stamp`` does.

    A timestamp with a time zone (a DateTimeField with USE_TZ), turned to
    UTC; other columns go through Python, which reads them as Django does.
    """
    try:
        field = row.model._meta.get_field(row.time_field)
    except FieldDoesNotExist:
        return False
    return isinstance(field, models.DateTimeField) and bool(django_settings.USE_TZ)


def _row_keys_insert() -> str:
    """The row keys of ``gone``'s integer keys: a scope parameter, then the key
    offset to sort as unsigned (``evidence.INT_KEY_OFFSET``), in hex."""
    table = connections[router.db_for_write(RowEventKey)].ops.quote_name(RowEventKey._meta.db_table)
    return (
        f"INSERT INTO {table} (key) SELECT "
        "(%s || lpad(to_hex(pk::bigint # x'8000000000000000'::bigint), 16, '0'))::uuid FROM gone"
    )


# A row's deadline (its time + the period, in microseconds), spelled as ``evidence.stamp``.
_STAMP = (
    "to_char((at + %s * interval '1 microsecond') AT TIME ZONE 'UTC', "
    '\'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\')'
)

# A page's deleted rows, one line per tenant (``PageGroup``'s fields).
_BY_TENANT = (
    "SELECT tenant, n, array_to_string(keys, E'\\n'), keys[1], keys[n], latest FROM ("
    "SELECT tenant, count(*) AS n, array_agg(pk ORDER BY at, pk) AS keys, max(at) AS latest "
    "FROM gone GROUP BY tenant) AS page"
)
