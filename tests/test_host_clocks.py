"""Hosts whose clocks are 5 minutes off decide nothing: the database's clock does (issue 26).

Each test moves this process's clock with freezegun (ticking) while
PostgreSQL's ``clock_timestamp()`` stays real: an injected host clock, as a
worker host 5 minutes ahead or behind would have. The commands run as on
that host.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from freezegun import freeze_time

from retention.models import (
    DeletionEvent,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunLease,
    RunStatus,
)
from tests.helpers import database_now, exists, put_tracked

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

AHEAD = timedelta(minutes=5)
BEHIND = -AHEAD
PERIOD = timedelta(days=30)


@pytest.fixture
def host_clock() -> Callable[[timedelta], AbstractContextManager[Any]]:
    """This process's clock moved by ``offset`` and ticking; the database's stays real."""

    def moved(offset: timedelta) -> AbstractContextManager[Any]:
        return freeze_time(datetime.now(UTC) + offset, tick=True)

    return moved


def expiring(minutes: list[float], *, prefix: str) -> list[RetentionRecord]:
    """Tracked objects whose deadline is ``minutes`` after the database's now."""
    start = database_now()
    return [
        put_tracked(
            data_class="pod.scan",
            key=f"{prefix}/{n:03d}.bin",
            now=start - PERIOD + timedelta(minutes=m),
        )
        for n, m in enumerate(minutes)
    ]


def states(records: list[RetentionRecord]) -> set[str]:
    return set(
        RetentionRecord.objects.filter(pk__in=[r.pk for r in records]).values_list(
            "state", flat=True
        )
    )


def test_host_clock__a_run_on_a_host_five_minutes_ahead_deletes_nothing_before_its_expiry(
    host_clock: Any, make_policy: Any
) -> None:
    make_policy("pod.scan", PERIOD)
    # 60 objects expiring 1 to 4 minutes from now (the database's now), 10 expired.
    young = expiring([1 + 3 * i / 59 for i in range(60)], prefix="young")
    expired = expiring([-1.0] * 10, prefix="expired")
    before = database_now()

    with host_clock(AHEAD):
        call_command("run_retention", stdout=StringIO(), stderr=StringIO())

    assert not DeletionEvent.objects.filter(record__in=[r.pk for r in young]).exists()
    assert states(young) == {RecordState.ACTIVE}
    assert all(exists(r) for r in young)
    run = Run.objects.get()
    assert run.status == RunStatus.FINISHED
    assert before <= run.cutoff <= database_now()
    assert states(expired) == {RecordState.DELETED}
    assert run.deleted == 10


def test_host_clock__a_trigger_five_minutes_ahead_leaves_the_live_run_of_a_host_behind_alone(
    host_clock: Any, make_policy: Any, settings: Any
) -> None:
    settings.RETENTION_RUN_LEASE_SECONDS = 300
    make_policy("pod.scan", PERIOD)
    expiring([-1.0] * 5, prefix="expired")
    # A queued run accepted on a host 5 minutes behind: alive, its lease
    # runs 5 minutes from the database's now. No worker takes it here.
    with host_clock(BEHIND):
        call_command("run_retention", "--enqueue", stdout=StringIO(), stderr=StringIO())
    live = Run.objects.get()
    assert live.status == RunStatus.RUNNING

    with host_clock(AHEAD), pytest.raises(CommandError, match="lease_held"):
        call_command("run_retention", stdout=StringIO(), stderr=StringIO())

    live.refresh_from_db()
    assert live.status == RunStatus.RUNNING  # not marked abandoned
    assert live.lease_expires_at is not None and live.lease_expires_at > database_now()
    assert RunLease.objects.get(data_class="pod.scan").run_id == live.pk
    second = Run.objects.exclude(pk=live.pk).get()
    assert second.status == RunStatus.REFUSED
    # No second sweep: nothing was claimed or deleted.
    assert not DeletionEvent.objects.exists()
    assert set(RetentionRecord.objects.values_list("state", flat=True)) == {RecordState.ACTIVE}


def test_host_clock__the_ledger_of_runs_on_hosts_ahead_and_behind_has_the_database_times(
    host_clock: Any, make_policy: Any
) -> None:
    make_policy("pod.scan", PERIOD)
    first = expiring([-2.0] * 5, prefix="first")
    before = database_now()
    with host_clock(AHEAD):
        call_command("run_retention", stdout=StringIO(), stderr=StringIO())
    # Objects that expired a minute ago are due on a host 5 minutes behind too.
    second = expiring([-1.0] * 5, prefix="second")
    with host_clock(BEHIND):
        call_command("run_retention", stdout=StringIO(), stderr=StringIO())
    after = database_now()

    runs = list(Run.objects.order_by("started_at"))
    assert [r.status for r in runs] == [RunStatus.FINISHED, RunStatus.FINISHED]
    assert [r.deleted for r in runs] == [5, 5]
    assert states(first + second) == {RecordState.DELETED}
    for run in runs:
        assert before <= run.started_at <= run.finished_at <= after  # type: ignore[operator]
        assert before <= run.cutoff <= after
    events = DeletionEvent.objects.filter(outcome=EventOutcome.DELETED)
    assert events.count() == 10
    for event in events:
        assert before <= event.occurred_at <= after
    deleted_at = RetentionRecord.objects.values_list("deleted_at", flat=True)
    assert all(at is not None and before <= at <= after for at in deleted_at)


def check_json() -> tuple[bool, dict[str, Any]]:
    out = StringIO()
    try:
        call_command("retention_check", "--json", stdout=out)
    except CommandError:
        return False, json.loads(out.getvalue())
    return True, json.loads(out.getvalue())


def test_check__a_host_clock_further_than_the_limit_from_the_database_fails_clock_skew(
    host_clock: Any, make_policy: Any, settings: Any
) -> None:
    make_policy("pod.scan", PERIOD)
    expiring([-1.0], prefix="expired")
    with host_clock(AHEAD):
        call_command("run_retention", stdout=StringIO(), stderr=StringIO())

    ok, report = check_json()

    assert not ok and report["ok"] is False
    workers = report["workers"]
    assert workers["broken"] == ["clock_skew"]
    (host,) = workers["hosts"]
    assert 295 <= host["offset_seconds"] <= 305 and host["skewed"] is True
    assert host["run_id"] == str(Run.objects.get().pk)
    out = StringIO()
    with pytest.raises(CommandError, match="clock_skew: a worker's clock is more than 60 seconds"):
        call_command("retention_check", stdout=out)
    assert "seconds ahead of the database" in out.getvalue()
    assert "SKEWED" in out.getvalue()

    settings.RETENTION_CLOCK_SKEW_SECONDS = 600
    assert check_json()[0]


def test_check__a_host_a_few_seconds_off_is_within_the_limit(
    host_clock: Any, make_policy: Any
) -> None:
    make_policy("pod.scan", PERIOD)
    with host_clock(timedelta(seconds=10)):
        call_command("run_retention", stdout=StringIO(), stderr=StringIO())

    ok, report = check_json()

    assert ok, report
    (host,) = report["workers"]["hosts"]
    assert 5 <= host["offset_seconds"] <= 15 and host["skewed"] is False
