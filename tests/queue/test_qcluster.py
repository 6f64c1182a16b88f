"""Queued runs on a real ``qcluster`` against the S3 server (issues 3, 16).

The cluster and the commands that feed it run as subprocesses with the
project's settings (tests/qcluster_settings.py: short leases), on the test
database and the S3 server over HTTP. The ORM broker always; the Redis broker
as well when REDIS_URL is set (CI sets it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule, Task

from retention import services
from retention.engine import SWEEP_SCHEDULE, schedules_install
from retention.models import (
    DeletionEvent,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunStatus,
    RunTrigger,
)
from retention.selectors.evidence import VerifyResult, chain_verify
from tests.subprocesses import Qcluster, manage_py, queue_env, subprocess_env

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(400),
]

BROKERS = [
    "orm",
    pytest.param("redis", marks=pytest.mark.redis),
]


@dataclass
class Cluster(Qcluster):
    """The shared ``Qcluster``, with a log file per start (the tests restart it)."""

    log: Path = Path()
    log_dir: Path = Path()
    starts: int = 0

    def start(self) -> None:
        self.starts += 1
        self.log = self.log_dir / f"qcluster-{self.starts}.log"
        super().start()

    def logs(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")[-4000:]
            for path in sorted(self.log_dir.glob("qcluster-*.log"))
        )

    def manage(self, *args: str) -> str:
        done = manage_py(self.env, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture(params=BROKERS)
def cluster(
    request: pytest.FixtureRequest,
    s3_server: Any,
    s3_bucket: str,
    tmp_path: Path,
    settings: Any,
) -> Iterator[Cluster]:
    db = connection.settings_dict
    env = subprocess_env(
        database_url=(
            f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        ),
        var_dir=tmp_path / "var",
        AWS_STORAGE_BUCKET_NAME=s3_bucket,
        AWS_S3_ENDPOINT_URL=s3_server.endpoint_url,
        AWS_S3_REGION_NAME="us-east-1",
        RETENTION_DIGEST_KEY=settings.RETENTION_DIGEST_KEY,
        **queue_env("lethe-test", Q_WORKERS="3"),
    )
    if request.param == "redis":
        env["REDIS_URL"] = os.environ["REDIS_URL"]
    logs = tmp_path / "logs"
    logs.mkdir()
    running = Cluster(env=env, log_dir=logs)
    yield running
    # The test is over: every process of the cluster ends at once, as kill_9
    # does. A graceful stop (one SIGINT: tests/install and the outage tests'
    # workers use it) waits 1-2 s a test for the workers and the monitor.
    if running.process is not None and running.process.poll() is None:
        running.kill_9()


def finished(run: Run) -> Callable[[], bool]:
    """For ``wait_for``: the run has finished."""
    return lambda: Run.objects.filter(pk=run.pk, status=RunStatus.FINISHED).exists()


def deleted_at_least(run: Run, count: int) -> Callable[[], bool]:
    """For ``wait_for``: the run has deleted ``count`` objects or more."""

    def deleted() -> bool:
        run.refresh_from_db()
        return run.deleted >= count

    return deleted


def wait_for(condition: Callable[[], bool], *, timeout: float, cluster: Cluster, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(
        f"timed out after {timeout:.0f}s waiting for {what}; cluster log:\n{cluster.logs()}"
    )


def seed_s3(
    client: Any, bucket: str, count: int, *, at: datetime, prefix: str, **track: Any
) -> list[RetentionRecord]:
    records = []
    for number in range(count):
        key = f"{prefix}/{number:05d}.bin"
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
        records.append(
            services.record_track(
                tenant_id=track.get("tenant_id", "acme"),
                data_class=track.get("data_class", "pod.scan"),
                object_key=key,
                storage="default",
                now=at,
                subject_id=track.get("subject_id"),
            )
        )
    return records


def keys_in(client: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys.update(entry["Key"] for entry in page.get("Contents", ()))
    return keys


def assert_converged(
    run: Run, doomed: list[RetentionRecord], kept: list[RetentionRecord], client: Any, bucket: str
) -> None:
    run.refresh_from_db()
    remaining = keys_in(client, bucket)
    assert not {r.object_key for r in doomed} & remaining
    assert {r.object_key for r in kept} <= remaining
    assert set(
        RetentionRecord.objects.filter(pk__in=[r.pk for r in doomed]).values_list(
            "state", flat=True
        )
    ) == {RecordState.DELETED}
    assert set(
        RetentionRecord.objects.filter(pk__in=[r.pk for r in kept]).values_list("state", flat=True)
    ) == {RecordState.ACTIVE}
    final = DeletionEvent.objects.filter(
        record__in=[r.pk for r in doomed],
        outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT],
    )
    # One closing event per record: nothing recorded (or deleted) twice.
    assert final.count() == len(doomed)
    assert final.values("record").distinct().count() == len(doomed)
    assert not DeletionEvent.objects.filter(
        record__in=[r.pk for r in kept], outcome=EventOutcome.DELETED
    ).exists()
    assert run.deleted + run.already_absent == len(doomed)
    (verdict,) = [item for item in chain_verify() if isinstance(item, VerifyResult)]
    assert verdict.ok, verdict.broken


def test_qcluster__schedule_fires_a_run_that_deletes_every_expired_object(
    cluster: Cluster, make_policy: Any, s3_client: Any, s3_bucket: str
) -> None:
    now = timezone.now()
    make_policy("pod.scan", timedelta(days=30), batch_size=25, at=now - timedelta(days=400))
    doomed = seed_s3(s3_client, s3_bucket, 120, at=now - timedelta(days=31), prefix="old")
    kept = seed_s3(s3_client, s3_bucket, 10, at=now - timedelta(days=1), prefix="new")
    schedules_install(cron="17 2 * * *", now=now)
    # Due now: the cluster's scheduler fires it at its first tick, which a
    # 30 s guard cycle makes the guard's first loop, at start (not 30 s in).
    # Worker timeouts are then counted in steps of 30 s (a task is stopped 30
    # to 60 s in), so tasks are handed out again only after 70 s.
    Schedule.objects.filter(name=SWEEP_SCHEDULE).update(next_run=now - timedelta(minutes=1))
    cluster.env.update({"Q_GUARD_CYCLE": "30", "Q_TIMEOUT": "30", "Q_RETRY": "70"})
    # One page a batch task here, so the run's batches can be counted.
    cluster.env["RETENTION_BATCH_SECONDS"] = "0"

    cluster.start()
    wait_for(
        lambda: Run.objects.filter(trigger=RunTrigger.SCHEDULE, status=RunStatus.FINISHED).exists(),
        timeout=150,
        cluster=cluster,
        what="the scheduled run to finish",
    )

    run = Run.objects.get(trigger=RunTrigger.SCHEDULE)
    assert run.schedule_slot is not None and run.batches.count() == 120 // 25 + 1
    assert (run.eligible, run.deleted, run.already_absent) == (120, 120, 0)
    assert_converged(run, doomed, kept, s3_client, s3_bucket)


def test_qcluster__killed_mid_run_converges_after_restart(
    cluster: Cluster, make_policy: Any, s3_client: Any, s3_bucket: str
) -> None:
    now = timezone.now()
    # Paced at 40 deletes/s, 400 objects take ~10 s: time to kill it midway.
    make_policy(
        "pod.scan",
        timedelta(days=30),
        batch_size=20,
        rate_limit=40,
        at=now - timedelta(days=400),
    )
    doomed = seed_s3(s3_client, s3_bucket, 400, at=now - timedelta(days=31), prefix="old")
    kept = seed_s3(s3_client, s3_bucket, 10, at=now - timedelta(days=1), prefix="new")
    schedules_install(cron="17 2 * * *", now=now)

    cluster.start()
    accepted = json.loads(cluster.manage("run_retention", "--enqueue", "--json"))
    run = Run.objects.get(pk=accepted["run_id"])
    assert accepted["status"] == RunStatus.RUNNING

    wait_for(
        deleted_at_least(run, 80), timeout=90, cluster=cluster, what="the run to delete 80 objects"
    )
    cluster.kill_9()
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.deleted < len(doomed)
    interrupted_at = run.deleted

    # Restarted with a 15 s guard cycle, its scheduler ticks 15 s in (once the
    # dead workers' 8 s claims have lapsed) rather than 30 s: the run's own
    # resumption, or the watchdog, carries it on. Worker timeouts count in 15 s
    # steps (a task is stopped 30 to 45 s in): tasks are handed out again after 50 s.
    cluster.env.update({"Q_GUARD_CYCLE": "15", "Q_TIMEOUT": "30", "Q_RETRY": "50"})
    cluster.start()
    wait_for(finished(run), timeout=200, cluster=cluster, what="the interrupted run to converge")

    run.refresh_from_db()
    assert run.deleted > interrupted_at
    assert_converged(run, doomed, kept, s3_client, s3_bucket)


def test_qcluster__foreground_tasks_start_within_one_batch_not_after_the_sweep(
    cluster: Cluster, make_policy: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    now = timezone.now()
    # Paced at 20 deletes/s, 240 objects take ~12 s in batches of 20.
    make_policy(
        "pod.scan", timedelta(days=30), batch_size=20, rate_limit=20, at=now - timedelta(days=400)
    )
    seed_s3(s3_client, s3_bucket, 240, at=now - timedelta(days=31), prefix="old")
    marks = tmp_path / "marks"
    marks.mkdir()

    cluster.start()
    accepted = json.loads(cluster.manage("run_retention", "--enqueue", "--json"))
    run = Run.objects.get(pk=accepted["run_id"])

    wait_for(
        deleted_at_least(run, 40), timeout=90, cluster=cluster, what="the sweep to be under way"
    )
    # Foreground work arrives on the same cluster while the sweep goes on.
    cluster.manage(
        "shell",
        "-c",
        "import time\n"
        "from django_q.tasks import async_task\n"
        "for i in range(3):\n"
        f"    async_task('tests.queue.foreground.mark', '{marks}/' + str(i), time.time())\n"
        "    time.sleep(1.5)\n",
    )
    wait_for(finished(run), timeout=120, cluster=cluster, what="the sweep to finish")

    run.refresh_from_db()
    assert run.deleted == 240
    batches = Task.objects.filter(group="retention", func__endswith="batch_dispose")
    # django-q2 stamps "started" at publication: a batch's wait in the queue is in it.
    longest_batch = max((t.stopped - t.started).total_seconds() for t in batches)
    started = [json.loads(path.read_text()) for path in sorted(marks.iterdir())]
    assert len(started) == 3
    for mark in started:
        assert mark["started"] - mark["enqueued"] <= longest_batch + 1.0, (mark, longest_batch)
    assert max(mark["started"] for mark in started) < run.finished_at.timestamp()
