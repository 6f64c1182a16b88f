"""Install the django-q2 schedules of the retention sweep and reconciliation, idempotently."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retention.clock import db_now
from retention.conf import settings
from retention.engine import ScheduleChange, schedules_install, schedules_remove
from retention.formatting import human


class Command(BaseCommand):
    help = (
        "Create or update the nightly retention sweep (RETENTION_SCHEDULE_CRON, UTC), its "
        "watchdog and the weekly reconciliation (RETENTION_RECONCILE_CRON, UTC) in django-q2. "
        "Running it again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--remove", action="store_true", help="Delete both schedules instead.")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(self, *, remove: bool, as_json: bool, **options: Any) -> None:
        if remove:
            changes = schedules_remove()
        else:
            try:
                changes = schedules_install(
                    cron=settings.SCHEDULE_CRON,
                    reconcile_cron=settings.RECONCILE_CRON,
                    now=db_now(),
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        if as_json:
            self.stdout.write(json.dumps({"schedules": [c.as_json() for c in changes]}))
            return
        for change in changes:
            self.stdout.write(self._line(change))

    def _line(self, change: ScheduleChange) -> str:
        when = f", next run {human(change.next_run)}" if change.next_run else ""
        return f"{change.name}: {change.action} ({change.description}{when})"
