"""Real ``qcluster`` workers on skewed host clocks; runs that resume with no watchdog (issue 26).

The workers' hosts are faked with libfaketime (``FAKETIME=+5m`` preloaded
into the cluster and the commands, as NOTES.md measured: it follows
qcluster's forks); PostgreSQL's clock stays real. CI installs libfaketime
(.ci/run); without it these tests fail under CI=true and are skipped, saying
so, elsewhere.
"""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_q.models import Schedule, Task

from retention.engine import WATCHDOG_SCHEDULE
from retention.models import (
    DeletionEvent,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunStatus,
)
from tests.helpers import database_now
from tests.queue import test_qcluster
from tests.queue.test_qcluster import (
    Cluster,
    deleted_at_least,
    finished,
    keys_in,
    seed_s3,
    wait_for,
)
from tests.subprocesses import manage_py

# The real cluster of tests/queue/test_qcluster.py (ORM broker, Redis when REDIS_URL is set).
cluster = test_qcluster.cluster

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(400),
]

PERIOD = timedelta(days=30)


@pytest.fixture
def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but libfaketime is missing: apt-get install faketime (.ci/run)")
        pytest.skip("libfaketime is not installed (apt-get install faketime); CI runs this")
    return found[0]


def on_host(env: dict[str, str], lib: str, offset: str) -> dict[str, str]:
    """The environment of a process on a host whose clock is ``offset`` off (e.g. "+5m")."""
    # libfaketime moves the monotonic clock by the same offset: durations stay true.
    return {**env, "LD_PRELOAD": lib, "FAKETIME": offset}


def seed_at(client: Any, bucket: str, minutes: list[float], *, prefix: str) -> list[Any]:
    """Objects whose deadline is ``minutes`` after the database's now."""
    start = database_now()
    records = []
    for n, m in enumerate(minutes):
        (record,) = seed_s3(
            client, bucket, 1, at=start - PERIOD + timedelta(minutes=m), prefix=f"{prefix}/{n}"
        )
        records.append(record)
    return records


def test_qcluster__workers_five_minutes_ahead_delete_nothing_early_and_report_their_skew(
    cluster: Cluster,
    libfaketime: str,
    make_policy: Any,
    s3_client: Any,
    s3_bucket: str,
    settings: Any,
) -> None:
    make_policy("pod.scan", PERIOD, batch_size=10, at=database_now() - timedelta(days=400))
    cluster.env = on_host(cluster.env, libfaketime, "+5m")
    cluster.start()
    young = seed_at(s3_client, s3_bucket, [1 + 3 * i / 29 for i in range(30)], prefix="young")
    expired = seed_at(s3_client, s3_bucket, [-1.0] * 40, prefix="expired")
    before = database_now()

    # Accepted and swept on hosts 5 minutes ahead.
    accepted = manage_py(cluster.env, "run_retention", "--enqueue", "--json")
    assert accepted.returncode == 0, accepted.stderr
    run = Run.objects.get(pk=json.loads(accepted.stdout)["run_id"])
    wait_for(finished(run), timeout=120, cluster=cluster, what="the run to finish")
    after = database_now()

    run.refresh_from_db()
    remaining = keys_in(s3_client, s3_bucket)
    assert {r.object_key for r in young} <= remaining
    assert not DeletionEvent.objects.filter(record__in=[r.pk for r in young]).exists()
    assert set(
        RetentionRecord.objects.filter(pk__in=[r.pk for r in young]).values_list("state", flat=True)
    ) == {RecordState.ACTIVE}
    assert not {r.object_key for r in expired} & remaining
    assert run.deleted == 40
    # The ledger's times are the database's, not the workers'.
    assert before <= run.started_at <= run.finished_at <= after  # type: ignore[operator]
    assert before <= run.cutoff <= after
    events = DeletionEvent.objects.filter(run=run, outcome=EventOutcome.DELETED)
    assert events.count() == 40
    assert all(before <= e.occurred_at <= after for e in events)
    # Each batch reported its host's offset; retention_check names the host.
    (offset,) = {round(seen["offset_seconds"] / 60) for seen in run.report["host_clocks"].values()}
    assert offset == 5
    out = StringIO()
    with pytest.raises(CommandError, match="clock_skew"):
        call_command("retention_check", "--json", stdout=out)
    workers = json.loads(out.getvalue())["workers"]
    assert "clock_skew" in workers["broken"]
    assert [round(h["offset_seconds"] / 60) for h in workers["hosts"]] == [5]


