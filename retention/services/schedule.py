"""The django-q2 schedules of the sweep and of its watchdog.

Keyed by name, so installing twice leaves one of each; rows with the same
name created by hand are folded into one. The cron is evaluated in UTC here;
django-q2 recomputes later slots in its own time zone (check retention.W002
warns when that is not UTC).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django_q.models import Schedule  # type: ignore[import-untyped]

SWEEP_SCHEDULE = "retention.sweep"
SWEEP_TASK = "retention.tasks.run_scheduled"
WATCHDOG_SCHEDULE = "retention.watchdog"
WATCHDOG_TASK = "retention.tasks.runs_resume"


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
    from croniter import croniter  # type: ignore[import-untyped]

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


def schedules_install(*, cron: str, now: datetime) -> list[ScheduleChange]:
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
        _next_cron(cron, now),
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
    return [sweep, watchdog]


def schedules_remove() -> list[ScheduleChange]:
    changes = []
    for name in (SWEEP_SCHEDULE, WATCHDOG_SCHEDULE):
        deleted, _ = Schedule.objects.filter(name=name).delete()
        changes.append(ScheduleChange(name, "removed" if deleted else "absent", "", None))
    return changes
