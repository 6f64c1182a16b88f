"""A hold committed by another connection while a row page is under way (PostgreSQL).

The page's statement that locks and re-checks its rows runs in READ
COMMITTED: a hold another session committed before that statement started
must keep its rows, on the one-statement lane and on the collector's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models.signals import post_delete

from retention import api
from retention.engine import run_execute, run_start
from retention.engine.rows import sweep as row_sweep
from tests.engine.rows.test_engine import _logs
from tests.helpers import on_own_connection
from tests.rowhost.models import RequestLog

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _on_delete_receiver(sender: Any, **kwargs: Any) -> None:
    pass


def _place_elsewhere(author: Any, now: datetime) -> None:
    """Place a tenant hold on t1 from another connection, committed when this returns."""
    thread, result = on_own_connection(
        lambda: api.place_hold(reason="t1", placed_by=author, tenant_id="t1", now=now)
    )
    thread.join(30)
    assert "error" not in result and not thread.is_alive()


@pytest.mark.parametrize("receiver", [False, True], ids=["one_statement", "collector"])
def test_delete__a_hold_another_session_commits_before_the_page_select_keeps_its_rows(
    register_logs: Any,
    make_policy: Any,
    author: Any,
    now: datetime,
    receiver: bool,
    monkeypatch: pytest.MonkeyPatch,
):
    # One lane of pages: a second one's statement may start before the hold
    # commits, and would rightly take the rows.
    monkeypatch.setattr(row_sweep.RowSweep, "_overlaps", lambda self: False)
    register_logs()
    make_policy("logs.request", timedelta(days=30), batch_size=10)
    _logs(now, old=2, new=0, tenant="t1")
    _logs(now, old=2, new=0, tenant="t2")
    done = {"placed": False}

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        # Right before the first page's select starts, inside its transaction.
        if not done["placed"] and '"rowhost_requestlog"' in sql and " LIMIT " in sql:
            done["placed"] = True
            print("TRIGGER", sql[:200])
            _place_elsewhere(author, now)
        return execute(sql, params, many, context)

    if receiver:  # a delete receiver: the page goes through Django's collector
        post_delete.connect(_on_delete_receiver, sender=RequestLog)
    try:
        run = run_start(mode="enforce", data_classes=["logs.request"], now=now)
        with connection.execute_wrapper(wrapper):
            run = run_execute(run=run, clock=lambda: now)
    finally:
        post_delete.disconnect(_on_delete_receiver, sender=RequestLog)

    assert done["placed"]
    assert sorted(RequestLog.objects.values_list("tenant_id", flat=True)) == ["t1", "t1"]
    assert (run.deleted, run.skipped_held) == (2, 2)
