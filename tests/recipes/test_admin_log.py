"""Recipe: the admin's LogEntry (docs/recipes.md), by ``action_time``; the users stay."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType

from retention import api
from tests.recipes.recipe import exercise

pytestmark = pytest.mark.django_db


def _entry(user: Any, days: int, now: datetime) -> int:
    entry = LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(LogEntry),
        object_id=str(days),
        object_repr=f"object {days}",
        action_flag=CHANGE,
        change_message='[{"changed": {"fields": ["title"]}}]',
        action_time=now - timedelta(days=days),
    )
    return int(entry.pk)


def test_recipe_admin_log__entries_older_than_two_years_go_and_the_users_stay(
    row_registry: Any, make_policy: Any, approver: Any, author: Any, now: datetime
):
    api.register_model(LogEntry, data_class="admin.log", age_field="action_time")
    make_policy("admin.log", timedelta(days=730), batch_size=2)
    due = [_entry(author, days, now) for days in (731, 800, 1500)]
    for days in (0, 30, 729):
        _entry(approver, days, now)

    exercise(
        model=LogEntry,
        data_class="admin.log",
        now=now,
        due=due,
        seed_more=lambda: [_entry(approver, 1000, now)],
        placed_by=approver,
    )

    assert {author.pk, approver.pk} <= set(type(author).objects.values_list("pk", flat=True))
