"""The deletion engine: run ledger, single-flight lease, claim, dispose.

A run is written before any work. An enforcing run holds a lease per data
class, so a second trigger refuses instead of sweeping twice. Work proceeds in
claimed pages: claim (short transaction, SKIP LOCKED) → re-check (short
transaction) → delete (no transaction, no lock) → finalize (short
transaction: row state, event and run counts together). Every step is safe to
repeat; a crash anywhere leaves rows whose lease expires and which the next
claimer probes before deleting again. On a thread-safe store with no rate to
keep, a page's delete runs in a thread while the previous page is finalized
(``_Overlap``).
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Min, Q
from django.utils import timezone

from retention import metrics
from retention.conf import settings
from retention.disposal import DisposalItem, Disposer, ObjectDisposer, can_overlap
from retention.exceptions import RunRefused
from retention.models import (
    RUN_COUNT_FIELDS,
    DataClassMode,
    EventOutcome,
    LegalHold,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    RecordQuerySet,
    RecordState,
    RetentionRecord,
    Run,
    RunExecutor,
    RunLease,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.pacing import RateGate, gate_for
from retention.services.control import kill_switch_is_paused
from retention.services.evidence import NewEvent, events_append
from retention.storage import KeyResult, Outcome, StorageUnavailable

logger = logging.getLogger("retention.engine")

Clock = Callable[[], datetime]


# --------------------------------------------------------------------------
# Scope and settings of a run


@dataclass(frozen=True, slots=True)
class ClassRules:
    data_class: str
    batch_size: int
    rate_limit: float | None
    max_attempts: int
    safety_margin: timedelta


def _rules_for(policy: Policy) -> ClassRules:
    version = (
        policy.versions.filter(status=PolicyVersionStatus.APPROVED).first()
        or policy.versions.filter(approved_at__isnull=False).order_by("-number").first()
    )
    if version is None:
        return ClassRules(policy.data_class, 500, None, settings.MAX_ATTEMPTS, timedelta(0))
    return ClassRules(
        data_class=policy.data_class,
        batch_size=version.batch_size,
        rate_limit=version.rate_limit,
        max_attempts=version.max_attempts or settings.MAX_ATTEMPTS,
        safety_margin=version.safety_margin,
    )


def _scope(run: Run) -> RecordQuerySet:
    qs: RecordQuerySet = RetentionRecord.objects.filter(data_class__in=run.data_classes)
    if run.tenant_id:
        qs = qs.filter(tenant_id=run.tenant_id)
    record_ids = run.report.get("record_ids") if isinstance(run.report, dict) else None
    if record_ids:
        qs = qs.filter(pk__in=record_ids)
    return qs


def class_cutoff(run: Run, data_class: str) -> datetime:
    """start − the class's own safety margin, fixed when the run started."""
    rules = run.report.get("rules", {}).get(data_class) if isinstance(run.report, dict) else None
    if not rules:
        return run.cutoff
    return run.started_at - timedelta(seconds=rules["safety_margin_seconds"])


def _expired_q(run: Run) -> Q:
    q = Q(pk__in=[])
    for name in run.data_classes:
        q |= Q(data_class=name, expires_at__lte=class_cutoff(run, name))
    return q


def _expired_pending(run: Run) -> RecordQuerySet:
    return _scope(run).pending().filter(_expired_q(run))


# --------------------------------------------------------------------------
# Start: the ledger row, then the lease


