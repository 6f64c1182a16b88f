"""Legal holds mirrored into the store as S3 Object Lock legal holds.

With a storage alias in ``RETENTION_OBJECT_LOCK_HOLDS``, a hold's objects
there — those of the records its scope covers that may still exist (active,
deleting, failed) — carry an Object Lock legal hold while it is active, so a
delete of a held version fails whoever sends it. Once the hold or its
release has committed, the objects are locked (or unlocked, unless another
active hold covers them): before ``legal_hold_place`` returns for up to
``SYNC_LIMIT`` objects, else in chained django-q2 tasks (``HOLD_MIRROR_TASK``)
of one keyset page of ``BATCH_SIZE`` records each. Progress is on the hold
(``object_lock_*``). No row lock is held while the store is asked anything,
and the requests pass the storage's rate gate, as deletes do.

A place and a release can cross. A batch that locked objects and then finds
its hold released unlocks those no other hold covers; one that unlocked
objects locks again those a hold placed meanwhile covers. Reconciliation
reports what still disagrees. A task delivered twice does nothing the second
time: a batch moves the hold's progress only from the figure it started at.
"""

from __future__ import annotations

import logging
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from retention.broker import publish_task
from retention.clock import db_now
from retention.models import LegalHold, ObjectLockStatus, RecordState, RetentionRecord
from retention.selectors.holds import held_record_ids, mirrored_storages
from retention.services.rate_gates import storage_gate
from retention.storage import StorageUnavailable

if TYPE_CHECKING:
    from retention.storage.object_lock import LockResult, ObjectLock

logger = logging.getLogger("retention.holds")

# A scope of up to this many objects is mirrored before place_hold returns.
SYNC_LIMIT = 1000
# Records per queued batch (one legal-hold request each).
BATCH_SIZE = 500
HOLD_MIRROR_TASK = "retention.tasks.hold_mirror"
# Records whose object may still be in the store.
LIVE = (RecordState.ACTIVE, RecordState.DELETING, RecordState.FAILED)
LOCK_FIELDS = ("object_lock_status", "object_lock_total", "object_lock_done", "object_lock_error")
# A queued mirror that has not moved for this long lost its task (a broker
# that does not redeliver, e.g. Redis): the watchdog publishes it again.
STALLED_AFTER = timedelta(minutes=5)

Publish = Callable[["MirrorStep"], None]


@dataclass(frozen=True, slots=True)
class MirrorStep:
    """Where a hold's mirror goes on: after record ``after``, ``done`` objects so far.

    A task's payload: ids and counts, never an object key.
    """

    hold_id: int
    release: bool
    after: int = 0
    done: int = 0
    failed: int = 0

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> MirrorStep:
        return cls(
            hold_id=int(payload["hold_id"]),
            release=bool(payload["release"]),
            after=int(payload.get("after", 0)),
            done=int(payload.get("done", 0)),
            failed=int(payload.get("failed", 0)),
        )

    @property
    def status(self) -> str:
        return ObjectLockStatus.RELEASING if self.release else ObjectLockStatus.APPLYING


def hold_mirrored(hold: LegalHold) -> bool:
    """Whether the hold has objects to mirror: a hold on a host row has none."""
    return hold.subject_pk is None and bool(mirrored_storages())


def _objects(hold: LegalHold) -> QuerySet[RetentionRecord]:
    return RetentionRecord.objects.filter(
        hold.scope_q(), storage__in=mirrored_storages(), state__in=LIVE
    )


def hold_mirror_start(*, hold: LegalHold, release: bool, publish: Publish | None = None) -> None:
    """Mirror a hold just placed (or released) into the store; call it after the commit.

    Never raises: a mirror that cannot go on leaves the hold ``failed`` with
    the reason, for its admin page. Refreshes ``hold``'s ``object_lock_*``.
    """
    if not hold_mirrored(hold):
        return
    step = MirrorStep(hold_id=hold.pk, release=release)
    total = _objects(hold).count()
    LegalHold.objects.filter(pk=hold.pk).update(
        object_lock_status=step.status,
        object_lock_total=total,
        object_lock_done=0,
        object_lock_error="",
        object_lock_after=0,
        object_lock_failed=0,
        object_lock_moved_at=db_now(),
    )
    try:
        if total <= SYNC_LIMIT:
            following: MirrorStep | None = step
            while following is not None:
                following = hold_mirror_batch(step=following)
        else:
            (publish or _publish)(step)
    except Exception as exc:
        _fail(step, exc)
    hold.refresh_from_db(fields=list(LOCK_FIELDS))


