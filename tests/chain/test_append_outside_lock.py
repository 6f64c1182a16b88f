"""A page's events are copied before its batch takes the chain head (issue 31).

Workers take turns only on linking a batch's root to the head and the
commit, not on copying a thousand events. PostgreSQL only: elsewhere the
append is one serialized transaction.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from django.db import connection, transaction

from retention.chain.events import events_append
from retention.engine.ledger import run_counts_sql
from retention.models import ChainHead, DeletionEvent, EventBatch
from retention.selectors.evidence import VerifyResult, chain_verify
from tests.chain.test_evidence_append import _events, _run
from tests.helpers import blocked_statement, on_own_connection

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _has_written_events(pid: int) -> bool:
    """Whether backend ``pid``'s transaction has inserted into the events table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_locks WHERE pid = %s AND relation = %s::regclass "
            "AND mode = 'RowExclusiveLock' AND granted",
            [pid, DeletionEvent._meta.db_table],
        )
        return cursor.fetchone() is not None


def _verified() -> bool:
    result = [r for r in chain_verify() if isinstance(r, VerifyResult)][-1]
    return result.ok


def test_append__copies_its_events_while_another_append_holds_the_head(make_policy, now):
    version = make_policy("logs.request")
    run = _run(now)
    ChainHead.objects.get_or_create(pk=1)
    holding, release = threading.Event(), threading.Event()
    pid: dict[str, int] = {}

    def first() -> None:
        with transaction.atomic():
            events_append(_events(run, version, now, ["a1", "a2"]), run_id=run.pk, now=now)
            holding.set()  # the head is locked until this commits
            release.wait(timeout=30)

    def second() -> None:
        connection.ensure_connection()
        pid["value"] = connection.connection.info.backend_pid
        with transaction.atomic():
            events_append(
                _events(run, version, now, [f"b{i}" for i in range(500)]),
                run_id=run.pk,
                now=now,
                known_new=True,
                also=run_counts_sql(run.pk, Counter(deleted=500)),
            )

    holder, held = on_own_connection(first)
    assert holding.wait(timeout=10)
    waiter, waited = on_own_connection(second)
    try:
        blocked, copied = None, False
        for _ in range(200):
            blocked = blocked_statement(pid["value"]) if "value" in pid else None
            if blocked:
                copied = _has_written_events(pid["value"])
                break
            time.sleep(0.05)
    finally:
        release.set()
        holder.join(timeout=30)
        waiter.join(timeout=30)
    assert "error" not in held and "error" not in waited, (held, waited)
    # It waited on the head's link, with its events already copied.
    assert blocked is not None and blocked.startswith("WITH old AS")
    assert copied
    batches = list(EventBatch.objects.order_by("seq").values_list("size", flat=True))
    assert batches == [2, 500]
    assert DeletionEvent.objects.filter(idempotency_key__startswith="b").count() == 500
    assert run.__class__.objects.get(pk=run.pk).deleted == 500
    assert _verified()


def test_append__a_refused_copy_takes_no_seq_and_the_chain_stays_whole(make_policy, now):
    version = make_policy("logs.request")
    run = _run(now)
    events_append(_events(run, version, now, ["k1"]), run_id=run.pk, now=now)

    # A known_new guess that is wrong: the copy is refused before the head is touched.
    fresh = events_append(
        _events(run, version, now, ["k1", "k2"]), run_id=run.pk, now=now, known_new=True
    )

    assert [e.idempotency_key for e in fresh] == ["k2"]
    assert list(EventBatch.objects.order_by("seq").values_list("seq", flat=True)) == [1, 2]
    assert _verified()
