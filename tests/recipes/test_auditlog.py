"""Recipe: django-auditlog (docs/recipes.md), on the real LogEntry, by ``timestamp``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from auditlog.models import LogEntry
from django.contrib.contenttypes.models import ContentType

from retention import api
from tests.recipes.recipe import exercise

pytestmark = pytest.mark.django_db


def _entry(days: int, now: datetime) -> int:
    entry = LogEntry.objects.create(
        content_type=ContentType.objects.get_for_model(LogEntry),
        object_pk=str(days),
        object_repr=f"object {days}",
        action=LogEntry.Action.UPDATE,
        changes={"title": ["old", "new"]},
        remote_addr="203.0.113.7",
        timestamp=now - timedelta(days=days),
    )
    return int(entry.pk)


def test_recipe_auditlog__entries_older_than_a_year_go(
    row_registry: Any, make_policy: Any, approver: Any, now: datetime
):
    api.register_model(LogEntry, data_class="audit.auditlog", age_field="timestamp")
    make_policy("audit.auditlog", timedelta(days=365), batch_size=2)
    due = [_entry(days, now) for days in (366, 400, 800, 1200, 2000)]
    for days in (1, 200, 364):
        _entry(days, now)

    exercise(
        model=LogEntry,
        data_class="audit.auditlog",
        now=now,
        due=due,
        seed_more=lambda: [_entry(500, now), _entry(600, now)],
        placed_by=approver,
    )
