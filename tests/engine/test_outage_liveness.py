"""An inline run whose process lost the database is closed at once, not after its lease.

On PostgreSQL the run holds a session advisory lock while it works
(``retention.engine.outage``). Once its process is gone, the lock is too:
the next trigger, or the watchdog, closes the run ``abandoned`` and frees
the rows of its pages in flight (their claim tokens carry the run's mark).
A run whose process still holds its lock is left alone.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from retention import engine
from retention.engine.outage import (
    LIVENESS_KEY,
    liveness_drop,
    liveness_take,
    runs_abandon_orphaned,
)
from retention.models import RecordState, RetentionRecord, Run, RunMode, RunStatus
from tests.helpers import exists, live_run_in_flight, put_tracked

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_liveness__a_run_whose_process_holds_its_lock_is_not_closed(make_policy, now):
    make_policy()
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    assert liveness_take(run)
    try:
        assert runs_abandon_orphaned(now + timedelta(seconds=1)) == 0
        run.refresh_from_db()
        assert run.status == RunStatus.RUNNING
    finally:
        liveness_drop(run)


def test_liveness__the_next_trigger_takes_over_at_once_and_frees_the_pages_in_flight(
    make_policy, now
):
    make_policy()
    records = [put_tracked(now=now - timedelta(days=31)) for _ in range(3)]
    first, claim = live_run_in_flight(now)
    assert len(claim) == 3
    liveness_drop(first)  # its process is gone: the database was away too long

    later = now + timedelta(seconds=5)  # the run's and the rows' leases (300 s) still run
    second = engine.run_start(mode=RunMode.ENFORCE, now=later)
    engine.run_execute(run=second, clock=lambda: later)

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == RunStatus.ABANDONED
    assert first.status_reason.startswith("database unavailable")
    assert second.status == RunStatus.FINISHED and second.deleted == 3
    assert all(not exists(r) for r in records)
    assert not RetentionRecord.objects.filter(state=RecordState.DELETING).exists()


def test_watchdog__closes_an_inline_run_whose_process_lost_the_database(make_policy, now):
    make_policy()
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    # It took its lock once; no session holds it now.
    Run.objects.filter(pk=run.pk).update(report={**run.report, LIVENESS_KEY: "advisory_lock"})

    engine.runs_resume_stalled(now=now + timedelta(seconds=1), publish=lambda *a, **k: None)

    run.refresh_from_db()
    assert run.status == RunStatus.ABANDONED
    assert run.status_reason.startswith("database unavailable")


def test_liveness__a_run_that_never_took_the_lock_waits_for_its_lease(make_policy, now):
    make_policy()
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)

    assert runs_abandon_orphaned(now + timedelta(seconds=1)) == 0
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