def run_start(
    *,
    mode: str,
    trigger: str = RunTrigger.COMMAND,
    data_classes: Sequence[str] | None = None,
    tenant_id: str | None = None,
    limit: int | None = None,
    record_ids: Sequence[int] | None = None,
    executor: str = RunExecutor.INLINE,
    schedule_slot: datetime | None = None,
    deadline_at: datetime | None = None,
    now: datetime,
) -> Run:
    """Write the run and take its leases; raise RunRefused when it cannot run.

    A refused run stays in the ledger with status ``refused`` and its reason.
    A ``schedule_slot`` is unique: a second run for the same slot raises
    IntegrityError (the scheduled task joins the first instead).
    """
    if mode not in RunMode.values:
        raise RunRefused(f"Unknown mode {mode!r}.", reason="bad_arguments")
    if limit is not None and limit < 1:
        raise RunRefused("--limit must be at least 1.", reason="bad_arguments")
    policies = list(Policy.objects.all())
    known = {p.data_class: p for p in policies}
    if data_classes:
        unknown = sorted(set(data_classes) - set(known))
        if unknown:
            raise RunRefused(
                f"Unknown data class(es): {', '.join(unknown)}. Known: "
                f"{', '.join(sorted(known)) or 'none'}.",
                reason="bad_arguments",
            )
        chosen = [known[name] for name in dict.fromkeys(data_classes)]
    else:
        chosen = sorted(policies, key=lambda p: p.data_class)

    refusal: tuple[str, str] | None = None
    if mode == RunMode.ENFORCE:
        report_only = [p.data_class for p in chosen if p.mode != DataClassMode.ENFORCE]
        if data_classes and report_only:
            refusal = (
                f"Data class(es) {', '.join(report_only)} are report-only: review a dry run "
                "and enable enforcement first.",
                "report_only",
            )
        chosen = [p for p in chosen if p.mode == DataClassMode.ENFORCE]
        if refusal is None and kill_switch_is_paused():
            refusal = ("Retention is paused (kill switch); resume it first.", "paused")

    rules = [_rules_for(p) for p in chosen]
    margin = max((r.safety_margin for r in rules), default=timedelta(0))
    report: dict = {"rules": {r.data_class: _rules_json(r) for r in rules}}
    if record_ids:
        report["record_ids"] = list(record_ids)
    with transaction.atomic():
        run = Run.objects.create(
            trigger=trigger,
            mode=mode,
            data_classes=[p.data_class for p in chosen],
            tenant_id=tenant_id or None,
            limit=limit,
            started_at=now,
            cutoff=now - margin,
            report=report,
            executor=executor,
            schedule_slot=schedule_slot,
            deadline_at=deadline_at,
        )
    if refusal is not None:
        _refuse(run, refusal[0], refusal[1], now)
    if mode == RunMode.ENFORCE and run.data_classes:
        _abandon_stale_runs(now)
        holder = _acquire_leases(run, now)
        if holder is not None:
            _refuse(
                run,
                f"Another enforcing run ({holder}) holds the lease on this data class; "
                "not starting a second sweep.",
                "lease_held",
                now,
            )
        try:
            _check_storages(run)
        except StorageUnavailable as exc:
            _release_leases(run)
            _refuse(run, f"Storage unreachable: {exc}", "storage_unavailable", now)
    logger.info(
        "run %s started (%s, %s) over %s",
        run.pk,
        mode,
        trigger,
        ", ".join(run.data_classes) or "nothing",
        extra={
            "run_id": str(run.pk),
            "tenant_id": run.tenant_id,
            "mode": mode,
            "data_classes": list(run.data_classes),
        },
    )
    return run


def _rules_json(rules: ClassRules) -> dict:
    return {
        "batch_size": rules.batch_size,
        "rate_limit": rules.rate_limit,
        "max_attempts": rules.max_attempts,
        "safety_margin_seconds": rules.safety_margin.total_seconds(),
    }


def _refuse(run: Run, message: str, reason: str, now: datetime) -> None:
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.REFUSED, status_reason=f"{reason}: {message}", finished_at=now
    )
    # The reason code only: a storage's message may name a bucket or a path.
    logger.info(
        "run %s refused: %s",
        run.pk,
        reason,
        extra={"run_id": str(run.pk), "tenant_id": run.tenant_id, "status": RunStatus.REFUSED},
    )
    raise RunRefused(message, reason=reason, run_id=run.pk)


def _abandon_stale_runs(now: datetime) -> None:
    Run.objects.filter(
        status=RunStatus.RUNNING, mode=RunMode.ENFORCE, lease_expires_at__lt=now
    ).update(status=RunStatus.ABANDONED, status_reason="lease expired", finished_at=now)


def _acquire_leases(run: Run, now: datetime) -> str | None:
    """Take every class's lease or none; return the holder's run id on conflict."""
    expires = now + timedelta(seconds=settings.RUN_LEASE_SECONDS)
    with transaction.atomic():
        for data_class in sorted(run.data_classes):
            RunLease.objects.get_or_create(data_class=data_class)
        leases = list(
            RunLease.objects.select_for_update()
            .filter(data_class__in=run.data_classes)
            .order_by("data_class")
        )
        for lease in leases:
            if lease.owner is not None and lease.expires_at and lease.expires_at > now:
                transaction.set_rollback(True)
                return str(lease.run_id)
        RunLease.objects.filter(data_class__in=run.data_classes).update(
            run=run, owner=run.lease_owner, expires_at=expires
        )
        Run.objects.filter(pk=run.pk).update(lease_expires_at=expires)
    return None


def _heartbeat(run: Run, now: datetime, *, extra_seconds: float = 0.0) -> None:
    expires = now + timedelta(seconds=settings.RUN_LEASE_SECONDS + extra_seconds)
    RunLease.objects.filter(owner=run.lease_owner).update(expires_at=expires)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=expires)


def _release_leases(run: Run) -> None:
    RunLease.objects.filter(owner=run.lease_owner).update(run=None, owner=None, expires_at=None)


def _check_storages(run: Run) -> None:
    aliases = _expired_pending(run).values_list("storage", flat=True).distinct()
    disposer = ObjectDisposer()
    for alias in sorted(set(aliases)):
        disposer.adapter(alias).check()


# --------------------------------------------------------------------------
# Claim


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


