"""Two pages in flight for a plain class of rows on PostgreSQL (``RowSweep``, issue 14).

The engine's thread and a second lane, each with its own connection and
keyset cursor, skip each other's locked rows. Every due row must go exactly
once, with one event, the counts exact and the chain whole; a class whose
delete runs host code (a signal) keeps to the engine's thread.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import F
from django.db.models.signals import post_delete

from retention import api
from retention.digest import key_digest
from retention.engine import run_execute, run_start
from retention.engine.rows import sweep as row_sweep
from retention.models import DeletionEvent, EventOutcome
from retention.selectors.run_rules import run_rules
from tests.helpers import chain_ok, row_events
from tests.rowhost.models import RequestLog

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DUE = 53


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that ran pages."""
    names: list[str] = []
    page = row_sweep.rows_page

    def spy(**kwargs: Any) -> Any:
        names.append(threading.current_thread().name)
        return page(**kwargs)

    monkeypatch.setattr(row_sweep, "rows_page", spy)
    return names


def _seed(now: datetime) -> set[int]:
    RequestLog.objects.bulk_create(
        [
            RequestLog(
                tenant_id=f"t{i % 4}",
                path=f"/old/{i}",
                created_at=now - timedelta(days=40, minutes=i // 2),
            )
            for i in range(DUE)
        ]
        + [RequestLog(tenant_id="t0", path="/new", created_at=now - timedelta(days=1))]
    )
    return set(RequestLog.objects.filter(path__startswith="/old/").values_list("pk", flat=True))


@pytest.mark.parametrize("evidence", ["per_row", "per_batch"])
def test_overlap__two_lanes_delete_every_due_row_once(
    register_logs: Any, make_policy: Any, now: datetime, threads: list[str], evidence: str
):
    register_logs(evidence=evidence)
    make_policy("logs.request", timedelta(days=30), batch_size=5)
    due = _seed(now)

    run = run_execute(run=run_start(mode="enforce", data_classes=["logs.request"], now=now))

    assert "MainThread" in threads
    assert any(name.startswith("retention-rows") for name in threads)
    assert list(RequestLog.objects.values_list("path", flat=True)) == ["/new"]
    events = DeletionEvent.objects.filter(run=run, outcome=EventOutcome.DELETED)
    if evidence == "per_row":
        digests = [e.key_digest for e in row_events(events)]
        assert sorted(digests) == sorted(key_digest(f"rowhost.RequestLog:{pk}") for pk in due)
    else:
        assert sum(events.values_list("row_count", flat=True)) == DUE
    run.refresh_from_db()
    assert (run.status, run.claimed, run.deleted) == ("finished", DUE, DUE)
    chain_ok()


def test_overlap__a_class_with_a_delete_signal_keeps_to_the_engines_thread(
    register_logs: Any, make_policy: Any, now: datetime, threads: list[str]
):
    register_logs(tenant_field=None)
    make_policy("logs.request", timedelta(days=30), batch_size=5)
    _seed(now)
    seen: list[str] = []

    def receiver(**kwargs: Any) -> None:
        seen.append(threading.current_thread().name)

    post_delete.connect(receiver, sender=RequestLog)
    try:
        run = run_execute(run=run_start(mode="enforce", data_classes=["logs.request"], now=now))
    finally:
        post_delete.disconnect(receiver, sender=RequestLog)

    assert set(threads) == {"MainThread"}
    assert seen == ["MainThread"] * DUE
    run.refresh_from_db()
    assert run.deleted == DUE


@pytest.fixture
def logs_class(register_logs: Any, make_policy: Any) -> None:
    register_logs()
    make_policy("logs.request", timedelta(days=30), batch_size=5)


def _agrees(run: Any, due: set[int]) -> None:
    """The run's counts, its events and the table say the same."""
    run.refresh_from_db()
    events = len(row_events(DeletionEvent.objects.filter(run=run, outcome=EventOutcome.DELETED)))
    left = RequestLog.objects.filter(pk__in=due).count()
    assert run.deleted == run.claimed == events == len(due) - left
    chain_ok()


def test_overlap__the_kill_switch_stops_both_lanes_in_a_known_state(
    logs_class: None, now: datetime, author: Any, monkeypatch: Any
):
    due = _seed(now)
    page = row_sweep.rows_page
    pages: list[str] = []

    def pause_after_three(**kwargs: Any) -> Any:
        result = page(**kwargs)
        pages.append(threading.current_thread().name)
        if len(pages) == 3:
            api.pause(by=author, reason="incident")
        return result

    monkeypatch.setattr(row_sweep, "rows_page", pause_after_three)

    run = run_execute(run=run_start(mode="enforce", data_classes=["logs.request"], now=now))

    assert run.status == "paused"
    # The other lane finishes the page it is on, and may have asked the switch
    # just before the pause committed: at most two pages more.
    assert 3 <= len(pages) <= 5
    assert RequestLog.objects.filter(pk__in=due).exists()
    _agrees(run, due)


def test_overlap__a_failed_page_of_the_second_lane_ends_the_run_in_error(
    logs_class: None, now: datetime, monkeypatch: Any
):
    due = _seed(now)
    page = row_sweep.rows_page
    second: list[int] = []

    def fail_second_lane(**kwargs: Any) -> Any:
        if threading.current_thread().name.startswith("retention-rows"):
            second.append(1)
            if len(second) == 2:
                raise RuntimeError("database went away")
        return page(**kwargs)

    monkeypatch.setattr(row_sweep, "rows_page", fail_second_lane)
    run = run_start(mode="enforce", data_classes=["logs.request"], now=now)

    with pytest.raises(RuntimeError, match="database went away"):
        run_execute(run=run)

    run.refresh_from_db()
    assert run.status == "error"
    assert "database went away" in run.status_reason
    _agrees(run, due)


def test_overlap__the_second_lane_claims_no_page_while_the_kill_switch_is_engaged(
    logs_class: None, now: datetime, author: Any, threads: list[str]
):
    due = _seed(now)
    run = run_start(mode="enforce", data_classes=["logs.request"], now=now)
    sweep = row_sweep.RowSweep(run, "logs.request", run_rules(run)["logs.request"])
    api.pause(by=author, reason="incident")

    sweep._second_lane(5)  # what its thread runs, here on the test's thread

    assert threads == []
    assert sweep.finished.get_nowait() is None
    assert RequestLog.objects.filter(pk__in=due).count() == DUE


def test_row_batch__waits_for_the_chain_head_before_the_runs_row(logs_class: None, now: datetime):
    """A queued row page takes the chain head, then the run's row, as a page of
    tracked objects finalizing beside it does. Taking the run's row first, it
    and such a page (the head held, the run's counts to write) each waited
    for the other: PostgreSQL broke the deadlock by failing one of them."""
    import time

    from django.db import connections, transaction

    from retention import engine
    from retention.engine.publish import BATCH_TASK
    from retention.engine.rows.batch import rows_batch
    from retention.models import ChainHead, Run, RunBatch

    _seed(now)
    published: list[dict[str, Any]] = []

    def publish(func: str, payload: dict[str, Any], name: str) -> None:
        if func == BATCH_TASK:
            published.append(payload)

    run = engine.run_enqueue(
        mode="enforce", trigger="command", data_classes=["logs.request"], now=now, publish=publish
    )
    engine.run_arm(run_id=run.pk, clock=lambda: now, publish=publish)
    batch = RunBatch.objects.get(token=published[0]["token"])
    ChainHead.objects.get_or_create(pk=1)
    head_held, errors = threading.Event(), []

    def finalizing_page() -> None:
        """Holds the head, then writes the run's counts, as a finalize's append does."""
        try:
            with transaction.atomic():
                ChainHead.objects.select_for_update().get(pk=1)
                head_held.set()
                time.sleep(0.5)  # meanwhile the row page runs up to the head
                Run.objects.filter(pk=run.pk).update(deleted=F("deleted") + 0)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=finalizing_page)
    thread.start()
    assert head_held.wait(10)
    more = rows_batch(run, batch, now)
    thread.join(30)

    assert errors == []
    assert more
    assert RequestLog.objects.filter(path__startswith="/old/").count() == DUE - 5
