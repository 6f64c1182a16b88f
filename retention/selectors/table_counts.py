"""Row counts that never read a table: the planner's estimates on PostgreSQL.

On PostgreSQL a table's figure is ``pg_class.reltuples`` and a filtered
query's is its plan's row estimate; elsewhere (SQLite) ``COUNT(*)``.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import DatabaseError, connection, models, transaction

from retention.models import RetentionRecord


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def table_estimates() -> dict[str, int | None]:
    """PostgreSQL: the planner's row estimate of every table on the search path.

    ``reltuples`` is -1 for a table never vacuumed nor analysed: unknown.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.reltuples FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND n.nspname = ANY(current_schemas(false))"
        )
        return {name: (int(tuples) if tuples >= 0 else None) for name, tuples in cursor.fetchall()}


def exact_count(queryset: models.QuerySet[Any]) -> int | None:
    try:
        with transaction.atomic():
            return queryset.count()
    except DatabaseError:  # an unmanaged model without its table
        return None


def planner_rows(queryset: models.QuerySet[Any]) -> int | None:
    """PostgreSQL: how many rows the planner expects ``queryset`` to return."""
    try:
        with transaction.atomic():
            plan = json.loads(queryset.explain(format="json"))
    except (DatabaseError, ValueError):
        return None
    try:
        return int(plan[0]["Plan"]["Plan Rows"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def distinct_storages() -> list[str]:
    """PostgreSQL: the stores records are in, one index probe each (a skip scan).

    The unique index on (storage, object_key) leads with the store, so each
    step asks it for the next store after the last: cheap however many
    records there are.
    """
    table = connection.ops.quote_name(RetentionRecord._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE s(storage) AS ("  # noqa: S608 (a quoted table name)
            f" (SELECT storage FROM {table} ORDER BY storage LIMIT 1)"
            f" UNION ALL SELECT (SELECT storage FROM {table} WHERE storage > s.storage"
            f" ORDER BY storage LIMIT 1) FROM s WHERE s.storage IS NOT NULL"
            f") SELECT storage FROM s WHERE storage IS NOT NULL"
        )
        return [row[0] for row in cursor.fetchall()]