@dataclass(frozen=True, slots=True)
class Claim:
    run_id: uuid.UUID
    token: uuid.UUID
    cutoff: datetime
    items: tuple[ClaimedItem, ...]
    lease_seconds: float = 300.0
    # Claimed with start_disposal: the claim's own transaction was the re-check.
    rechecked: bool = False

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
    "policy_version_id",
    "policy_version__policy__data_class",
    "policy_version__number",
    "policy_version__disposition",
    "policy_version__erase_all_versions",
)


def claimed_item(
    row: dict, *, row_version: int | None = None, probe: bool | None = None
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
    names = [
        *plain,
        "policy_version__policy__data_class",
        "policy_version__number",
        "policy_version__disposition",
        "policy_version__erase_all_versions",
    ]
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
) -> Claim:
    """Move up to ``limit`` eligible rows to ``deleting`` under a fresh lease.

    Rows locked by another claimer are skipped, not waited for. The
    transaction holds no lock once this returns.

    ``start_disposal``: the caller deletes right away (the inline engine), so
    the claim is the re-check too. It selects under row locks only rows that
    are expired and unheld against the holds as they are now — what the
    re-check would verify — and marks them as being disposed of in the same
    write, sparing each row a second update and the page a transaction.

    ``after``: the ``(expires_at, id)`` of the last row the caller's previous
    page took; the walk starts there instead of at the oldest due row, past
    what earlier pages skipped (held rows, rows locked by other claimers).
    A caller that gets nothing after its cursor claims once more without it.
    """
    token = uuid.uuid4()
    cutoff = class_cutoff(run, data_class)
    # A paced page can take longer than the base lease: the caller adds the
    # time the rate gate will make it wait.
    lease_seconds = lease_seconds if lease_seconds is not None else settings.LEASE_SECONDS
    lease_until = now + timedelta(seconds=lease_seconds)
    with transaction.atomic():
        candidates = (
            _scope(run)
            .filter(data_class=data_class)
            .claimable(cutoff=cutoff, now=now)
            .not_held()
            .filter(_after_q(after))
            .order_by("expires_at", "id")
            .select_for_update(skip_locked=True, of=("self",))
            .values_list("id", "disposal_started_at")[:limit]
        )
        marks: dict[str, Any] = {"disposal_started_at": now} if start_disposal else {}
        move = _claim_returning if connection.vendor == "postgresql" else _claim_portable
        earlier, rows = move(candidates, token, lease_until, marks)
        if rows:
            Run.objects.filter(pk=run.pk).update(claimed=F("claimed") + len(rows))
            metrics.count_on_commit(data_class, {"claimed": len(rows)})
    items = tuple(claimed_item(row, probe=earlier[row["id"]] is not None) for row in rows)
    return Claim(
        run_id=run.pk,
        token=token,
        cutoff=cutoff,
        items=items,
        lease_seconds=lease_seconds,
        rechecked=start_disposal,
    )


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


# --------------------------------------------------------------------------
# Dispose a claim


@dataclass
class ClaimOutcome:
    counts: Counter[str] = field(default_factory=Counter)

    def __getitem__(self, name: str) -> int:
        return self.counts[name]


def _idempotency_key(item: ClaimedItem, outcome: str) -> str:
    base = f"{item.policy_version_id}:{item.record_id}:{item.disposition}"
    if outcome in (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT):
        return base
    if outcome in (EventOutcome.SKIPPED_HELD, EventOutcome.SKIPPED_RENEWED):
        return f"{base}:{outcome}:v{item.row_version}"
    return f"{base}:{outcome}:a{item.attempt}"


def _event(
    item: ClaimedItem, *, run_id: uuid.UUID, outcome: str, now: datetime, reason: str = ""
) -> NewEvent:
    return NewEvent(
        idempotency_key=_idempotency_key(item, outcome),
        record_id=item.record_id,
        run_id=run_id,
        tenant_id=item.tenant_id,
        data_class=item.data_class,
        policy_version_id=item.policy_version_id,
        policy_key=item.policy_key,
        policy_version_number=item.policy_version_number,
        disposition=item.disposition,
        outcome=outcome,
        attempt=item.attempt,
        reason=reason[:2000],
        key_digest=item.key_digest,
        expires_at=item.expires_at,
        occurred_at=now,
    )


def _held_ids(items: Iterable[ClaimedItem]) -> set[int]:
    items = list(items)
    ids = [i.record_id for i in items]
    holds = list(LegalHold.objects.active().filter(Q(record__isnull=True) | Q(record_id__in=ids)))
    return {
        item.record_id
        for item in items
        if any(
            hold.covers(
                tenant_id=item.tenant_id, data_class=item.data_class, record_id=item.record_id
            )
            for hold in holds
        )
    }


