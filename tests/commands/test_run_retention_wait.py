"""``run_retention --enqueue --wait`` with no worker running (issue 30, point 4).

It used to print the same progress line twice a second for as long as it
was left running. It now says once, on stderr, that no worker has picked
the run up, prints progress only when it changes, and with
``--max-seconds`` gives up after that budget, exit non-zero, with the
reason. No cluster runs here: django-q2's ORM broker holds the task and
nobody takes it.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.conf import Conf

from retention.management.commands import run_retention
from retention.models import Run, RunBatch, RunStatus
from retention.selectors.runs import run_picked_up
from tests.helpers import put_tracked

pytestmark = pytest.mark.django_db

NOTICE = "No worker has picked run"


@pytest.fixture
def expired(make_policy: Any, now: datetime) -> None:
    make_policy("idv.photo", timedelta(days=30))
    put_tracked(now=now - timedelta(days=31))


def follow(*args: str) -> tuple[str, str, CommandError | None]:
    out, err = StringIO(), StringIO()
    try:
        call_command("run_retention", "--enqueue", "--wait", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


def test_wait__gives_up_after_max_seconds_when_no_worker_picked_the_run_up(
    expired: None,
) -> None:
    started = time.monotonic()

    out, err, refused = follow("--max-seconds", "1.5")

    run = Run.objects.get()
    assert refused is not None
    assert str(refused) == (
        f"no worker picked run {run.pk} up within 1.5 s: is `manage.py qcluster` running? "
        "The run stays in the ledger, queued."
    )
    assert 1.5 <= time.monotonic() - started < 10
    assert f"Queued run {run.pk}" in out
    # Nothing happened, so nothing was printed as progress.
    assert f"run {run.pk}: claimed" not in err
    assert (run.status, run_picked_up(run)) == (RunStatus.RUNNING, False)


def test_wait__says_once_that_no_worker_has_the_run_after_a_few_seconds(
    expired: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_retention, "NO_WORKER_NOTICE_SECONDS", 0.5)

    _, err, refused = follow("--max-seconds", "3")

    assert refused is not None and "no worker picked run" in str(refused)
    assert err.count(NOTICE) == 1
    notice = next(line for line in err.splitlines() if NOTICE in line)
    assert "is `manage.py qcluster` running?" in notice


def test_wait__with_json_prints_the_queued_run_then_exits_non_zero(expired: None) -> None:
    out, _, refused = follow("--max-seconds", "1", "--json")

    assert refused is not None
    body = json.loads(out)
    assert (body["status"], body["counts"]["deleted"]) == ("running", 0)
    assert str(refused).startswith(f"no worker picked run {body['run_id']} up within 1 s")


def test_wait__a_run_a_worker_swept_ends_with_its_summary_and_no_notice(
    expired: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # django-q2's sync mode: the publish itself runs the tasks, as a worker would.
    monkeypatch.setattr(Conf, "SYNC", True)

    out, err, refused = follow("--max-seconds", "30")

    assert refused is None
    run = Run.objects.get()
    assert (run.status, run.deleted) == (RunStatus.FINISHED, 1)
    assert NOTICE not in err
    assert "deleted 1" in out


def test_run_picked_up__a_batch_or_a_measurement_says_a_worker_has_the_run(
    expired: None,
) -> None:
    follow("--max-seconds", "0.5")
    run = Run.objects.get()
    assert not run_picked_up(run)

    Run.objects.filter(pk=run.pk).update(report={"measured": True})
    run.refresh_from_db()
    assert run_picked_up(run)

    Run.objects.filter(pk=run.pk).update(report={})
    run.refresh_from_db()
    RunBatch.objects.create(
        token="00000000-0000-0000-0000-000000000001",
        run=run,
        data_class="idv.photo",
        size=1,
        published_at=run.started_at,
        lease_expires_at=run.started_at,
    )
    assert run_picked_up(run)


def test_wait__a_picked_up_run_that_does_not_move_prints_its_progress_once_then_gives_up(
    expired: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forced: a worker took the run and then stalled (nothing it counts moves).
    monkeypatch.setattr(run_retention, "run_picked_up", lambda run: True)
    monkeypatch.setattr(run_retention, "FINISH_GRACE_SECONDS", 2.0)

    _, err, refused = follow("--max-seconds", "0.5")

    run = Run.objects.get()
    assert refused is not None
    assert str(refused).startswith(f"run {run.pk} is still running ")
    assert "(--max-seconds 0.5): its workers stopped claiming at the budget" in str(refused)
    assert err.count(f"run {run.pk}: claimed 0/0") == 1
    assert NOTICE not in err