def hold_mirror_continue(*, payload: dict[str, Any], publish: Publish | None = None) -> int:
    """One queued batch: mirror it, publish the next; return the objects done so far."""
    step = MirrorStep.from_payload(payload)
    try:
        following = hold_mirror_batch(step=step)
        if following is not None:
            (publish or _publish)(following)
            return following.done
    except Exception as exc:
        _fail(step, exc)
    return step.done


def hold_mirror_batch(*, step: MirrorStep) -> MirrorStep | None:
    """Mirror the next page of the hold's objects; the step after it, or None when done.

    Nothing happens for a step whose hold has moved on: released (or placed
    again) meanwhile, or this page already done by an earlier delivery.
    """
    hold = LegalHold.objects.filter(pk=step.hold_id).first()
    if hold is None or (hold.object_lock_status, hold.object_lock_done) != (step.status, step.done):
        return None
    rows = list(
        _objects(hold)
        .filter(id__gt=step.after)
        .order_by("id")
        .values_list("id", "storage", "object_key")[:BATCH_SIZE]
    )
    failures, reason = _mirror(rows, hold_id=hold.pk, release=step.release)
    done, failed = step.done + len(rows), step.failed + failures
    last = len(rows) < BATCH_SIZE
    fields: dict[str, Any] = {
        "object_lock_done": done,
        "object_lock_failed": failed,
        "object_lock_moved_at": db_now(),
    }
    if rows:
        fields["object_lock_after"] = rows[-1][0]
    if reason:
        verb = "unlocked" if step.release else "locked"
        fields["object_lock_error"] = (
            f"{failed} object(s) could not be {verb}; the last error: {reason}"
        )[:2000]
    if last:
        # Records may have been deleted or tracked since the count.
        fields["object_lock_total"] = done
        if failed:
            fields["object_lock_status"] = ObjectLockStatus.FAILED
        elif step.release:
            fields["object_lock_status"] = ObjectLockStatus.RELEASED
        else:
            fields["object_lock_status"] = ObjectLockStatus.APPLIED
    moved = LegalHold.objects.filter(
        pk=hold.pk, object_lock_status=step.status, object_lock_done=step.done
    ).update(**fields)
    if not moved or last:
        return None
    return MirrorStep(hold.pk, step.release, after=rows[-1][0], done=done, failed=failed)


def _mirror(
    rows: Sequence[tuple[int, str, str]], *, hold_id: int, release: bool
) -> tuple[int, str]:
    """Lock (or unlock) these records' objects; return (failures, the last failure's reason)."""
    from retention.storage.object_lock import LockState, ObjectLock

    by_storage: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for record_id, alias, key in rows:
        by_storage[alias].append((record_id, key))
    failures, reason = 0, ""
    for alias, group in by_storage.items():
        lock = ObjectLock.for_alias(alias)
        if release:
            # Another active hold keeps its lock on the object.
            kept = held_record_ids(record_id for record_id, _ in group)
            targets = [(record_id, key) for record_id, key in group if record_id not in kept]
        else:
            targets = group
        results = locks_set(lock, [key for _, key in targets], on=not release)
        if release:
            relock = held_record_ids(record_id for record_id, _ in targets)
            if relock:
                locks_set(lock, [key for rid, key in targets if rid in relock], on=True)
        elif LegalHold.objects.filter(pk=hold_id, released_at__isnull=False).exists():
            still = held_record_ids(record_id for record_id, _ in targets)
            locks_set(lock, [key for rid, key in targets if rid not in still], on=False)
        errors = [result for result in results.values() if result.state is LockState.ERROR]
        failures += len(errors)
        if errors:
            reason = errors[-1].reason
    return failures, reason