def _recheck(claim: Claim, now: datetime) -> tuple[list[ClaimedItem], ClaimOutcome]:
    """Keep the items still ours, unchanged, expired and unheld; release the rest."""
    result = ClaimOutcome()
    by_id = {item.record_id: item for item in claim.items}
    with transaction.atomic():
        current = {
            row["id"]: row
            for row in RetentionRecord.objects.select_for_update()
            .filter(id__any_of=list(by_id))
            .values("id", "state", "lease_owner", "row_version", "expires_at")
        }
        held = _held_ids(claim.items)
        proceed: list[ClaimedItem] = []
        release_held: list[int] = []
        events: list[NewEvent] = []
        for record_id, item in by_id.items():
            row = current.get(record_id)
            ours = (
                row is not None
                and row["state"] == RecordState.DELETING
                and row["lease_owner"] == claim.token
            )
            if not ours:
                # Renewed since the claim (renewal resets the row to active
                # and bumps its version); a reclaim by someone else is theirs.
                renewed = (
                    row is not None
                    and row["state"] in (RecordState.ACTIVE, RecordState.FAILED)
                    and row["row_version"] != item.row_version
                )
                if renewed:
                    events.append(
                        _event(
                            item,
                            run_id=claim.run_id,
                            outcome=EventOutcome.SKIPPED_RENEWED,
                            now=now,
                            reason="renewed after claim",
                        )
                    )
                    result.counts["skipped_renewed"] += 1
                continue
            if record_id in held:
                release_held.append(record_id)
                events.append(
                    _event(
                        item,
                        run_id=claim.run_id,
                        outcome=EventOutcome.SKIPPED_HELD,
                        now=now,
                        reason="legal hold applies",
                    )
                )
                result.counts["skipped_held"] += 1
                continue
            assert row is not None  # "ours" implies the row was found
            if row["expires_at"] > claim.cutoff:
                release_held.append(record_id)
                events.append(
                    _event(
                        item,
                        run_id=claim.run_id,
                        outcome=EventOutcome.SKIPPED_RENEWED,
                        now=now,
                        reason="no longer expired",
                    )
                )
                result.counts["skipped_renewed"] += 1
                continue
            # A version bump without a renewal is a hold change; holds were
            # checked just above, against the database as it is now.
            proceed.append(item)
        if release_held:
            RetentionRecord.objects.filter(id__any_of=release_held, lease_owner=claim.token).update(
                state=RecordState.ACTIVE, lease_owner=None, lease_expires_at=None
            )
        if proceed:
            RetentionRecord.objects.filter(
                id__any_of=[i.record_id for i in proceed], lease_owner=claim.token
            ).update(
                disposal_started_at=now,
                lease_expires_at=now + timedelta(seconds=claim.lease_seconds),
            )
        events_append(events, run_id=claim.run_id, now=now)
        _add_counts(claim.run_id, result.counts)
        if result.counts:
            metrics.count_on_commit(claim.items[0].data_class, result.counts)
    return proceed, result


def _run_columns(counts: Counter[str]) -> dict[str, int]:
    """The counts a run keeps (its columns), without the zeros."""
    return {name: n for name, n in counts.items() if n and hasattr(Run, name)}


def _add_counts(run_id: uuid.UUID, counts: Counter[str]) -> None:
    updates = {name: F(name) + n for name, n in _run_columns(counts).items()}
    if updates:
        Run.objects.filter(pk=run_id).update(**updates)


def _backoff(attempt: int) -> timedelta:
    ceiling = min(settings.RETRY_MAX_SECONDS, settings.RETRY_BASE_SECONDS * 2 ** (attempt - 1))
    # "Equal jitter": never less than half the step, so retries stay spread.
    return timedelta(seconds=ceiling / 2 + random.uniform(0, ceiling / 2))


# What a page's retried or failed rows change (their lease is cleared).
_UNFINISHED_FIELDS = [
    "state",
    "retryable",
    "next_attempt_at",
    "last_error",
    "lease_owner",
    "lease_expires_at",
]


