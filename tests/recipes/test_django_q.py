"""Recipe: django-q2's task tables (docs/recipes.md), on the real Success and Failure.

Both are proxies of one table, ``django_q_task``, told apart by their default
managers: each class disposes only of its own kind.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import count
from typing import Any

import pytest
from django_q.models import Failure, Success, Task

from retention import api
from tests.recipes.recipe import exercise

pytestmark = pytest.mark.django_db

_ids = count()


def _task(*, success: bool, age: timedelta, now: datetime) -> str:
    stopped = now - age
    task = Task.objects.create(
        id=f"{'s' if success else 'f'}{next(_ids):031d}",
        name="task",
        func="math.floor",
        started=stopped - timedelta(seconds=1),
        stopped=stopped,
        success=success,
        attempt_count=1,
    )
    return str(task.pk)


def _register() -> None:
    api.register_model(Success, data_class="tasks.q_success", age_field="stopped")
    api.register_model(Failure, data_class="tasks.q_failure", age_field="stopped")


@pytest.fixture
def tasks(row_registry: Any, make_policy: Any, now: datetime) -> dict[str, set[str]]:
    _register()
    make_policy("tasks.q_success", timedelta(days=7), batch_size=3)
    make_policy("tasks.q_failure", timedelta(days=30), batch_size=3)
    made: dict[str, set[str]] = {"success_due": set(), "failure_due": set()}
    for days in (1, 6, 8, 10, 20, 29, 31, 40, 90):
        age = timedelta(days=days)
        ok = _task(success=True, age=age, now=now)
        bad = _task(success=False, age=age, now=now)
        if days > 7:
            made["success_due"].add(ok)
        if days > 30:
            made["failure_due"].add(bad)
    return made


@pytest.mark.parametrize(
    ("success", "due", "age", "kept"),
    [(True, 7, 9, Failure), (False, 3, 45, Success)],
    ids=["successes-after-7-days", "failures-after-30-days"],
)
def test_recipe_django_q__each_kind_goes_after_its_period_and_none_of_the_other(
    tasks: dict[str, set[str]],
    approver: Any,
    now: datetime,
    success: bool,
    due: int,
    age: int,
    kept: type[Task],
):
    kind = "success" if success else "failure"
    assert len(tasks[f"{kind}_due"]) == due

    exercise(
        model=Success if success else Failure,
        data_class=f"tasks.q_{kind}",
        now=now,
        due=tasks[f"{kind}_due"],
        seed_more=lambda: [_task(success=success, age=timedelta(days=age), now=now)],
        placed_by=approver,
    )

    # Every task of the other kind is still there, those past this kind's period included.
    assert kept.objects.count() == 9
