"""Claims and leases under real concurrency: separate PostgreSQL connections.

SQLite serialises writers and ignores SKIP LOCKED, so these prove nothing
there; they run on PostgreSQL (CI) and are reported as not run elsewhere.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction

from retention import engine
from retention.exceptions import RunRefused
from retention.models import DeletionEvent, RecordState, RetentionRecord, Run, RunMode, RunStatus
from tests.helpers import exists, on_own_connection, put_tracked

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_claim__rows_locked_by_another_worker_are_skipped_not_waited_for(make_policy, now):
    make_policy()
    records = [put_tracked(now=now - timedelta(days=31, seconds=i)) for i in range(10)]
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    oldest_five = sorted(records, key=lambda r: (r.expires_at, r.pk))[:5]
    locked = threading.Event()
    release = threading.Event()

    def worker_a() -> list[int]:
        with transaction.atomic():
            ids = list(
                RetentionRecord.objects.select_for_update()
                .filter(pk__in=[r.pk for r in oldest_five])
                .values_list("id", flat=True)
            )
            locked.set()
            release.wait(timeout=30)
        return ids

    thread, result = on_own_connection(worker_a)
    assert locked.wait(timeout=10)
    try:
        claim_b = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)
    finally:
        release.set()
        thread.join(timeout=30)
    assert "error" not in result, result
    claimed = {item.record_id for item in claim_b.items}
    assert claimed == {r.pk for r in records} - {r.pk for r in oldest_five}
    assert connection.vendor == "postgresql"


def test_claim__two_workers_claiming_concurrently_get_disjoint_rows(make_policy, now):
    make_policy()
    total = 300
    for i in range(total):
        put_tracked(now=now - timedelta(days=31, seconds=i))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    barrier = threading.Barrier(2)

    def worker() -> list[int]:
        barrier.wait(timeout=10)
        got: list[int] = []
        while True:
            claim = engine.records_claim(run=run, data_class="idv.photo", limit=7, now=now)
            if not claim.items:
                return got
            got.extend(item.record_id for item in claim.items)

    threads = [on_own_connection(worker) for _ in range(2)]
    for thread, _ in threads:
        thread.join(timeout=60)
    results = [result for _, result in threads]
    assert all("error" not in r for r in results), results
    a, b = (set(r["value"]) for r in results)
    assert a and b, "both workers must have claimed something"
    assert not a & b
    assert len(a | b) == total
    assert RetentionRecord.objects.filter(state=RecordState.DELETING).count() == total


def test_two_concurrent_triggers__one_run_sweeps_the_other_is_refused(make_policy, now):
    make_policy(batch_size=20)
    records = [put_tracked(now=now - timedelta(days=31, seconds=i)) for i in range(60)]
    barrier = threading.Barrier(2)

    def trigger() -> str:
        barrier.wait(timeout=10)
        try:
            run = engine.run_start(mode=RunMode.ENFORCE, now=now)
        except RunRefused as exc:
            return f"refused:{exc.reason}"
        engine.run_execute(run=run, clock=lambda: now)
        return f"swept:{run.pk}"

    threads = [on_own_connection(trigger) for _ in range(2)]
    for thread, _ in threads:
        thread.join(timeout=120)
    outcomes = sorted(result.get("value", repr(result.get("error"))) for _, result in threads)
    assert outcomes[0] == "refused:lease_held", outcomes
    assert outcomes[1].startswith("swept:"), outcomes

    swept = Run.objects.get(pk=outcomes[1].split(":", 1)[1])
    assert swept.status == RunStatus.FINISHED and swept.deleted == 60
    assert Run.objects.filter(status=RunStatus.REFUSED).count() == 1
    assert Run.objects.filter(deleted__gt=0).count() == 1
    assert DeletionEvent.objects.count() == 60
    assert not any(exists(r) for r in records)


def test_run_lease__a_dead_runs_lease_expires_and_the_next_trigger_proceeds(make_policy, now):
    make_policy()
    put_tracked(now=now - timedelta(days=31))
    dead = engine.run_start(mode=RunMode.ENFORCE, now=now)  # never executed: "crashed"
    with pytest.raises(RunRefused):
        engine.run_start(mode=RunMode.ENFORCE, now=now + timedelta(minutes=1))
    later = now + timedelta(minutes=10)
    run = engine.run_start(mode=RunMode.ENFORCE, now=later)
    run = engine.run_execute(run=run, clock=lambda: later)
    dead.refresh_from_db()
    assert run.deleted == 1
    assert dead.status == RunStatus.ABANDONED
