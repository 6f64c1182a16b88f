"""``events_append``'s ``also``: a caller's write that goes in with the events.

A page hands its run counts to the append, which on PostgreSQL runs them in
the statement that advances the chain. Whatever the path (new events,
events recorded already, a ``known_new`` guess that was wrong), the write
runs exactly once, and rolls back with the events.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import pytest
from django.db import transaction

from retention.chain.events import NewEvent, events_append
from retention.engine.ledger import run_counts_sql
from retention.models import DeletionEvent, EventBatch, Run, RunMode, RunStatus

pytestmark = pytest.mark.django_db


def _run(now: datetime) -> Run:
    return Run.objects.create(
        mode=RunMode.ENFORCE, status=RunStatus.RUNNING, started_at=now, cutoff=now
    )


def _events(run: Run, version: Any, now: datetime, keys: list[str]) -> list[NewEvent]:
    return [
        NewEvent(
            idempotency_key=key,
            record_id=None,
            run_id=run.pk,
            tenant_id="t1",
            data_class="logs.request",
            policy_version_id=version.pk,
            policy_key="logs.request",
            policy_version_number=version.number,
            disposition="delete",
            outcome="deleted",
            attempt=1,
            reason="",
            key_digest="0" * 64,
            expires_at=now,
            occurred_at=now,
            kind="row",
            row_count=1,
        )
        for key in keys
    ]


def _append(
    run: Run, version: Any, now: datetime, keys: list[str], known_new: bool = False, **counts: int
) -> list[Any]:
    """Append the events named ``keys``, with ``counts`` added to the run's as their ``also``."""
    return events_append(
        _events(run, version, now, keys),
        run_id=run.pk,
        now=now,
        known_new=known_new,
        also=run_counts_sql(run.pk, Counter(counts)),
    )


@pytest.mark.parametrize("known_new", [False, True])
def test_events_append__also_runs_once_with_new_events(
    make_policy: Any, now: datetime, known_new: bool
):
    version, run = make_policy("logs.request"), _run(now)

    with transaction.atomic():
        fresh = _append(run, version, now, ["a", "b"], known_new, deleted=2, claimed=2)

    run.refresh_from_db()
    assert (run.deleted, run.claimed, len(fresh)) == (2, 2, 2)
    assert EventBatch.objects.count() == 1


@pytest.mark.parametrize("known_new", [False, True])
def test_events_append__also_runs_once_when_the_events_are_recorded_already(
    make_policy: Any, now: datetime, known_new: bool
):
    version, run = make_policy("logs.request"), _run(now)
    with transaction.atomic():
        events_append(_events(run, version, now, ["a"]), run_id=run.pk, now=now)

    with transaction.atomic():
        # "a" is recorded: with known_new, the insert is refused and the look-up runs.
        fresh = _append(run, version, now, ["a", "b"], known_new, deleted=1)
    with transaction.atomic():
        nothing = _append(run, version, now, ["b"], deleted=1)

    run.refresh_from_db()
    assert [e.idempotency_key for e in fresh] == ["b"]
    assert nothing == []
    assert run.deleted == 2
    assert DeletionEvent.objects.count() == 2


def test_events_append__also_runs_without_events_and_rolls_back_with_them(
    make_policy: Any, now: datetime
):
    version, run = make_policy("logs.request"), _run(now)
    events_append([], run_id=run.pk, now=now, also=run_counts_sql(run.pk, Counter(failed=3)))
    with pytest.raises(RuntimeError), transaction.atomic():
        _append(run, version, now, ["a"], failed=5)
        raise RuntimeError("the page fails after its events")

    run.refresh_from_db()
    assert run.failed == 3
    assert DeletionEvent.objects.count() == 0
