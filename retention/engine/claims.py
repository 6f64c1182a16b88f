"""Claims: a bounded page of eligible rows moved to ``deleting`` under a fresh lease.

One short transaction per page: ``SELECT … FOR UPDATE SKIP LOCKED`` in
``(expires_at, id)`` order, then one ``UPDATE`` of those ids. Rows locked by
another claimer are skipped, not waited for, and no lock is held once the
claim returns. A page resumes after the previous page's last row (a cursor
per class), so the claim's cost does not grow with what earlier pages walked
past.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q

from retention import counters
from retention.chain.events import events_append
from retention.conf import settings
from retention.engine.ledger import run_counts_sql
from retention.engine.rules import run_scope
from retention.models import (
    Policy,
    PolicyVersion,
    RecordQuerySet,
    RecordState,
    RetentionRecord,
    Run,
)
from retention.selectors.holds import held_record_ids
from retention.selectors.run_rules import class_cutoff


@dataclass(frozen=True, slots=True)
class ClaimedItem:
    record_id: int
    row_version: int
    tenant_id: str
    data_class: str
    storage: str
    object_key: str
    key_digest: str
    expires_at: datetime
    attempt: int
    probe: bool
    policy_version_id: int
    policy_key: str
    policy_version_number: int
    disposition: str
    erase_all_versions: bool
    # How often reconciliation put this record back after its deletion.
    reappearances: int = 0


@dataclass(frozen=True, slots=True)
class Claim:
    run_id: uuid.UUID
    token: uuid.UUID
    cutoff: datetime
    items: tuple[ClaimedItem, ...]
    lease_seconds: float = 300.0
    # Claimed with start_disposal: the claim's own transaction was the re-check.
    rechecked: bool = False
    # Items the run's ``claimed`` does not count yet: the page's finalize adds them.
    uncounted: int = 0

    def __len__(self) -> int:
        return len(self.items)


CLAIM_FIELDS = (
    "id",
    "row_version",
    "tenant_id",
    "data_class",
    "storage",
    "object_key",
    "key_digest",
    "expires_at",
    "attempts",
    "disposal_started_at",
    "reappearances",
    "policy_version_id",
    "policy_version__policy__data_class",
    "policy_version__number",
    "policy_version__disposition",
    "policy_version__erase_all_versions",
)


def claimed_item(
    row: dict[str, Any], *, row_version: int | None = None, probe: bool | None = None
) -> ClaimedItem:
    """A claimed row (``values(*CLAIM_FIELDS)``) as the disposal steps need it.

    ``row_version``: the version the claim saw, when the row was read later;
    ``probe``: whether an earlier attempt may have reached storage, when the
    row read already carries this claim's own disposal mark.
    """
    return ClaimedItem(
        record_id=row["id"],
        row_version=row["row_version"] if row_version is None else row_version,
        tenant_id=row["tenant_id"],
        data_class=row["data_class"],
        storage=row["storage"],
        object_key=row["object_key"],
        key_digest=row["key_digest"],
        expires_at=row["expires_at"],
        attempt=row["attempts"],
        probe=row["disposal_started_at"] is not None if probe is None else probe,
        policy_version_id=row["policy_version_id"],
        policy_key=row["policy_version__policy__data_class"],
        policy_version_number=row["policy_version__number"],
        disposition=row["policy_version__disposition"],
        erase_all_versions=row["policy_version__erase_all_versions"],
        reappearances=row["reappearances"],
    )


def _claim_returning(
    candidates: Any, token: uuid.UUID, lease_until: datetime, marks: dict[str, Any]
) -> tuple[dict[int, Any], list[dict[str, Any]]]:
    """PostgreSQL: lock the page, then move and read it in one statement.

    ``candidates`` is the SKIP LOCKED selection of (id, disposal_started_at):
    its value from before the update says whether an earlier attempt was
    under way. The update names its rows by an array of ids, so it fetches
    them by primary key whatever the planner believes of the table (a join
    to the locking query turned into a scan of the whole table, or worse,
    when the statistics were stale).
    """
    earlier = dict(candidates)
    if not earlier:
        return {}, []
    qn = connection.ops.quote_name
    record = RetentionRecord._meta
    version = PolicyVersion._meta
    policy = Policy._meta
    sets = [f"{qn('state')} = %s", f"{qn('lease_owner')} = %s", f"{qn('lease_expires_at')} = %s"]
    params: list[Any] = [RecordState.DELETING, token, lease_until]
    sets.append(f"{qn('attempts')} = r.{qn('attempts')} + 1")
    for name, value in marks.items():
        sets.append(f"{qn(name)} = %s")
        params.append(value)
    plain = [f for f in CLAIM_FIELDS if "__" not in f]
    returning = [f"r.{qn(f)}" for f in plain] + [
        f"p.{qn('data_class')}",
        f"v.{qn('number')}",
        f"v.{qn('disposition')}",
        f"v.{qn('erase_all_versions')}",
    ]
    sql = (
        f"UPDATE {qn(record.db_table)} AS r SET {', '.join(sets)} "
        f"FROM {qn(version.db_table)} AS v, {qn(policy.db_table)} AS p "
        f"WHERE r.{qn('id')} = ANY(%s) AND v.{qn('id')} = r.{qn('policy_version_id')} "
        f"AND p.{qn('id')} = v.{qn('policy_id')} RETURNING {', '.join(returning)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, list(earlier)])
        fetched = cursor.fetchall()
    # The joined fields come back in CLAIM_FIELDS' order, after the record's.
    names = [*plain, *(f for f in CLAIM_FIELDS if "__" in f)]
    rows = sorted(
        (dict(zip(names, values, strict=True)) for values in fetched),
        key=lambda row: (row["expires_at"], row["id"]),
    )
    return earlier, rows


def _claim_portable(
    candidates: Any, token: uuid.UUID, lease_until: datetime, marks: dict[str, Any]
) -> tuple[dict[int, Any], list[dict[str, Any]]]:
    """Lock, move and read the page in three statements (any database)."""
    # Whether an earlier attempt may have reached storage, before this claim
    # marks the rows itself.
    earlier = dict(candidates)
    if not earlier:
        return {}, []
    RetentionRecord.objects.filter(id__any_of=list(earlier)).update(
        state=RecordState.DELETING,
        lease_owner=token,
        lease_expires_at=lease_until,
        attempts=F("attempts") + 1,
        **marks,
    )
    rows = list(
        RetentionRecord.objects.filter(id__any_of=list(earlier), lease_owner=token)
        .order_by("expires_at", "id")
        .values(*CLAIM_FIELDS)
    )
    return earlier, rows


def records_claim(
    *,
    run: Run,
    data_class: str,
    limit: int,
    now: datetime,
    lease_seconds: float | None = None,
    start_disposal: bool = False,
    after: tuple[datetime, int] | None = None,
    token: uuid.UUID | None = None,
    count_claimed: bool = True,
) -> Claim:
    """Move up to ``limit`` eligible rows to ``deleting`` under a fresh lease.

    Rows locked by another claimer are skipped, not waited for. The
    transaction holds no lock once this returns.

    ``start_disposal``: the caller deletes right away (the inline engine), so
    the claim is the re-check too. It selects under row locks only rows that
    are expired and unheld against the holds as they are now — what the
    re-check would verify — and marks them as being disposed of in the same
    write, sparing each row a second update and the page a transaction. A
    second look in the same transaction gives back rows under a hold
    committed while the claim statement ran (``_held_given_back``).

    ``after``: the ``(expires_at, id)`` of the last row the caller's previous
    page took; the walk starts there instead of at the oldest due row, past
    what earlier pages skipped (held rows, rows locked by other claimers).
    A caller that gets nothing after its cursor claims once more without it.

    ``token``: the lease owner to claim under (a queued batch's own token);
    a fresh one by default.

    ``count_claimed=False`` leaves the run's row alone: its caller or the
    page's finalize counts the claim's ``uncounted`` items.
    """
    token = token or uuid.uuid4()
    cutoff = class_cutoff(run, data_class)
    # A paced page can take longer than the base lease: the caller adds the
    # time the rate gate will make it wait.
    lease_seconds = lease_seconds if lease_seconds is not None else settings.LEASE_SECONDS
    lease_until = now + timedelta(seconds=lease_seconds)
    with transaction.atomic():
        candidates = (
            _claimable(run, data_class, cutoff, now)
            .filter(_after_q(after))
            .order_by("expires_at", "id")
            .select_for_update(skip_locked=True, of=("self",))
            .values_list("id", "disposal_started_at")[:limit]
        )
        marks: dict[str, Any] = {"disposal_started_at": now} if start_disposal else {}
        move = _claim_returning if connection.vendor == "postgresql" else _claim_portable
        earlier, rows = move(candidates, token, lease_until, marks)
        if start_disposal and rows:
            rows = _held_given_back(run, token, rows, earlier, now)
        if rows:
            if count_claimed:
                Run.objects.filter(pk=run.pk).update(claimed=F("claimed") + len(rows))
            counters.count_on_commit(data_class, {"claimed": len(rows)})
    items = tuple(claimed_item(row, probe=earlier[row["id"]] is not None) for row in rows)
    return Claim(
        run_id=run.pk,
        token=token,
        cutoff=cutoff,
        items=items,
        lease_seconds=lease_seconds,
        rechecked=start_disposal,
        uncounted=0 if count_claimed else len(items),
    )


def _held_given_back(
    run: Run,
    token: uuid.UUID,
    rows: list[dict[str, Any]],
    earlier: dict[int, Any],
    now: datetime,
) -> list[dict[str, Any]]:
    """The claimed rows no hold covers; those it does go back, before any delete.

    The claim's ``NOT EXISTS`` over holds reads its statement's snapshot: on
    READ COMMITTED a hold committed while the statement walked the index is
    not seen by it, though the row it locked already carries the hold's
    version bump. This new statement sees every hold committed so far, and
    a hold committing from now on waits for these row locks (its version
    bump), so any hold it misses truly came after the re-check.

    A row past an earlier attempt's re-check may have lost its object
    already: it stays ``deleting`` with its lease lapsed, for the store to
    decide (``page.stranded_settle``), as a dead claimer's row would.
    """
    held = held_record_ids(row["id"] for row in rows)
    if not held:
        return rows
    # The re-check's own give-back (page imports this module, hence here).
    from retention.engine.page import held_give_back

    fresh = [row for row in rows if row["id"] in held and earlier[row["id"]] is None]
    tried = [row["id"] for row in rows if row["id"] in held and earlier[row["id"]] is not None]
    if tried:
        RetentionRecord.objects.filter(id__any_of=tried, lease_owner=token).update(
            lease_expires_at=now, attempts=F("attempts") - 1
        )
    items = [claimed_item(row, probe=False) for row in fresh]
    events, counts = held_give_back(run.pk, token, items, now, undo_claim=True)
    events_append(events, run_id=run.pk, now=now, also=run_counts_sql(run.pk, counts))
    if counts:
        counters.count_on_commit(rows[0]["data_class"], counts)
    return [row for row in rows if row["id"] not in held]


def _claimable(run: Run, data_class: str, cutoff: datetime, now: datetime) -> RecordQuerySet:
    """The rows of the class a claim may take now: expired, free, under no hold."""
    return run_scope(run).filter(data_class=data_class).claimable(cutoff=cutoff, now=now).not_held()


def _after_q(after: tuple[datetime, int] | None) -> Q:
    if after is None:
        return Q()
    expires_at, record_id = after
    # The lower bound is what the index walk starts from; the exclusion is
    # the few rows of the same instant that came before.
    return Q(expires_at__gte=expires_at) & ~Q(expires_at=expires_at, id__lte=record_id)


def claim_cursor(claim: Claim) -> tuple[datetime, int] | None:
    """Where the next page of the same walk starts (``records_claim(after=)``)."""
    if not claim.items:
        return None
    last = max(claim.items, key=lambda item: (item.expires_at, item.record_id))
    return last.expires_at, last.record_id


Cursors = dict[str, tuple[datetime, int] | None]


def records_claim_next(*, cursors: Cursors, data_class: str, **claim: Any) -> Claim:
    """The next page of a run's walk over one class (``records_claim``'s arguments).

    Resumes after the class's cursor, so the claim's cost does not grow with
    what earlier pages walked past. When nothing is left after it, one pass
    from the start picks up rows it went past (locked then, lease expired,
    retry due, given back). Moves the cursor; an empty page clears it.
    """
    after = cursors.get(data_class)
    page = records_claim(data_class=data_class, after=after, **claim)
    if not page.items and after is not None:
        page = records_claim(data_class=data_class, **claim)
    cursors[data_class] = claim_cursor(page)
    return page


def records_claim_stranded(*, run: Run, data_class: str, limit: int, now: datetime) -> Claim:
    """Take over rows a dead claimer left in ``deleting`` that a hold covers now.

    A claim skips held rows, so nothing else would ever finish them: their
    object may be gone already (the claimer died after its delete), or not.
    The claim is not a re-check: ``claim_dispose`` re-checks them, and probes
    the store for those past an earlier re-check (``page.held_settle``).
    """
    token = uuid.uuid4()
    lease_seconds = settings.LEASE_SECONDS
    with transaction.atomic():
        candidates = (
            run_scope(run)
            .filter(data_class=data_class, state=RecordState.DELETING, lease_expires_at__lte=now)
            .pending()
            .held()
            .order_by("expires_at", "id")
            .select_for_update(skip_locked=True, of=("self",))
            .values_list("id", "disposal_started_at")[:limit]
        )
        move = _claim_returning if connection.vendor == "postgresql" else _claim_portable
        earlier, rows = move(candidates, token, now + timedelta(seconds=lease_seconds), {})
    items = tuple(claimed_item(row, probe=earlier[row["id"]] is not None) for row in rows)
    return Claim(
        run_id=run.pk,
        token=token,
        cutoff=class_cutoff(run, data_class),
        items=items,
        lease_seconds=lease_seconds,
    )


def claim_release(token: uuid.UUID) -> int:
    """Give a claim's rows back to the claim queue, unprocessed (attempt not counted)."""
    return RetentionRecord.objects.filter(lease_owner=token, state=RecordState.DELETING).update(
        state=RecordState.ACTIVE,
        lease_owner=None,
        lease_expires_at=None,
        attempts=F("attempts") - 1,
    )


def claimable_count(*, run: Run, data_class: str, now: datetime, up_to: int) -> int:
    """How many rows a claim could take now (at most ``up_to``), counted in the
    database over a claim's walk: no lock taken, no row sent to the worker."""
    walk = (
        _claimable(run, data_class, class_cutoff(run, data_class), now)
        .order_by("expires_at", "id")
        .values_list("id", flat=True)[:up_to]
    )
    return walk.count()