def _finalize(
    claim: Claim,
    items: Sequence[ClaimedItem],
    results: dict[int, KeyResult],
    *,
    max_attempts: int,
    now: datetime,
) -> ClaimOutcome:
    outcome = ClaimOutcome()
    by_id = {item.record_id: item for item in items}
    succeeded = [rid for rid in by_id if results[rid].outcome in (Outcome.DELETED, Outcome.ABSENT)]
    others = [rid for rid in by_id if results[rid].outcome not in (Outcome.DELETED, Outcome.ABSENT)]
    with transaction.atomic():
        # Only rows still leased to this claim are ours to finalize; a row
        # reclaimed after our lease expired belongs to its new claimer.
        done = _mark_deleted(succeeded, claim.token, now)
        ours = done | set(
            RetentionRecord.objects.select_for_update()
            .filter(id__any_of=others, lease_owner=claim.token, state=RecordState.DELETING)
            .values_list("id", flat=True)
            if others
            else ()
        )
        events: list[NewEvent] = []
        unfinished: list[RetentionRecord] = []
        failed: dict[int, str] = {}
        for record_id in sorted(ours):
            item = by_id[record_id]
            result = results[record_id]
            if record_id in done:
                kind = (
                    EventOutcome.DELETED
                    if result.outcome == Outcome.DELETED
                    else EventOutcome.ALREADY_ABSENT
                )
                events.append(_event(item, run_id=claim.run_id, outcome=kind, now=now))
                outcome.counts["deleted" if kind == EventOutcome.DELETED else "already_absent"] += 1
            elif result.outcome == Outcome.TRANSIENT and item.attempt < max_attempts:
                events.append(
                    _event(
                        item,
                        run_id=claim.run_id,
                        outcome=EventOutcome.RETRY_SCHEDULED,
                        now=now,
                        reason=result.reason,
                    )
                )
                unfinished.append(
                    RetentionRecord(
                        pk=record_id,
                        state=RecordState.FAILED,
                        retryable=True,
                        next_attempt_at=now + _backoff(item.attempt),
                        last_error=result.reason[:2000],
                    )
                )
                outcome.counts["retried"] += 1
            else:
                reason = result.reason
                if result.outcome == Outcome.TRANSIENT:
                    reason = f"gave up after {item.attempt} attempts: {reason}"
                events.append(
                    _event(
                        item,
                        run_id=claim.run_id,
                        outcome=EventOutcome.FAILED,
                        now=now,
                        reason=reason,
                    )
                )
                unfinished.append(
                    RetentionRecord(
                        pk=record_id,
                        state=RecordState.FAILED,
                        retryable=False,
                        next_attempt_at=None,
                        last_error=reason[:2000],
                    )
                )
                failed[record_id] = reason
                outcome.counts["failed"] += 1
        if unfinished:
            # One statement for the page, whatever its size.
            RetentionRecord.objects.bulk_update(unfinished, _UNFINISHED_FIELDS, batch_size=1000)
        # These rows were still leased to this claim under lock: their events are new.
        events_append(events, run_id=claim.run_id, now=now, known_new=True)
        _add_counts(claim.run_id, outcome.counts)
        if outcome.counts:
            metrics.count_on_commit(items[0].data_class, outcome.counts)
    _log_page(claim, items, outcome, failed)
    return outcome


def _mark_deleted(ids: Sequence[int], token: uuid.UUID, now: datetime) -> set[int]:
    """Move the rows still leased to ``token`` to ``deleted``; return their ids."""
    if not ids:
        return set()
    if connection.vendor == "postgresql":
        # One statement: lock, check the lease, update, and say which rows.
        qn = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {qn(RetentionRecord._meta.db_table)} SET {qn('state')} = %s, "
                f"{qn('deleted_at')} = %s, {qn('lease_owner')} = NULL, "
                f"{qn('lease_expires_at')} = NULL, {qn('last_error')} = '' "
                f"WHERE {qn('id')} = ANY(%s) AND {qn('lease_owner')} = %s "
                f"AND {qn('state')} = %s RETURNING {qn('id')}",
                [RecordState.DELETED, now, list(ids), token, RecordState.DELETING],
            )
            return {row[0] for row in cursor.fetchall()}
    ours = set(
        RetentionRecord.objects.select_for_update()
        .filter(id__any_of=ids, lease_owner=token, state=RecordState.DELETING)
        .values_list("id", flat=True)
    )
    if ours:
        RetentionRecord.objects.filter(id__any_of=list(ours)).update(
            state=RecordState.DELETED,
            deleted_at=now,
            lease_owner=None,
            lease_expires_at=None,
            last_error="",
        )
    return ours


def _log_page(
    claim: Claim, items: Sequence[ClaimedItem], outcome: ClaimOutcome, failed: dict[int, str]
) -> None:
    # Ids and counts only: never a key, and not the reason either, which a
    # third-party storage adapter might have built from the key.
    if not items:
        return
    data_class = items[0].data_class
    counts = {k: outcome[k] for k in ("deleted", "already_absent", "retried", "failed")}
    logger.info(
        "run %s: page of %d %s records finalized: %s",
        claim.run_id,
        len(items),
        data_class,
        " ".join(f"{k}={n}" for k, n in counts.items()),
        extra={"run_id": str(claim.run_id), "data_class": data_class, "counts": counts},
    )
    by_id = {item.record_id: item for item in items}
    for record_id in sorted(failed):
        item = by_id[record_id]
        logger.warning(
            "run %s: record %s failed (attempt %d), waiting for review",
            claim.run_id,
            record_id,
            item.attempt,
            extra={
                "run_id": str(claim.run_id),
                "record_id": record_id,
                "tenant_id": item.tenant_id,
                "data_class": item.data_class,
            },
        )


