"""The schedule: the nightly sweep (once per cron slot), its watchdog, the weekly reconciliation.

Every firing that falls in the same slot (a second cluster, missed slots
replayed after downtime) finds the slot's run and joins it; the run stops
claiming when the next slot begins, so scheduled runs never overlap. The
watchdog advances a queued run that no batch carries on any more (a broker
that does not re-present unacknowledged tasks, e.g. Redis, lost one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django_q.models import Schedule

from retention.broker import Publish
from retention.conf import settings
from retention.engine.outage import runs_abandon_orphaned
from retention.engine.publish import dispatcher_publish, run_enqueue, run_resume_arm
from retention.engine.queued import batches_in_flight, run_advance
from retention.exceptions import RunRefused
from retention.models import Run, RunExecutor, RunMode, RunStatus, RunTrigger

# Named once, where retention_check looks for them; re-exported for the engine's callers.
from retention.selectors.workers import SWEEP_SCHEDULE as SWEEP_SCHEDULE
from retention.selectors.workers import WATCHDOG_SCHEDULE as WATCHDOG_SCHEDULE

logger = logging.getLogger("retention.dispatch")

SWEEP_TASK = "retention.tasks.run_scheduled"
WATCHDOG_TASK = "retention.tasks.runs_resume"
RECONCILE_SCHEDULE = "retention.reconcile"
RECONCILE_TASK = "retention.tasks.reconcile_scheduled"


def schedule_slot_for(cron: str, now: datetime) -> tuple[datetime, datetime]:
    """The latest cron slot at or before ``now`` and the one after it, in UTC."""
    from croniter import croniter

    base = now.astimezone(UTC).replace(microsecond=0)
    itr = croniter(cron, base + timedelta(seconds=1))
    previous = itr.get_prev(datetime)
    following = croniter(cron, base).get_next(datetime)
    return previous, following


def run_schedule_fire(*, now: datetime, publish: Publish | None = None) -> Run | None:
    """What the scheduled task does: start the run of the current slot, once.

    Every firing that falls in the same slot (a second cluster, missed slots
    replayed after downtime) finds the slot's run and joins it. The run stops
    claiming when the next slot begins, so runs never overlap by design.
    """
    slot, next_slot = schedule_slot_for(settings.SCHEDULE_CRON, now)
    existing = Run.objects.filter(schedule_slot=slot).first()
    if existing is not None:
        logger.info(
            "schedule slot %s already has run %s (%s): joining it",
            slot.isoformat(),
            existing.pk,
            existing.status,
            extra={"run_id": str(existing.pk)},
        )
        return existing
    try:
        return run_enqueue(
            mode=RunMode.ENFORCE,
            trigger=RunTrigger.SCHEDULE,
            schedule_slot=slot,
            deadline_at=next_slot,
            now=now,
            publish=publish,
        )
    except IntegrityError:
        # Another firing of the same slot won the insert a moment ago.
        return Run.objects.filter(schedule_slot=slot).first()
    except RunRefused as exc:
        logger.warning("scheduled run refused (%s): %s", exc.reason, exc)
        return Run.objects.filter(pk=str(exc.run_id)).first() if exc.run_id else None


def runs_resume_stalled(*, now: datetime, publish: Publish | None = None) -> list[Run]:
    """The watchdog: advance the queued runs that no batch is carrying on.

    A run's chain of batches breaks when a worker dies with its batch (a
    broker that does not re-present unacknowledged tasks, e.g. Redis), while
    the foreground guard is over budget, or while retries are not yet due.
    Once no batch of it is in flight (a lost one's lease lapsed), the
    watchdog advances it: claims and publishes again, or closes it. A run
    whose arm task has not run within RETENTION_DISPATCHER_LEASE_SECONDS gets
    a new one.

    It also closes, once the database is back, an inline run whose process
    stopped when the database went away (``outage.runs_abandon_orphaned``).
    """
    runs_abandon_orphaned(now)
    live = batches_in_flight(now).filter(run=OuterRef("pk"))
    return [
        run
        for run in (
            Run.objects.filter(status=RunStatus.RUNNING, executor=RunExecutor.QUEUE)
            .filter(~Exists(live))
            .order_by("started_at")
        )
        if _stalled_resume(run, now, publish)
    ]


def run_resume(*, run_id: Any, now: datetime, publish: Publish | None = None) -> str:
    """A queued run's own resumption (``run_resume_arm``): the watchdog's work, for this run.

    Fired by the run's one-off schedule; armed again while the run runs, so
    a run deferred by the foreground guard, waiting for retries or whose
    batches were lost goes on without ``retention_schedule``'s watchdog.
    Returns the run's status.
    """
    run = Run.objects.filter(pk=run_id, executor=RunExecutor.QUEUE).first()
    if run is None:
        return "missing"
    if run.status == RunStatus.RUNNING and not batches_in_flight(now).filter(run=run).exists():
        _stalled_resume(run, now, publish)
        run.refresh_from_db(fields=["status"])
    if run.status == RunStatus.RUNNING:
        run_resume_arm(run, now)
    return str(run.status)


def _stalled_resume(run: Run, now: datetime, publish: Publish | None) -> bool:
    """Advance (or re-arm) a queued run with no batch in flight; False: leave it for now."""
    report = run.report if isinstance(run.report, dict) else {}
    armed = bool(report.get("measured"))
    grace = now - timedelta(seconds=settings.DISPATCHER_LEASE_SECONDS)
    if not armed and run.started_at >= grace:
        return False  # its arm task may still be on its way
    if not armed:
        logger.warning(
            "run %s was never armed: publishing its arm task again",
            run.pk,
            extra={"run_id": str(run.pk)},
        )
        dispatcher_publish(run, publish=publish)
        return True
    logger.info(
        "run %s has no batch in flight: advancing it",
        run.pk,
        extra={"run_id": str(run.pk)},
    )
    run_advance(run_id=run.pk, clock=lambda: now, publish=publish)
    return True


# --------------------------------------------------------------------------
# Installing the schedules (retention_schedule): keyed by name, so installing
# twice leaves one of each; rows of the same name made by hand are folded into
# one. The cron is evaluated in UTC here; django-q2 recomputes later slots in
# its own time zone (check retention.W002 warns when that is not UTC).


@dataclass(frozen=True, slots=True)
class ScheduleChange:
    name: str
    action: str  # created, updated, unchanged, removed, absent
    description: str
    next_run: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "description": self.description,
            "next_run": self.next_run.isoformat() if self.next_run else None,
        }


def _next_cron(cron: str, now: datetime) -> datetime:
    from croniter import croniter

    if not croniter.is_valid(cron):
        raise ValueError(f"RETENTION_SCHEDULE_CRON {cron!r} is not a valid cron expression.")
    result: datetime = croniter(cron, now.astimezone(UTC)).get_next(datetime)
    return result


def _upsert(name: str, fields: dict[str, Any], next_run: datetime) -> ScheduleChange:
    with transaction.atomic():
        rows = list(Schedule.objects.select_for_update().filter(name=name).order_by("id"))
        for extra in rows[1:]:
            extra.delete()
        description = (
            f"cron {fields['cron']!r} UTC"
            if fields.get("cron")
            else f"every {fields.get('minutes')} minute(s)"
        )
        if not rows:
            Schedule.objects.create(name=name, next_run=next_run, **fields)
            return ScheduleChange(name, "created", description, next_run)
        schedule = rows[0]
        changed = [key for key, value in fields.items() if getattr(schedule, key) != value]
        if not changed and len(rows) == 1:
            return ScheduleChange(name, "unchanged", description, schedule.next_run)
        for key in changed:
            setattr(schedule, key, fields[key])
        if "cron" in changed or "schedule_type" in changed:
            schedule.next_run = next_run
        schedule.save()
        return ScheduleChange(name, "updated", description, schedule.next_run)


def schedules_install(
    *, cron: str, now: datetime, reconcile_cron: str | None = None
) -> list[ScheduleChange]:
    """The sweep and its watchdog; with ``reconcile_cron``, the reconciliation as well.

    Both crons are validated before anything is written: a bad one installs nothing.
    """
    from croniter import croniter

    sweep_next = _next_cron(cron, now)
    if reconcile_cron is not None and not croniter.is_valid(reconcile_cron):
        raise ValueError(
            f"RETENTION_RECONCILE_CRON {reconcile_cron!r} is not a valid cron expression."
        )
    sweep = _upsert(
        SWEEP_SCHEDULE,
        {
            "func": SWEEP_TASK,
            "schedule_type": Schedule.CRON,
            "cron": cron,
            "repeats": -1,
            "args": None,
            "kwargs": None,
        },
        sweep_next,
    )
    watchdog = _upsert(
        WATCHDOG_SCHEDULE,
        {
            "func": WATCHDOG_TASK,
            "schedule_type": Schedule.MINUTES,
            "minutes": 1,
            "cron": None,
            "repeats": -1,
            "args": None,
            "kwargs": None,
        },
        now,
    )
    if reconcile_cron is None:
        return [sweep, watchdog]
    reconcile = _upsert(
        RECONCILE_SCHEDULE,
        {
            "func": RECONCILE_TASK,
            "schedule_type": Schedule.CRON,
            "cron": reconcile_cron,
            "repeats": -1,
            "args": None,
            "kwargs": None,
        },
        _next_cron(reconcile_cron, now),
    )
    return [sweep, watchdog, reconcile]


def schedules_remove() -> list[ScheduleChange]:
    changes = []
    for name in (SWEEP_SCHEDULE, WATCHDOG_SCHEDULE, RECONCILE_SCHEDULE):
        deleted, _ = Schedule.objects.filter(name=name).delete()
        changes.append(ScheduleChange(name, "removed" if deleted else "absent", "", None))
    return changes
