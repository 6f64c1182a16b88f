"""The idempotency keys of rows' events under per-row page events (``RowEventKey``).

A page of a thousand rows records a thousand keys: one statement, one narrow
index, written before the chain's lock (``retention.engine.rows.evidence``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import IntegrityError, connection

from retention.chain.events import EventsRecorded
from retention.models import RowEventKey


def row_keys_record(keys: Sequence[str], *, trusted: bool) -> set[str]:
    """Record the idempotency keys of rows' events (32 hex digits each); return the new ones.

    Runs in the caller's transaction, before the chain's lock. ``trusted``
    (the caller's row locks prove the keys new): a recorded key raises
    ``EventsRecorded``, as ``events_append(known_new="page")`` does.
    Otherwise the keys recorded before are left out of the return.
    """
    if not keys:
        return set()
    if connection.vendor != "postgresql":
        # One process on SQLite: look up, then insert what is new.
        recorded = {
            key.hex
            for key in RowEventKey.objects.filter(
                key__in=[uuid.UUID(key) for key in keys]
            ).values_list("key", flat=True)
        }
        fresh = [key for key in dict.fromkeys(keys) if key not in recorded]
        RowEventKey.objects.bulk_create([RowEventKey(key=uuid.UUID(key)) for key in fresh])
        return set(fresh)
    table = connection.ops.quote_name(RowEventKey._meta.db_table)
    if trusted:
        # COPY of one text block, parsed by the server: no parameter per key.
        try:
            with (
                connection.wrap_database_errors,
                connection.cursor() as cursor,
                cursor.cursor.copy(f"COPY {table} (key) FROM STDIN") as copy,
            ):
                copy.write("\n".join(keys) + "\n")
        except IntegrityError as exc:
            if not key_recorded(exc):
                raise
            raise EventsRecorded(str(exc)) from exc
        return set(keys)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (key) SELECT unnest(%s::text[]::uuid[]) "
            "ON CONFLICT DO NOTHING RETURNING key",
            [list(keys)],
        )
        return {key.hex for (key,) in cursor.fetchall()}


def key_recorded(exc: IntegrityError) -> bool:
    """Whether ``exc`` is a row's key found recorded already (PostgreSQL), and
    not another constraint the same statement broke (a foreign key of the
    host's, say), which must surface as it is."""
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == f"{RowEventKey._meta.db_table}_pkey"