def claim_dispose(
    *,
    claim: Claim,
    clock: Clock,
    disposer: Disposer | None = None,
    gate: RateGate | None = None,
    max_attempts: int | None = None,
) -> ClaimOutcome:
    """Re-check, delete and finalize one claim. Safe to call twice."""
    total = ClaimOutcome()
    if not claim.items:
        return total
    if claim.rechecked:
        proceed = list(claim.items)
    else:
        proceed, rechecked = _recheck(claim, clock())
        total.counts.update(rechecked.counts)
    if not proceed:
        return total
    disposer = disposer or ObjectDisposer()
    gate = gate or gate_for(data_class=proceed[0].data_class)
    results = _dispose(proceed, disposer, gate)
    finalized = _finalize(
        claim,
        proceed,
        results,
        max_attempts=max_attempts or settings.MAX_ATTEMPTS,
        now=clock(),
    )
    total.counts.update(finalized.counts)
    return total


def _dispose(
    items: Sequence[ClaimedItem], disposer: Disposer, gate: RateGate
) -> dict[int, KeyResult]:
    """The storage step: no transaction, no lock, no database."""
    results: dict[int, KeyResult] = {}
    for erase in (False, True):
        group = [item for item in items if item.erase_all_versions is erase]
        if not group:
            continue
        disposal = [
            DisposalItem(
                record_id=i.record_id, storage=i.storage, object_key=i.object_key, probe=i.probe
            )
            for i in group
        ]
        results.update(disposer.dispose(disposal, erase_versions=erase, gate=gate))
    return results


@dataclass
class _InFlight:
    claim: Claim
    deleting: Future[dict[int, KeyResult]]
    max_attempts: int


class _Overlap:
    """One claimed page's deletes in flight while the engine writes the last one.

    Deleting a page is network time and finalizing the one before is
    database time: on a thread-safe adapter with no rate to keep, the two
    overlap. Pages are still finalized one by one, in claim order, on the
    engine's thread and its connection; the delete thread never touches the
    database.
    """

    def __init__(self, clock: Clock, progress: ProgressFn | None, run: Run) -> None:
        self.clock = clock
        self.progress = progress
        self.run = run
        self.in_flight: _InFlight | None = None
        self.executor: ThreadPoolExecutor | None = None

    def submit(
        self, claim: Claim, disposer: Disposer, gate: RateGate, *, max_attempts: int
    ) -> None:
        # The inline claim was the re-check: its items go to storage as they are.
        assert claim.rechecked
        if self.executor is None:
            self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retention-delete")
        deleting = self.executor.submit(_dispose, claim.items, disposer, gate)
        self.settle()
        self.in_flight = _InFlight(claim, deleting, max_attempts)

    def settle(self) -> None:
        """Finalize the page in flight, if any (re-raises its delete's error)."""
        if self.in_flight is None:
            return
        page, self.in_flight = self.in_flight, None
        results = page.deleting.result()
        outcome = _finalize(
            page.claim, page.claim.items, results, max_attempts=page.max_attempts, now=self.clock()
        )
        _count_page(self.run, page.claim, outcome, self.progress)

    def close(self) -> None:
        # Only on failure is a page still in flight here: it keeps its lease
        # and its disposal mark, so the next claimer probes it. A delete not
        # started yet is dropped; one under way is waited for, so no request
        # outlives the run.
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------
# The whole run


ProgressFn = Callable[[Run], None]


def run_measure(run: Run) -> None:
    """Count eligible and held work once, at the fixed cutoff."""
    expired = _expired_pending(run)
    eligible = expired.not_held().aggregate(n=Count("id"), oldest=Min("expires_at"))
    held = expired.held().count()
    Run.objects.filter(pk=run.pk).update(
        eligible=eligible["n"], oldest_eligible_at=eligible["oldest"], skipped_held=held
    )


def _report(run: Run) -> dict:
    expired = _expired_pending(run)
    modes = dict(Policy.objects.values_list("data_class", "mode"))
    per_class: dict[str, dict] = {
        name: {
            "eligible": 0,
            "held": 0,
            "oldest_eligible_at": None,
            "mode": modes.get(name),
            "cutoff": class_cutoff(run, name).isoformat(),
        }
        for name in run.data_classes
    }
    for row in (
        expired.not_held().values("data_class").annotate(n=Count("id"), oldest=Min("expires_at"))
    ):
        per_class[row["data_class"]].update(
            eligible=row["n"],
            oldest_eligible_at=row["oldest"].isoformat() if row["oldest"] else None,
        )
    for held in expired.held().values("data_class").annotate(n=Count("id")):
        per_class[held["data_class"]]["held"] = held["n"]
    top = settings.REPORT_TOP_TENANTS
    tenants: dict[str, list[dict]] = {}
    for name in run.data_classes:
        rows = (
            expired.not_held()
            .filter(data_class=name)
            .values("tenant_id")
            .annotate(n=Count("id"), oldest=Min("expires_at"))
            .order_by("-n", "tenant_id")[:top]
        )
        tenants[name] = [
            {
                "tenant_id": r["tenant_id"],
                "eligible": r["n"],
                "oldest_eligible_at": r["oldest"].isoformat(),
            }
            for r in rows
        ]
    failed_for_review = dict(
        _scope(run)
        .filter(state=RecordState.FAILED, retryable=False)
        .values_list("data_class")
        .annotate(n=Count("id"))
    )
    # A small sample for the reviewer: ids and key digests, never keys.
    samples = {
        name: [
            {"record_id": r["id"], "tenant_id": r["tenant_id"], "key_digest": r["key_digest"]}
            for r in expired.not_held()
            .filter(data_class=name)
            .order_by("expires_at", "id")
            .values("id", "tenant_id", "key_digest")[: settings.REPORT_SAMPLE_SIZE]
        ]
        for name in run.data_classes
    }
    return {
        "per_data_class": per_class,
        "per_tenant": tenants,
        "sample": samples,
        "failed_for_review": failed_for_review,
    }


