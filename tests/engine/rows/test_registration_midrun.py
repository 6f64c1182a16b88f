"""A registration that changes while a run works disposes of nothing more (review finding 2).

The start of a run checks each row class's registration against the
version it works by (tests/rows/test_registration.py). The pages after it
may run in other processes, with other code: a batch published before a
deploy that widened ``scope=`` is taken by a worker running the new code,
and an inline sweep that resumes builds its pages from the registration
the code has then. Each group of pages checks again, and a class whose
registration drifted disposes of nothing more in the run, which says why
as the start's check does.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import OperationalError

from retention import engine
from retention.engine import run_execute, run_start
from retention.engine.guard import GuardReading
from retention.engine.publish import BATCH_TASK
from retention.models import PolicyVersion, Run
from tests.rowhost.models import RequestLog
from tests.rows.test_registration import DATA_CLASS, _only_errors, _register, _rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def pages_of_two(row_registry: Any, make_policy: Any) -> PolicyVersion:
    """The class of tests/rows/test_registration.py (status 200 only), pages of 2 rows."""
    _register(row_registry)
    version: PolicyVersion = make_policy(DATA_CLASS, timedelta(days=30), batch_size=2)
    return version


def _quiet(*, now: datetime) -> GuardReading:
    return GuardReading(over_budget=False, value=0.0, budget=30.0, detail="")


def _says_the_scope_changed(run: Run) -> None:
    reason = run.report["rules"][DATA_CLASS]["registration_changed"]
    assert "registration of logs.request in the code differs" in reason
    assert "scope" in reason
    assert "approve a version that adopts it" in reason


def _only_the_first_page_went(run: Run) -> None:
    """The run finished with the page it took before the scope changed, and no other."""
    run.refresh_from_db()
    assert run.status == "finished"
    assert run.deleted == 2
    assert RequestLog.objects.filter(status=500).count() == 3
    assert RequestLog.objects.filter(status=200).count() == 2
    _says_the_scope_changed(run)


def test_queued_batch__published_before_a_deploy_widened_the_scope_disposes_of_nothing(
    pages_of_two, row_registry, now
):
    held: list[dict[str, Any]] = []

    def broker(func: str, payload: dict[str, Any], name: str) -> None:
        if func == BATCH_TASK:
            held.append(payload)  # in the broker, not delivered yet

    def worker(func: str, payload: dict[str, Any], name: str) -> None:
        if func == BATCH_TASK:
            engine.batch_dispose(payload=payload, clock=lambda: now, publish=worker, guard=_quiet)

    _rows(now)  # 4 rows of status 200 (the approved scope), 3 of status 500 (outside it)
    run = engine.run_enqueue(
        mode="enforce", trigger="command", data_classes=[DATA_CLASS], now=now, publish=broker
    )
    engine.run_arm(run_id=run.pk, clock=lambda: now, publish=broker, guard=_quiet)
    assert len(held) == 1
    # A deploy changes the scope (no version adopts it); then a worker takes the batch.
    _register(row_registry, scope=_only_errors)
    engine.batch_dispose(payload=held.pop(), clock=lambda: now, publish=worker, guard=_quiet)

    run.refresh_from_db()
    assert run.status == "finished"
    assert (run.deleted, run.redacted) == (0, 0)
    assert RequestLog.objects.filter(status=500).count() == 3
    assert RequestLog.objects.filter(status=200).count() == 4
    _says_the_scope_changed(run)


def test_queued_batches__a_deploy_between_two_pages_stops_the_class_after_the_first(
    pages_of_two, row_registry, now
):
    held: list[dict[str, Any]] = []

    def broker(func: str, payload: dict[str, Any], name: str) -> None:
        if func == BATCH_TASK:
            held.append(payload)

    def one_page() -> float:
        return next(ticks)

    # The batch's time is up after its first page: the next page is a new batch.
    ticks = itertools.chain([0.0], itertools.repeat(1e9))
    _rows(now)
    run = engine.run_enqueue(
        mode="enforce", trigger="command", data_classes=[DATA_CLASS], now=now, publish=broker
    )
    engine.run_arm(run_id=run.pk, clock=lambda: now, publish=broker, guard=_quiet)
    engine.batch_dispose(
        payload=held.pop(), clock=lambda: now, publish=broker, guard=_quiet, monotonic=one_page
    )
    assert RequestLog.objects.filter(status=200).count() == 2
    assert len(held) == 1  # the class's next page, published by the advance

    _register(row_registry, scope=_only_errors)
    while held:
        engine.batch_dispose(payload=held.pop(), clock=lambda: now, publish=broker, guard=_quiet)

    _only_the_first_page_went(run)


def _lost_once_after_the_first_page(row_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A progress callback: after the first page the code's scope changes and the
    connection is lost, so the inline engine resumes its sweep (``inline._execute``)."""
    monkeypatch.setattr("retention.engine.inline.connection_lost", lambda exc: True)
    pages = [0]

    def progress(run: Run) -> None:
        pages[0] += 1
        if pages[0] == 1:
            _register(row_registry, scope=_only_errors)
            raise OperationalError("server closed the connection unexpectedly")

    return progress


def test_inline_sweep__resumed_after_the_scope_changed_disposes_of_nothing_more(
    pages_of_two, row_registry, now, monkeypatch
):
    _rows(now)
    progress = _lost_once_after_the_first_page(row_registry, monkeypatch)

    run = run_start(mode="enforce", data_classes=[DATA_CLASS], now=now)
    run = run_execute(run=run, clock=lambda: now, progress=progress)

    _only_the_first_page_went(run)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_inline_sweep__a_second_lane_starts_no_page_after_the_scope_changed(
    row_registry, make_policy, now, monkeypatch
):
    # A plain class (no signal, no files): on PostgreSQL a second lane sweeps beside the engine.
    _register(row_registry)
    make_policy(DATA_CLASS, timedelta(days=30), batch_size=2)
    RequestLog.objects.bulk_create(
        [
            RequestLog(
                tenant_id="t1", path=f"/ok/{i}", status=200, created_at=now - timedelta(40, i)
            )
            for i in range(12)
        ]
        + [
            RequestLog(
                tenant_id="t1", path=f"/err/{i}", status=500, created_at=now - timedelta(40, i)
            )
            for i in range(12)
        ]
    )
    progress = _lost_once_after_the_first_page(row_registry, monkeypatch)

    run = run_start(mode="enforce", data_classes=[DATA_CLASS], now=now)
    run = run_execute(run=run, clock=lambda: now, progress=progress)

    run.refresh_from_db()
    assert run.status == "finished"
    assert RequestLog.objects.filter(status=500).count() == 12
    assert run.deleted == 12 - RequestLog.objects.filter(status=200).count()
    _says_the_scope_changed(run)
