"""Create the two governance groups with exactly the permissions they need.

Idempotent: run it after every deploy; a group that drifted (a permission
added or removed by hand) is put back.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retention.exceptions import RetentionError
from retention.services.governance import groups_setup


class Command(BaseCommand):
    help = 'Create or correct the groups "Retention authors" and "Retention approvers".'

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            changes = groups_setup()
        except RetentionError as exc:
            raise CommandError(str(exc)) from exc
        for change in changes:
            if change.created:
                state = f"created with {len(change.added)} permission(s)"
            elif change.added or change.removed:
                parts = []
                if change.added:
                    parts.append(f"added {', '.join(change.added)}")
                if change.removed:
                    parts.append(f"removed {', '.join(change.removed)}")
                state = "; ".join(parts)
            else:
                state = "already up to date"
            self.stdout.write(f"{change.name}: {state}.")