def held_skips_record(run: Run, now: datetime) -> None:
    """One skipped_held event per held expired row and row version."""
    rows = (
        _expired_pending(run)
        .held()
        .order_by("id")
        .values_list(
            "id",
            "row_version",
            "tenant_id",
            "data_class",
            "key_digest",
            "expires_at",
            "attempts",
            "policy_version_id",
            "policy_version__policy__data_class",
            "policy_version__number",
            "policy_version__disposition",
        )
    )
    batch: list[NewEvent] = []
    for row in rows.iterator(chunk_size=2000):
        item = ClaimedItem(
            record_id=row[0],
            row_version=row[1],
            tenant_id=row[2],
            data_class=row[3],
            storage="",
            object_key="",
            key_digest=row[4],
            expires_at=row[5],
            attempt=row[6],
            probe=False,
            policy_version_id=row[7],
            policy_key=row[8],
            policy_version_number=row[9],
            disposition=row[10],
            erase_all_versions=False,
        )
        batch.append(
            _event(
                item,
                run_id=run.pk,
                outcome=EventOutcome.SKIPPED_HELD,
                now=now,
                reason="legal hold applies",
            )
        )
        if len(batch) >= 2000:
            events_append(batch, run_id=run.pk, now=now)
            batch = []
    if batch:
        events_append(batch, run_id=run.pk, now=now)


def run_finish(run: Run, status: str, reason: str, now: datetime) -> Run:
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(
            status=status, status_reason=reason, finished_at=now, lease_expires_at=None
        )
        _release_leases(run)
    run.refresh_from_db()
    counts = {**run.counts(), "retried": run.retried}
    logger.info(
        "run %s %s (%s): %s",
        run.pk,
        status,
        run.mode,
        " ".join(f"{k}={n}" for k, n in counts.items()),
        extra={
            "run_id": str(run.pk),
            "tenant_id": run.tenant_id,
            "mode": run.mode,
            "status": status,
            "counts": counts,
        },
    )
    return run


def run_abort(*, run: Run, reason: str, now: datetime) -> Run:
    """End a run that will not be executed (e.g. its task could not be queued).

    Its leases are released at once instead of blocking the data class until
    they expire. Rows it may have claimed keep their own leases.
    """
    return run_finish(run, RunStatus.ERROR, reason[:2000], now)


def retry_next_due(run: Run) -> datetime | None:
    return (
        _scope(run)
        .filter(_expired_q(run), state=RecordState.FAILED, retryable=True)
        .not_held()
        .aggregate(due=Min("next_attempt_at"))["due"]
    )


