"""No queued run waits on a schedule nobody installed (issue 26).

Every queued run keeps its own one-off resumption pending while it runs;
``run_retention --enqueue`` warns and ``retention_check`` fails while queued
runs are used without the watchdog. The resumption firing on real clusters,
with and without the watchdog, is tested in tests/queue/test_clocks_and_resumption.py.
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.models import Schedule

from retention import tasks
from retention.clock import db_now
from retention.engine import WATCHDOG_SCHEDULE, run_finish
from retention.models import Run, RunStatus

pytestmark = pytest.mark.django_db

WARNING = "the watchdog schedule (retention.watchdog) is not installed"


def enqueue(*args: str) -> tuple[Run, str]:
    out, err = StringIO(), StringIO()
    call_command("run_retention", "--enqueue", "--json", *args, stdout=out, stderr=err)
    return Run.objects.get(pk=json.loads(out.getvalue())["run_id"]), err.getvalue()


def resumptions(run: Run) -> list[Schedule]:
    return list(Schedule.objects.filter(name=f"retention.resume.{run.pk}"))


def test_run_retention_enqueue__warns_when_the_watchdog_schedule_is_missing(
    make_policy: Any,
) -> None:
    make_policy("pod.scan")

    _, err = enqueue()
    assert WARNING in err
    assert "retention_schedule" in err

    call_command("retention_schedule", stdout=StringIO())
    _, err = enqueue("--dry-run")
    assert WARNING not in err


def test_check__queued_runs_without_the_watchdog_fail_watchdog_missing(make_policy: Any) -> None:
    make_policy("pod.scan")
    call_command("retention_check", stdout=StringIO())  # no queued run: nothing to watch
    enqueue()

    out = StringIO()
    with pytest.raises(CommandError, match="watchdog_missing"):
        call_command("retention_check", stdout=out)
    assert "NOT INSTALLED while queued runs are used" in out.getvalue()

    call_command("retention_schedule", stdout=StringIO())
    out = StringIO()
    call_command("retention_check", stdout=out)
    assert f"Watchdog schedule ({WATCHDOG_SCHEDULE}): installed." in out.getvalue()


def test_run_enqueue__keeps_one_resumption_pending_while_the_run_runs(make_policy: Any) -> None:
    make_policy("pod.scan")
    run, _ = enqueue()
    (pending,) = resumptions(run)
    assert pending.func == "retention.tasks.run_resume"
    assert pending.schedule_type == Schedule.ONCE and pending.repeats == -1
    assert timedelta(0) < pending.next_run - run.started_at <= timedelta(seconds=15)

    # django-q2 deletes a one-off schedule when it fires it; the task arms the next one.
    pending.delete()
    assert tasks.run_resume(str(run.pk)) == RunStatus.RUNNING
    assert len(resumptions(run)) == 1
    # Idempotent: a second firing (two clusters) leaves one pending.
    assert tasks.run_resume(str(run.pk)) == RunStatus.RUNNING
    assert len(resumptions(run)) == 1

    run_finish(run, RunStatus.STOPPED, "test", db_now())
    Schedule.objects.filter(name=f"retention.resume.{run.pk}").delete()
    assert tasks.run_resume(str(run.pk)) == RunStatus.STOPPED
    assert resumptions(run) == []
