"""Recipe: django-celery-results (docs/recipes.md), on the real TaskResult, by ``date_done``."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import count
from typing import Any

import pytest
from django_celery_results.models import TaskResult

from retention import api
from tests.recipes.recipe import exercise

pytestmark = pytest.mark.django_db

_ids = count()


def _result(days: int, now: datetime, status: str = "SUCCESS") -> int:
    result = TaskResult.objects.create(
        task_id=f"task-{next(_ids)}", task_name="shop.tasks.sync", status=status, result="null"
    )
    # date_done is auto_now: date it afterwards.
    TaskResult.objects.filter(pk=result.pk).update(date_done=now - timedelta(days=days))
    return int(result.pk)


def test_recipe_celery_results__results_older_than_14_days_go(
    row_registry: Any, make_policy: Any, approver: Any, now: datetime
):
    api.register_model(TaskResult, data_class="tasks.celery_results", age_field="date_done")
    make_policy("tasks.celery_results", timedelta(days=14), batch_size=2)
    due = [_result(days, now) for days in (15, 20, 30)] + [_result(60, now, "FAILURE")]
    for days in (1, 13):
        _result(days, now)
    _result(2, now, "FAILURE")

    exercise(
        model=TaskResult,
        data_class="tasks.celery_results",
        now=now,
        due=due,
        seed_more=lambda: [_result(100, now)],
        placed_by=approver,
    )