def run_execute(
    *,
    run: Run,
    clock: Clock = timezone.now,
    max_seconds: float | None = None,
    progress: ProgressFn | None = None,
    disposer: Disposer | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Run:
    """Sweep a started run to the end, to its limit, or to its time budget."""
    if run.status != RunStatus.RUNNING:
        return run
    try:
        return _execute(
            run,
            clock=clock,
            max_seconds=max_seconds,
            progress=progress,
            disposer=disposer,
            sleep=sleep,
        )
    except BaseException as exc:
        # The rows in flight keep their leases and are probed by the next
        # claimer; the run itself must not stay "running" for ever.
        logger.error(
            "retention run %s failed: %s",
            run.pk,
            type(exc).__name__,
            extra={"run_id": str(run.pk), "tenant_id": run.tenant_id},
        )
        try:
            run_finish(run, RunStatus.ERROR, f"{type(exc).__name__}: {exc}"[:2000], clock())
        except Exception:
            logger.exception(
                "could not record the failure of run %s", run.pk, extra={"run_id": str(run.pk)}
            )
        raise


def _execute(
    run: Run,
    *,
    clock: Clock,
    max_seconds: float | None,
    progress: ProgressFn | None,
    disposer: Disposer | None,
    sleep: Callable[[float], None],
) -> Run:
    started = time.monotonic()
    run_measure(run)
    if run.mode == RunMode.DRY_RUN:
        report = dict(run.report)
        report.update(_report(run))
        Run.objects.filter(pk=run.pk).update(report=report)
        return run_finish(run, RunStatus.FINISHED, "", clock())

    held_skips_record(run, clock())
    rules = {
        name: ClassRules(name, **_rules_args(run.report["rules"][name]))
        for name in run.data_classes
    }
    gates = {name: gate_for(data_class=name, rate_limit=r.rate_limit) for name, r in rules.items()}
    disposer = disposer or ObjectDisposer()
    overlap = _Overlap(clock, progress, run)
    try:
        return _sweep(
            run,
            rules=rules,
            gates=gates,
            disposer=disposer,
            overlap=overlap,
            started=started,
            clock=clock,
            max_seconds=max_seconds,
            progress=progress,
            sleep=sleep,
        )
    finally:
        overlap.close()


def _sweep(
    run: Run,
    *,
    rules: dict[str, ClassRules],
    gates: dict[str, RateGate],
    disposer: Disposer,
    overlap: _Overlap,
    started: float,
    clock: Clock,
    max_seconds: float | None,
    progress: ProgressFn | None,
    sleep: Callable[[float], None],
) -> Run:
    # The counts as measured; from here on this engine, holding the run's
    # lease, is their only writer, and keeps its copy current page by page.
    run.refresh_from_db()
    remaining = run.limit
    active = list(run.data_classes)
    cursors: Cursors = {}
    last_heartbeat = 0.0  # the first page renews at once: measuring may have been long
    while True:
        if kill_switch_is_paused():
            overlap.settle()
            return run_finish(run, RunStatus.PAUSED, "kill switch engaged", clock())
        if max_seconds is not None and time.monotonic() - started >= max_seconds:
            overlap.settle()
            return run_finish(
                run, RunStatus.STOPPED, f"time budget of {max_seconds:g}s reached", clock()
            )
        if remaining is not None and remaining <= 0:
            overlap.settle()
            return run_finish(
                run, RunStatus.STOPPED, f"limit of {run.limit} records reached", clock()
            )
        claimed_any = False
        for name in list(active):
            size = rules[name].batch_size
            if remaining is not None:
                size = min(size, remaining)
            now = clock()
            rate = rules[name].rate_limit
            pacing = size / rate if rate else 0.0
            # Renewed well inside the lease, not on every page: two writes
            # saved per page on a long sweep.
            if time.monotonic() - last_heartbeat >= settings.RUN_LEASE_SECONDS / 10 or pacing:
                _heartbeat(run, now, extra_seconds=pacing)
                last_heartbeat = time.monotonic()
            claim = records_claim_next(
                cursors=cursors,
                run=run,
                data_class=name,
                limit=size,
                now=now,
                lease_seconds=settings.LEASE_SECONDS + pacing,
                start_disposal=True,
            )
            if not claim.items:
                continue
            claimed_any = True
            if remaining is not None:
                remaining -= len(claim)
            if can_overlap(disposer, {i.storage for i in claim.items}, gates[name]):
                overlap.submit(claim, disposer, gates[name], max_attempts=rules[name].max_attempts)
            else:
                overlap.settle()
                outcome = claim_dispose(
                    claim=claim,
                    clock=clock,
                    disposer=disposer,
                    gate=gates[name],
                    max_attempts=rules[name].max_attempts,
                )
                _count_page(run, claim, outcome, progress)
            if remaining is not None and remaining <= 0:
                break
        if claimed_any:
            continue
        # Nothing left to claim: the page in flight may still schedule retries.
        overlap.settle()
        due = retry_next_due(run)
        if due is None:
            break
        wait = (due - clock()).total_seconds()
        budget_left = (
            max_seconds - (time.monotonic() - started) if max_seconds is not None else float("inf")
        )
        if wait > min(settings.RETRY_WAIT_IN_RUN_SECONDS, budget_left):
            break
        sleep(max(wait, 0.0) + 0.01)
    overlap.settle()
    return run_finish(run, RunStatus.FINISHED, "", clock())


def _count_page(run: Run, claim: Claim, outcome: ClaimOutcome, progress: ProgressFn | None) -> None:
    """Add a finalized page to the run's counts in memory (already in the
    database, by ``records_claim`` and ``_add_counts``), then report progress."""
    run.claimed += len(claim)
    for name, n in _run_columns(outcome.counts).items():
        setattr(run, name, getattr(run, name) + n)
    if progress:
        progress(run)


def _rules_args(data: dict) -> dict:
    return {
        "batch_size": int(data["batch_size"]),
        "rate_limit": data["rate_limit"],
        "max_attempts": int(data["max_attempts"]),
        "safety_margin": timedelta(seconds=data["safety_margin_seconds"]),
    }


def run_counts(run: Run) -> dict[str, int]:
    return {name: getattr(run, name) for name in RUN_COUNT_FIELDS}
