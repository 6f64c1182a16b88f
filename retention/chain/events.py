"""Append events to the hash chain (verifying it and receipts: ``retention.selectors.evidence``).

Events finalized together become one batch: their leaves are hashed into a
Merkle root, and the root is chained to the previous batch's chain hash.
Workers serialize only on the short append of a batch (one row lock on the
chain head), never on one lock per event.
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.db import IntegrityError, connection, transaction
from django.db.models import Field

from retention.chain.leaves import event_leaf
from retention.models import ChainHead, DeletionEvent, EventBatch
from retention.receipts import evidence


@dataclass(slots=True)
class NewEvent:
    """An event about to be appended: DeletionEvent's fields, none of its weight.

    The engine writes one per record of every page; building model instances
    (signals, descriptors) cost more than hashing and inserting them.
    """

    idempotency_key: str
    record_id: int | None
    run_id: uuid.UUID | None
    tenant_id: str
    data_class: str
    policy_version_id: int
    policy_key: str
    policy_version_number: int
    disposition: str
    outcome: str
    attempt: int
    reason: str
    key_digest: str
    expires_at: datetime
    occurred_at: datetime
    batch_id: int | None = None
    leaf_index: int | None = None
    event_hash: str = ""
    # Database rows (kind "row"): no record; a page event carries its count and pk range.
    kind: str = "object"
    row_count: int | None = None
    first_pk: str = ""
    last_pk: str = ""
    # A per-row page event ("per_row"): its rows' subjects, packed.
    evidence: str = ""
    row_subjects: bytes | None = None


# The columns an append writes, in DeletionEvent's attribute names.
_INSERTED = (
    "idempotency_key",
    "record_id",
    "run_id",
    "tenant_id",
    "data_class",
    "policy_version_id",
    "policy_key",
    "policy_version_number",
    "disposition",
    "outcome",
    "attempt",
    "reason",
    "key_digest",
    "expires_at",
    "occurred_at",
    "batch_id",
    "leaf_index",
    "event_hash",
    "kind",
    "row_count",
    "first_pk",
    "last_pk",
    "evidence",
    "row_subjects",
)

# An event's values in _INSERTED order, as one tuple (built in C: every event
# of every page goes through it).
_inserted_values = operator.attrgetter(*_INSERTED)

AnyEvent = DeletionEvent | NewEvent


# A statement of the caller's (SQL, params) to run with an append.
Statement = tuple[str, Sequence[Any]]


class EventsRecorded(Exception):
    """An append trusted without a savepoint (``known_new="page"``) met a recorded key.

    The caller's transaction is spoiled (the refused insert aborted it): it
    rolls back as a whole, and the caller does its work again, appending with
    ``known_new=False``.
    """


def events_append(
    events: Sequence[AnyEvent],
    *,
    run_id: uuid.UUID | None,
    now: datetime,
    known_new: bool | Literal["page"] = False,
    also: Statement | None = None,
) -> list[AnyEvent]:
    """Insert the events not recorded yet as one chained batch; return them.

    Must run inside the caller's transaction, so the batch commits (or not)
    together with the state change it records. ``known_new`` skips the look-up
    of existing idempotency keys when the caller's row locks already prove
    the events are new (a finalize of rows still leased to it); should that
    ever be wrong, the unique key refuses the insert and the look-up runs.
    ``known_new="page"`` trusts the same without a savepoint (two round
    trips less): should it be wrong, ``EventsRecorded`` is raised and the
    caller's whole transaction rolls back, for the caller to do again.
    ``also`` is a write of the caller's that belongs with the events (a
    page's run counts; an ``UPDATE ... WHERE`` statement): on PostgreSQL it
    goes in the statement that advances the chain, once the chain head is
    locked, a round trip less for every page; it runs exactly once either
    way, even when every event was recorded already.
    """
    if not events:
        _execute(also)
        return []
    if known_new == "page":
        try:
            return _append(events, run_id=run_id, now=now, dedupe=False, also=also)
        except IntegrityError as exc:
            raise EventsRecorded(str(exc)) from exc
    if known_new:
        try:
            with transaction.atomic():
                return _append(events, run_id=run_id, now=now, dedupe=False, also=also)
        except IntegrityError:
            pass
    return _append(events, run_id=run_id, now=now, dedupe=True, also=also)


def _execute(statement: Statement | None) -> None:
    if statement is not None:
        with connection.cursor() as cursor:
            cursor.execute(*statement)


def chain_head_lock() -> None:
    """Lock the chain head in the caller's transaction: for a caller that must
    lock the run's row before its events are appended, since appends lock
    the head first, then the run (``also``)."""
    _head_locked()


def _head_locked() -> tuple[int, str]:
    """Lock the chain head; its (seq, chain). Creates it if a flushed database lost it."""
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(ChainHead._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT seq, chain FROM {table} WHERE id = 1 FOR UPDATE")
            row = cursor.fetchone()
        if row is not None:
            return int(row[0]), str(row[1])
    head = ChainHead.objects.select_for_update().filter(pk=1).first()
    if head is None:
        # The migration creates the head; a flushed test database may not.
        ChainHead.objects.get_or_create(pk=1)
        head = ChainHead.objects.select_for_update().get(pk=1)
    return head.seq, head.chain


def _recorded(keys: list[str]) -> set[str]:
    """The idempotency keys among ``keys`` that events already carry."""
    if connection.vendor == "postgresql":
        # One array parameter: a page of per-row events has 1,000 keys.
        table = connection.ops.quote_name(DeletionEvent._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT idempotency_key FROM {table} WHERE idempotency_key = ANY(%s)", [keys]
            )
            return {key for (key,) in cursor.fetchall()}
    return set(
        DeletionEvent.objects.filter(idempotency_key__in=keys).values_list(
            "idempotency_key", flat=True
        )
    )


def _append(
    events: Sequence[AnyEvent],
    *,
    run_id: uuid.UUID | None,
    now: datetime,
    dedupe: bool,
    also: Statement | None,
) -> list[AnyEvent]:
    # No savepoint of its own: it runs in the caller's transaction (or in the
    # one known_new opened), which rolls back as a whole on failure.
    with transaction.atomic(savepoint=False):
        head: tuple[int, str] | None = None
        if dedupe:
            head = _head_locked()
            # Under the chain lock no concurrent finalizer can insert the same
            # idempotency key between this check and the insert.
            fresh = _fresh(events, _recorded([e.idempotency_key for e in events]))
        else:
            fresh = _fresh(events, set())
        if not fresh:
            _execute(also)
            return []
        # The leaves and their root depend on the events alone: hashed before
        # the chain lock when nothing is looked up under it, so a concurrent
        # page's append does not wait for this page's hashing.
        leaves = [event_leaf(e) for e in fresh]
        root = evidence.merkle_root(leaves)
        for index, (event, leaf) in enumerate(zip(fresh, leaves, strict=True)):
            event.leaf_index = index
            event.event_hash = leaf.hex()
        batch = EventBatch(run_id=run_id, size=len(fresh), root=root.hex(), created_at=now)
        if connection.vendor == "postgresql":
            # The events go in first, under the batch's id drawn ahead (their
            # foreign key is checked at commit): a concurrent page's append
            # waits for the chain head only while this one links its root and
            # commits, never while a thousand events are copied.
            batch.pk = _batch_id_drawn()
            for event in fresh:
                event.batch_id = batch.pk
            _insert(fresh)
            _chain_in_one_statement(batch, also)
            return fresh
        head_seq, head_chain = head or _head_locked()
        batch.seq = head_seq + 1
        batch.previous_chain = head_chain
        batch.chain = evidence.chain_hash(
            bytes.fromhex(head_chain), batch.seq, batch.size, root
        ).hex()
        batch.save(force_insert=True)
        ChainHead.objects.filter(pk=1).update(seq=batch.seq, chain=batch.chain)
        _execute(also)
        batch_id = batch.pk
        for event in fresh:
            event.batch_id = batch_id
        _insert(fresh)
    return fresh


def _fresh(events: Sequence[AnyEvent], recorded: set[str]) -> list[AnyEvent]:
    """The events whose keys are not ``recorded`` (the first of each key only)."""
    seen = set(recorded)
    fresh = []
    for event in events:
        if event.idempotency_key not in seen:
            seen.add(event.idempotency_key)
            fresh.append(event)
    return fresh


def _batch_id_drawn() -> int:
    """The next batch id from its sequence, before the batch is chained."""
    table = EventBatch._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))", [table])
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def _chain_in_one_statement(batch: EventBatch, also: Statement | None) -> None:
    """Lock the chain head, chain ``batch`` (its id, size and root set) to it,
    insert it and move the head: one statement, the chain hash computed by the
    server (``evidence.chain_hash``, spelled in SQL).

    The caller makes it the last statement of its transaction: the head's
    lock is held from here until the commit, so batches commit in the order
    of their ``seq``, and that is the order readers page in.

    The head's lock is the first thing the statement takes (the main query,
    ``moved`` and ``also`` all read ``new``, which reads the locked row), so
    the lock order stays the chain head, then the run; and the lock is held
    a round trip less a page than a read, a hash in Python and a write.
    """
    qn = connection.ops.quote_name
    head, table = qn(ChainHead._meta.db_table), qn(EventBatch._meta.db_table)
    also_sql, also_params = "", list[Any]()
    if also:
        # Once the head is locked, and only then: reading ``new`` makes it wait
        # for the lock, and a head missing (a flushed test database) skips it.
        assert " WHERE " in also[0], "also: an UPDATE ... WHERE statement"
        also_sql = f", also AS ({also[0]} AND EXISTS (SELECT FROM new))"
        also_params = list(also[1])
    sql = (
        f"WITH old AS (SELECT seq, chain FROM {head} WHERE id = 1 FOR UPDATE), "
        "new AS (SELECT seq + 1 AS seq, chain AS previous, encode(sha256("
        f"'\\x{evidence.CHAIN_TAG.hex()}'::bytea || decode(chain, 'hex') || int8send(seq + 1) "
        "|| int8send(%s::bigint) || decode(%s, 'hex')), 'hex') AS chain FROM old), "
        f"moved AS (UPDATE {head} SET seq = new.seq, chain = new.chain FROM new "
        f"WHERE {head}.id = 1){also_sql} "
        f"INSERT INTO {table} (id, seq, run_id, size, root, previous_chain, chain, created_at) "
        "SELECT %s, seq, %s, %s, %s, previous, chain, %s FROM new RETURNING id"
    )
    params = [batch.size, batch.root, *also_params, batch.pk, batch.run_id, batch.size]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, batch.root, batch.created_at])
        row = cursor.fetchone()
    if row is None:
        # No head (the migration creates it; a flushed test database may not
        # have it), so nothing ran, ``also`` neither: again, with a head.
        ChainHead.objects.get_or_create(pk=1)
        _chain_in_one_statement(batch, also)


def _column(field: Field[Any, Any]) -> str:
    # A concrete field always has a column; django-stubs types it optional for all fields.
    assert field.column is not None
    return field.column


def _insert(events: Sequence[AnyEvent]) -> None:
    """Insert events: COPY on PostgreSQL, a bulk insert elsewhere."""
    if connection.vendor != "postgresql":
        DeletionEvent.objects.bulk_create(
            e
            if isinstance(e, DeletionEvent)
            else DeletionEvent(**{n: getattr(e, n) for n in _INSERTED})
            for e in events
        )
        return
    meta = DeletionEvent._meta
    column_of = {field.attname: _column(field) for field in meta.concrete_fields}
    columns = ", ".join(connection.ops.quote_name(column_of[name]) for name in _INSERTED)
    sql = f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
    started = time.monotonic()
    # Django's error types (IntegrityError) for the raw COPY too: callers catch them.
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.cursor.copy(sql) as copy,
    ):
        for event in events:
            copy.write_row(_inserted_values(event))
    if connection.queries_logged:
        # COPY bypasses Django's cursor wrapper; log it, so query counts stay honest.
        connection.queries_log.append(
            {"sql": f"{sql} -- {len(events)} rows", "time": f"{time.monotonic() - started:.3f}"}
        )