def locks_set(lock: ObjectLock, keys: Sequence[str], *, on: bool) -> dict[str, LockResult]:
    """Set or clear legal holds a slice at a time, through the storage's rate gate."""
    gate = storage_gate(lock.alias)
    size = gate.slice_size if gate is not None else max(len(keys), 1)
    results: dict[str, LockResult] = {}
    for start in range(0, len(keys), size):
        part = keys[start : start + size]
        if gate is not None:
            gate.acquire(len(part))
        results.update(lock.set_many(part, on=on))
    return results


def record_lock_tracked(*, record: RetentionRecord) -> None:
    """After a record's commit: lock its object when an active hold covers it. Never raises."""
    if record.storage not in mirrored_storages():
        return
    covered = LegalHold.objects.covering(
        tenant_id=record.tenant_id, data_class=record.data_class, record_id=record.pk
    ).exists()
    if not covered:
        return
    from retention.storage.object_lock import LockState, ObjectLock

    try:
        lock = ObjectLock.for_alias(record.storage)
        result = locks_set(lock, [record.object_key], on=True)[record.object_key]
        problem = result.reason if result.state is LockState.ERROR else ""
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        # The record id, never the key; reconciliation reports the object too.
        logger.warning(
            "record %s is under a hold, but its object could not be given a legal hold: %s",
            record.pk,
            problem,
            extra={"record_id": record.pk, "storage": record.storage},
        )


def hold_mirrors_resume(*, now: datetime, publish: Publish | None = None) -> int:
    """The watchdog: publish again each mirror that stalled; return how many.

    The step is the hold's own progress, so the lost task's delivery, should
    it come after all, finds the hold moved on and does nothing. The
    conditional update lets one watchdog publish it, however many run.
    """
    resumed = 0
    stalled = LegalHold.objects.filter(
        object_lock_status__in=[ObjectLockStatus.APPLYING, ObjectLockStatus.RELEASING],
        object_lock_moved_at__lt=now - STALLED_AFTER,
    ).values_list(
        "pk",
        "object_lock_status",
        "object_lock_after",
        "object_lock_done",
        "object_lock_failed",
        "object_lock_moved_at",
    )
    for pk, status, after, done, failed, moved_at in stalled:
        claimed = LegalHold.objects.filter(
            pk=pk, object_lock_status=status, object_lock_moved_at=moved_at
        ).update(object_lock_moved_at=now)
        if not claimed:
            continue
        step = MirrorStep(
            pk, status == ObjectLockStatus.RELEASING, after=after, done=done, failed=failed
        )
        logger.warning(
            "the Object Lock mirror of hold %s stalled at %d objects; published again",
            pk,
            done,
            extra={"hold_id": pk},
        )
        try:
            (publish or _publish)(step)
        except Exception as exc:
            _fail(step, exc)
        resumed += 1
    return resumed


def _publish(step: MirrorStep) -> None:
    name = f"retention-hold-mirror-{step.hold_id}-{step.done}"
    publish_task(HOLD_MIRROR_TASK, asdict(step), name)


def _fail(step: MirrorStep, exc: Exception) -> None:
    # Our own errors name no key; any other's message might (a boto3
    # parameter error quotes the value), so only its type is kept.
    lock = sys.modules.get("retention.storage.object_lock")  # imported where S3 is in use
    own = isinstance(exc, StorageUnavailable) or (
        lock is not None and isinstance(exc, lock.NotLockable)
    )
    reason = (f"{type(exc).__name__}: {exc}" if own else type(exc).__name__)[:2000]
    logger.error(
        "the Object Lock mirror of hold %s stopped: %s",
        step.hold_id,
        reason,
        extra={"hold_id": step.hold_id},
    )
    LegalHold.objects.filter(pk=step.hold_id, object_lock_status=step.status).update(
        object_lock_status=ObjectLockStatus.FAILED, object_lock_error=reason
    )
