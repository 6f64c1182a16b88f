"""Classes on proxy models and filtering managers: a class disposes only of what
its model's default manager returns (issue 25, the first wrongful delete).

django-q2's ``Success`` and ``Failure`` are proxies of one table,
``django_q_task``, told apart by their default managers; the real package is
used, not a look-alike.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django_q.models import Failure, Success, Task

from retention import api
from retention.engine import run_execute, run_start
from retention.models import Run

pytestmark = pytest.mark.django_db


def _task(i: int, *, success: bool, age: timedelta, now: datetime) -> Task:
    stopped = now - age
    return Task(
        id=f"{'s' if success else 'f'}{i:031d}",
        name=f"task-{'ok' if success else 'bad'}-{i}",
        func="math.floor",
        started=stopped - timedelta(seconds=1),
        stopped=stopped,
        success=success,
        attempt_count=1,
    )


@pytest.fixture
def q_tasks(row_registry: Any, make_policy: Any, now: datetime) -> dict[str, set[str]]:
    """Tasks of both kinds at ages around both periods (7 and 30 days)."""
    ages = [timedelta(days=d) for d in (1, 6, 8, 10, 20, 29, 31, 40, 90)]
    tasks = [
        _task(i, success=success, age=age, now=now)
        for i, age in enumerate(ages)
        for success in (True, False)
    ]
    Task.objects.bulk_create(tasks)
    api.register_model(Success, data_class="tasks.q_success", age_field="stopped")
    api.register_model(Failure, data_class="tasks.q_failure", age_field="stopped")
    make_policy("tasks.q_success", timedelta(days=7), batch_size=4)
    make_policy("tasks.q_failure", timedelta(days=30), batch_size=4)

    def ids(success: bool, older_than: int) -> set[str]:
        return {
            t.id
            for t in tasks
            if t.success is success and t.stopped <= now - timedelta(days=older_than)
        }

    return {
        "success_due": ids(True, 7),
        "failure_due": ids(False, 30),
        "all": {t.id for t in tasks},
    }


def _run(now: datetime, data_class: str, *, mode: str = "enforce") -> Run:
    run = run_start(mode=mode, data_classes=[data_class], now=now)
    return run_execute(run=run, clock=lambda: now)


def test_proxy__dry_run_counts_only_the_rows_its_manager_returns(q_tasks: Any, now: datetime):
    success = _run(now, "tasks.q_success", mode="dry_run")
    failure = _run(now, "tasks.q_failure", mode="dry_run")

    assert success.eligible == len(q_tasks["success_due"]) == 7
    assert failure.eligible == len(q_tasks["failure_due"]) == 3
    assert set(Task.objects.values_list("id", flat=True)) == q_tasks["all"]


def test_proxy__two_classes_on_one_table_never_touch_each_others_rows(q_tasks: Any, now: datetime):
    success = _run(now, "tasks.q_success")

    assert success.deleted == 7
    left = set(Task.objects.values_list("id", flat=True))
    assert left == q_tasks["all"] - q_tasks["success_due"]
    # Every failure is still there, the young ones included.
    assert set(Failure.objects.values_list("id", flat=True)) == {
        t for t in q_tasks["all"] if t.startswith("f")
    }

    failure = _run(now, "tasks.q_failure")

    assert failure.deleted == 3
    assert set(Task.objects.values_list("id", flat=True)) == (
        q_tasks["all"] - q_tasks["success_due"] - q_tasks["failure_due"]
    )


def test_proxy__a_redacting_class_redacts_only_its_managers_rows(
    row_registry: Any, make_policy: Any, now: datetime
):
    from retention import redaction

    Task.objects.bulk_create(
        [_task(i, success=s, age=timedelta(days=40), now=now) for i in range(3) for s in (1, 0)]
    )
    api.register_model(
        Failure,
        data_class="tasks.q_failure",
        age_field="stopped",
        redact={"name": redaction.Constant("redacted")},
    )
    make_policy("tasks.q_failure", timedelta(days=30), disposition="redact")

    run = _run(now, "tasks.q_failure")

    assert run.redacted == 3
    assert set(Task.objects.filter(success=False).values_list("name", flat=True)) == {"redacted"}
    assert not Task.objects.filter(success=True, name="redacted").exists()
