"""The weekly reconciliation schedule (issue 15): installed by `retention_schedule` once,
on RETENTION_RECONCILE_CRON, checked by retention.E014, firing its task."""

from __future__ import annotations

import json
import pydoc
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import CommandError, call_command
from django_q.brokers import get_broker
from django_q.models import OrmQ, Schedule
from django_q.scheduler import scheduler
from django_q.signing import SignedPackage
from freezegun import freeze_time

from retention import tasks
from retention.checks import check_queued_runs
from retention.models import Run, RunMode, RunStatus, RunTrigger
from retention.selectors.reconcile_health import reconciliations_last
from tests.helpers import put_tracked

pytestmark = pytest.mark.django_db

RECONCILE = "retention.reconcile"
TASK = "retention.tasks.reconcile_scheduled"


def install(at: datetime, *args: str) -> str:
    out = StringIO()
    with freeze_time(at):
        call_command("retention_schedule", *args, stdout=out)
    return out.getvalue()


def test_retention_schedule__installs_the_weekly_reconciliation_once(now):
    first = install(now)
    second = install(now)

    reconcile = Schedule.objects.get(name=RECONCILE)
    assert (reconcile.func, reconcile.schedule_type, reconcile.cron, reconcile.repeats) == (
        TASK,
        Schedule.CRON,
        "43 3 * * 0",
        -1,
    )
    # 2026-03-14 is a Saturday: the next Sunday, 03:43 UTC.
    assert reconcile.next_run == datetime.fromisoformat("2026-03-15T03:43:00+00:00")
    assert Schedule.objects.count() == 3
    assert "retention.reconcile: created (cron '43 3 * * 0' UTC" in first
    assert "retention.reconcile: unchanged" in second


def test_retention_schedule__the_reconcile_cron_is_the_setting(now, settings):
    settings.RETENTION_RECONCILE_CRON = "0 5 * * 1"
    install(now)
    settings.RETENTION_RECONCILE_CRON = "30 4 1 * *"

    out = install(now)

    reconcile = Schedule.objects.get(name=RECONCILE)
    assert reconcile.cron == "30 4 1 * *"
    assert reconcile.next_run == datetime.fromisoformat("2026-04-01T04:30:00+00:00")
    assert "retention.reconcile: updated" in out
    assert "retention.sweep: unchanged" in out
    assert Schedule.objects.filter(name=RECONCILE).count() == 1


def test_retention_schedule__json_names_the_reconciliation(now):
    with freeze_time(now):
        out = StringIO()
        call_command("retention_schedule", "--json", stdout=out)

    changes = {c["name"]: c for c in json.loads(out.getvalue())["schedules"]}
    assert changes[RECONCILE] == {
        "name": RECONCILE,
        "action": "created",
        "description": "cron '43 3 * * 0' UTC",
        "next_run": "2026-03-15T03:43:00+00:00",
    }


def test_retention_schedule__a_bad_reconcile_cron_installs_nothing(now, settings):
    settings.RETENTION_RECONCILE_CRON = "every sunday"

    with pytest.raises(CommandError, match="RETENTION_RECONCILE_CRON 'every sunday' is not a"):
        install(now)

    assert not Schedule.objects.exists()


@pytest.mark.parametrize("value", ["every sunday", "43 3 * * 8", ""])
def test_check_e014__rejects_a_bad_reconcile_cron(settings, value):
    assert check_queued_runs() == []  # the default is valid
    settings.RETENTION_RECONCILE_CRON = value

    messages = check_queued_runs()

    assert [m.id for m in messages] == ["retention.E014"]
    assert messages[0].msg == f"RETENTION_RECONCILE_CRON {value!r} is not a valid cron expression."


@pytest.fixture
def _keep_the_test_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scheduler closes old connections, which would end the test's transaction.
    monkeypatch.setattr("django_q.scheduler.close_old_django_connections", lambda: None)


@pytest.mark.usefixtures("_keep_the_test_connection")
def test_schedule__the_reconciliation_fires_its_task_by_its_contract_path(now):
    install(now)
    Schedule.objects.exclude(name=RECONCILE).delete()
    Schedule.objects.filter(name=RECONCILE).update(next_run=now - timedelta(minutes=1))

    with freeze_time(now):
        scheduler(broker=get_broker())

    (task,) = [SignedPackage.loads(row.payload) for row in OrmQ.objects.all()]
    assert task["func"] == TASK
    assert pydoc.locate(task["func"]) is tasks.reconcile_scheduled


def test_reconcile_scheduled__reconciles_every_store_in_use_and_returns_the_run_id(
    make_policy, now
):
    make_policy()
    put_tracked(now=now - timedelta(days=1))
    storages["default"].save("acme/untracked.bin", ContentFile(b"x"))  # an orphan

    with freeze_time(now):
        run_id = tasks.reconcile_scheduled(schedule=RECONCILE)

    run = Run.objects.get(pk=run_id)
    assert (run.mode, run.trigger, run.status) == (
        RunMode.RECONCILE,
        RunTrigger.SCHEDULE,
        RunStatus.FINISHED,
    )
    assert run.finished_at == now and run.report["dry_run"] is False
    # What retention_check and /metrics/ read next.
    (default,) = reconciliations_last()
    assert (default.storage, default.run_id, default.findings["orphans"]) == ("default", run_id, 1)


def test_retention_schedule__remove_removes_the_reconciliation_too(now):
    install(now)
    assert Schedule.objects.filter(name=RECONCILE).exists()

    out = install(now, "--remove")

    assert not Schedule.objects.exists()
    assert f"{RECONCILE}: removed" in out