def test_qcluster__a_trigger_five_minutes_ahead_leaves_the_run_of_workers_behind_alone(
    cluster: Cluster, libfaketime: str, make_policy: Any, s3_client: Any, s3_bucket: str
) -> None:
    # Paced at 10 deletes/s, 300 objects take ~30 s: a run alive long enough
    # (the trigger below comes after ~20 deletes and takes a few seconds).
    make_policy(
        "pod.scan",
        PERIOD,
        batch_size=10,
        rate_limit=10,
        at=database_now() - timedelta(days=400),
    )
    seed_s3(s3_client, s3_bucket, 300, at=database_now() - PERIOD - timedelta(days=1), prefix="old")
    behind = on_host(cluster.env, libfaketime, "-5m")
    cluster.env = behind
    cluster.start()
    # Accepted on the workers' own host (on the ORM broker a host 5 minutes
    # behind takes no task another host published in the last 5 minutes).
    accepted = manage_py(behind, "run_retention", "--enqueue", "--json")
    assert accepted.returncode == 0, accepted.stderr
    run = Run.objects.get(pk=json.loads(accepted.stdout)["run_id"])

    wait_for(
        deleted_at_least(run, 20), timeout=90, cluster=cluster, what="the sweep to be under way"
    )
    # The run's lease (30 s here) was renewed by hosts 5 minutes behind; a
    # trigger on a host 5 minutes ahead still sees it alive.
    started = time.monotonic()
    second = manage_py(on_host(cluster.env, libfaketime, "+5m"), "run_retention")
    took = time.monotonic() - started
    # It was still sweeping.
    assert Run.objects.get(pk=run.pk).deleted < 300, f"the trigger took {took:.1f} s"
    assert second.returncode != 0, second.stdout
    assert "lease_held" in second.stderr

    wait_for(
        lambda: Run.objects.filter(pk=run.pk).exclude(status=RunStatus.RUNNING).exists(),
        timeout=120,
        cluster=cluster,
        what="the run to end",
    )
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED, run.status_reason
    assert run.deleted == 300
    assert list(Run.objects.exclude(pk=run.pk).values_list("status", flat=True)) == [
        RunStatus.REFUSED
    ]
    closing = DeletionEvent.objects.filter(
        outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT]
    )
    assert closing.count() == closing.values("record").distinct().count() == 300
    assert not keys_in(s3_client, s3_bucket)


def test_qcluster__a_deferred_run_resumes_within_a_minute_of_headroom_without_the_watchdog(
    cluster: Cluster, make_policy: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    make_policy("pod.scan", PERIOD, batch_size=20, at=database_now() - timedelta(days=400))
    seed_s3(s3_client, s3_bucket, 60, at=database_now() - PERIOD - timedelta(days=1), prefix="old")
    busy = tmp_path / "busy"
    busy.write_text("foreground behind")
    cluster.env.update(
        {
            "RETENTION_FOREGROUND_GUARD": "tests.queue.headroom.busy_while_file",
            "LETHE_TEST_BUSY_FILE": str(busy),
        }
    )
    cluster.start()
    # retention_schedule never ran: there is no watchdog.
    accepted = manage_py(cluster.env, "run_retention", "--enqueue", "--json")
    assert accepted.returncode == 0, accepted.stderr
    assert "watchdog schedule (retention.watchdog) is not installed" in accepted.stderr
    run = Run.objects.get(pk=json.loads(accepted.stdout)["run_id"])

    def deferred_for(seconds: float) -> Callable[[], bool]:
        def check() -> bool:
            run.refresh_from_db()
            since = (run.report.get("deferring") or {}).get("from")
            return since is not None and database_now() - datetime.fromisoformat(
                since
            ) >= timedelta(seconds=seconds)

        return check

    wait_for(deferred_for(0), timeout=90, cluster=cluster, what="the run to be deferred")
    # Held back past its own resumptions, which found the foreground still busy.
    wait_for(deferred_for(35), timeout=90, cluster=cluster, what="the deferral to last")
    assert Task.objects.filter(func="retention.tasks.run_resume").exists()
    assert run.deleted == 0
    headroom = database_now()
    busy.unlink()

    wait_for(finished(run), timeout=120, cluster=cluster, what="the run to resume and finish")
    run.refresh_from_db()
    assert run.deleted == 60
    (deferral,) = run.report["deferrals"]
    resumed_at = datetime.fromisoformat(deferral["until"])
    assert timedelta(0) <= resumed_at - headroom <= timedelta(seconds=60)
    assert not Schedule.objects.filter(name=WATCHDOG_SCHEDULE).exists()
    assert not keys_in(s3_client, s3_bucket)
