"""A live inline run is never closed as abandoned because its liveness lock is missing a moment.

Its lock can be missing while its process lives: a database restart the
process has not noticed yet, a network blip after which its old server
session keeps the lock, a pooler that does not keep sessions. A run that
cannot hold its lock must stop deleting; a run whose lock is seen free is
closed only once it stays free longer than its process needs to take it
back (issue 26 review, finding 4).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections

from retention import engine
from retention.engine import outage
from retention.engine.outage import LIVENESS_KEY, liveness_drop, liveness_take
from retention.models import RecordState, RetentionRecord, Run, RunMode, RunStatus
from tests.helpers import exists, live_run_in_flight, put_tracked

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _hold_elsewhere(run: Run) -> tuple[threading.Thread, threading.Event]:
    """Another session holds the run's lock (its old session, after a network blip)."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_lock(%s, %s)",
                    [outage._LOCK_NAMESPACE, outage._lock_key(run.pk)],
                )
                taken.set()
                release.wait(timeout=30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(timeout=10)
    return thread, release


def test_liveness__a_run_that_cannot_take_its_lock_deletes_nothing(make_policy, now, settings):
    settings.RETENTION_DATABASE_RETRY_SECONDS = 1
    make_policy()
    records = [put_tracked(now=now - timedelta(days=31)) for _ in range(3)]
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    thread, release = _hold_elsewhere(run)
    try:
        with pytest.raises(Exception) as raised:
            engine.run_execute(run=run, clock=lambda: now)
    finally:
        release.set()
        thread.join(timeout=30)

    assert "liveness" in str(raised.value)
    assert all(exists(r) for r in records)
    assert not RetentionRecord.objects.exclude(state=RecordState.ACTIVE).exists()
    run.refresh_from_db()
    assert run.status == RunStatus.ERROR and run.deleted == 0


def test_liveness__a_run_whose_process_takes_its_lock_back_within_the_grace_is_not_closed(
    make_policy, now, monkeypatch
):
    make_policy()
    records = [put_tracked(now=now - timedelta(days=31)) for _ in range(2)]
    run, claim = live_run_in_flight(now)
    assert len(claim) == 2
    # The database restarted: the session and its lock are gone; the process
    # lives, and takes its lock back on its next try.
    liveness_drop(run)
    Run.objects.filter(pk=run.pk).update(report={**run.report, LIVENESS_KEY: "advisory_lock"})
    slept: list[float] = []

    def process_retakes(seconds: float) -> None:
        slept.append(seconds)
        assert liveness_take(run)

    try:
        with monkeypatch.context() as patched:
            patched.setattr(outage.time, "sleep", process_retakes)
            closed = outage.runs_abandon_orphaned(now + timedelta(seconds=1))
    finally:
        liveness_drop(run)

    assert closed == 0 and slept == [outage.LIVENESS_GRACE_SECONDS]
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert set(
        RetentionRecord.objects.filter(pk__in=[r.pk for r in records]).values_list(
            "state", "lease_expires_at"
        )
    ) == {(RecordState.DELETING, now + timedelta(seconds=claim.lease_seconds))}


def test_liveness__a_lock_still_free_after_the_grace_closes_the_run(make_policy, now, monkeypatch):
    make_policy()
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    Run.objects.filter(pk=run.pk).update(report={**run.report, LIVENESS_KEY: "advisory_lock"})
    slept: list[Any] = []

    with monkeypatch.context() as patched:
        patched.setattr(outage.time, "sleep", slept.append)
        closed = outage.runs_abandon_orphaned(now + timedelta(seconds=1))

    assert closed == 1
    run.refresh_from_db()
    assert run.status == RunStatus.ABANDONED
