"""A run's liveness lock comes back on its own while the run sits in a storage call.

The lock is kept by a thread on a connection of its own: when its session
is killed (a database restart, a network blip) it takes the lock back
within the grace, though the run's own connection is busy, so no trigger
closes the live run.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta

import pytest
from django.db import connection

from retention import engine
from retention.engine import outage
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.engine.pacing import RateGate
from retention.models import Run, RunMode, RunStatus
from retention.storage import KeyResult
from tests.helpers import exists, on_own_connection, put_tracked

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class StalledDisposer(ObjectDisposer):
    """Deletes once the test lets it: a long storage call."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = threading.Event()
        self.go = threading.Event()

    def dispose(
        self, items: Sequence[DisposalItem], *, erase_versions: bool, gate: RateGate
    ) -> dict[int, KeyResult]:
        self.inside.set()
        assert self.go.wait(timeout=30)
        return super().dispose(items, erase_versions=erase_versions, gate=gate)


def _lock_holder(run: Run) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s AND objid::bigint = %s AND objsubid = 2",
            [outage._LOCK_NAMESPACE, outage._lock_key(run.pk) % (1 << 32)],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def test_liveness__the_lock_is_taken_back_while_the_run_is_in_a_storage_call(make_policy, now):
    make_policy()
    records = [put_tracked(now=now - timedelta(days=31)) for _ in range(3)]
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    disposer = StalledDisposer()
    thread, result = on_own_connection(
        lambda: engine.run_execute(run=run, clock=lambda: now, disposer=disposer)
    )
    try:
        assert disposer.inside.wait(timeout=30)
        first = _lock_holder(run)
        assert first is not None
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [first])
        taken_back = None
        for _ in range(100):
            taken_back = _lock_holder(run)
            if taken_back not in (None, first):
                break
            threading.Event().wait(0.05)
        assert taken_back not in (None, first)
        assert outage.runs_abandon_orphaned(now + timedelta(seconds=1)) == 0
    finally:
        disposer.go.set()
        thread.join(timeout=60)

    assert "error" not in result, result
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED and run.deleted == 3
    assert not any(exists(r) for r in records)
