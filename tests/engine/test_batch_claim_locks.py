"""A queued page's claim does not wait for the run's row (issue 31).

Another worker's finalize (its run counts) and the run's advance lock the
run's row. A claim of a run without a limit records its page on that row
only if it is free; otherwise the page's finalize counts it, so the run's
``claimed`` is whole once the page is done. PostgreSQL only: SQLite has no
row locks to wait for.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction

from retention.engine.batch import _claim, _claimed_before
from retention.engine.disposal import ObjectDisposer
from retention.engine.ledger import _uncounted_close, run_finish
from retention.engine.page import claim_dispose
from retention.models import BatchState, Run, RunBatch, RunMode, RunStatus
from tests.helpers import blocked_statement, exists, on_own_connection, put_expired

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _batch(run: Run, now) -> RunBatch:
    return RunBatch.objects.create(
        token=uuid.uuid4(),
        run=run,
        data_class="idv.photo",
        size=0,
        state=BatchState.QUEUED,
        published_at=now,
        lease_expires_at=now + timedelta(minutes=5),
    )


def _run(now) -> Run:
    return Run.objects.create(
        mode=RunMode.ENFORCE,
        status=RunStatus.RUNNING,
        started_at=now,
        cutoff=now,
        data_classes=["idv.photo"],
        eligible=3,
    )


def _claim_while_held(run: Run, batch: RunBatch, now):
    """``_claim`` while another connection holds the run's row, as a finalize does."""
    holding, release = threading.Event(), threading.Event()

    def finalizer() -> None:  # holds the run's row as a finalize's run counts do
        with transaction.atomic():
            Run.objects.select_for_update().get(pk=run.pk)
            holding.set()
            release.wait(timeout=30)

    holder, held = on_own_connection(finalizer)
    assert holding.wait(timeout=10)
    try:
        with connection.cursor() as cursor:
            # Waiting for the row would fail the claim instead of hanging the test.
            cursor.execute("SET lock_timeout = '3s'")
        claim = _claim(run, batch, now)
        claimed_while_held = Run.objects.get(pk=run.pk).claimed
    finally:
        release.set()
        holder.join(timeout=30)
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    assert "error" not in held, held
    return claim, claimed_while_held


def test_claim__with_the_runs_row_held_elsewhere_claims_at_once_and_finalize_counts_it(
    make_policy, now
):
    make_policy(batch_size=3)
    records = put_expired(3, now)
    run = _run(now)
    batch = _batch(run, now)

    claim, claimed_while_held = _claim_while_held(run, batch, now)

    assert len(claim) == 3 and claim.uncounted == 3
    assert claimed_while_held == 0
    claim_dispose(claim=claim, clock=lambda: now, disposer=ObjectDisposer())
    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (3, 3)
    assert not any(exists(r) for r in records)


def test_claim__with_the_runs_row_free_counts_its_page_and_keeps_its_cursor(make_policy, now):
    make_policy(batch_size=3)
    put_expired(3, now)
    run = _run(now)
    batch = _batch(run, now)

    claim = _claim(run, batch, now)
    run.refresh_from_db()

    assert len(claim) == 3 and claim.uncounted == 0
    assert run.claimed == 3
    assert run.report["cursors"]["idv.photo"][1] == claim.items[-1].record_id
    claim_dispose(claim=claim, clock=lambda: now, disposer=ObjectDisposer())
    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (3, 3)


def test_claim__uncounted_items_outlive_a_worker_that_dies_before_the_finalize(make_policy, now):
    make_policy(batch_size=3)
    records = put_expired(3, now)
    run = _run(now)
    batch = _batch(run, now)
    _claim_while_held(run, batch, now)
    batch.refresh_from_db()
    assert batch.uncounted == 3  # on the batch's row, not only in the dead worker's memory

    # The redelivery finishes the rows leased to the batch's token.
    RunBatch.objects.filter(pk=batch.pk).update(deliveries=1)
    batch.refresh_from_db()
    again = _claimed_before(run, batch, now)
    assert again is not None and len(again) == 3
    claim_dispose(claim=again, clock=lambda: now, disposer=ObjectDisposer())

    run.refresh_from_db()
    batch.refresh_from_db()
    assert (run.status, run.claimed, run.deleted) == (RunStatus.RUNNING, 3, 3)
    assert batch.uncounted == 0
    assert not any(exists(r) for r in records)


def test_claim__uncounted_items_of_a_batch_never_finalized_are_counted_at_the_runs_close(
    make_policy, now
):
    make_policy(batch_size=3)
    put_expired(3, now)
    run = _run(now)
    batch = _batch(run, now)
    _claim_while_held(run, batch, now)
    RunBatch.objects.filter(pk=batch.pk).update(state=BatchState.EXPIRED)

    run_finish(run, RunStatus.FINISHED, "", now)

    run.refresh_from_db()
    assert (run.status, run.claimed) == (RunStatus.FINISHED, 3)
    assert RunBatch.objects.get(pk=batch.pk).uncounted == 0
    run_finish(run, RunStatus.FINISHED, "", now)  # a second close adds nothing
    run.refresh_from_db()
    assert run.claimed == 3


def test_claim__a_finalize_counting_its_batch_and_the_runs_close_do_not_deadlock(make_policy, now):
    make_policy(batch_size=3)
    records = put_expired(3, now)
    run = _run(now)
    batch = _batch(run, now)
    claim, _ = _claim_while_held(run, batch, now)
    holding, release = threading.Event(), threading.Event()
    pid: dict[str, int] = {}

    def closer() -> None:  # the run's close: the run's row, then the batches' rows
        with transaction.atomic():
            Run.objects.select_for_update().get(pk=run.pk)
            holding.set()
            release.wait(timeout=30)
            _uncounted_close(run)

    def finalizer() -> None:
        connection.ensure_connection()
        pid["value"] = connection.connection.info.backend_pid
        assert holding.wait(timeout=10)
        claim_dispose(claim=claim, clock=lambda: now, disposer=ObjectDisposer())

    closing, closed = on_own_connection(closer)
    finalizing, finalized = on_own_connection(finalizer)
    deadline = time.monotonic() + 20
    while not ("value" in pid and blocked_statement(pid["value"])):
        assert time.monotonic() < deadline and finalizing.is_alive(), finalized
        time.sleep(0.05)
    release.set()  # the close now takes the batch's row, which the finalize must not hold
    closing.join(timeout=30)
    finalizing.join(timeout=30)

    assert "error" not in closed, closed
    assert "error" not in finalized, finalized
    run.refresh_from_db()
    assert (run.claimed, run.deleted) == (3, 3)  # counted once, by the close
    assert RunBatch.objects.get(pk=batch.pk).uncounted == 0
    assert not any(exists(r) for r in records)
