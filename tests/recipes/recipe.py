"""What every recipe test does with its class: dry-run, enforce, hold, run again.

Each recipe seeds rows of the real package's model, then calls ``exercise``
with what the policy says must become of them. Every row of the table is
compared before and after each run, so a row touched that should not be
fails the test, not only a count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.db import models

from retention import api
from retention.engine import run_execute, run_start
from retention.models import Run
from retention.rows.checks import check_row_classes

Snapshot = dict[Any, dict[str, Any]]


def snapshot(model: type[models.Model]) -> Snapshot:
    """Every row of the model's table (its base manager: proxies' siblings too), by pk."""
    names = [f.attname for f in model._meta.concrete_fields]
    return {row["pk"]: row for row in model._base_manager.values("pk", *names)}


def run(now: datetime, data_class: str, *, mode: str = "enforce") -> Run:
    started = run_start(mode=mode, data_classes=[data_class], now=now)
    return run_execute(run=started, clock=lambda: now)


def errors_of(data_class: str) -> list[str]:
    """The check messages of the registration, but the index warning (its own tests)."""
    return [
        f"{m.id}: {m.msg}"
        for m in check_row_classes()
        if repr(data_class) in m.msg and m.id != "retention.W004"
    ]


def exercise(
    *,
    model: type[models.Model],
    data_class: str,
    now: datetime,
    due: Iterable[Any],
    redacted: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    seed_more: Callable[[], Iterable[Any]],
    placed_by: Any,
) -> dict[str, Run]:
    """Dry run, enforcing run, then a hold and a second run; checks every row each time.

    ``due``: pks the policy disposes of. ``redacted``: for a redacting class,
    a row as it must read once redacted (from the row as it was); None for a
    deleting class. ``seed_more``: adds due rows after the first run and
    returns their pks; the hold must keep them, and every other row, as they are.
    """
    due = set(due)
    assert errors_of(data_class) == []
    before = snapshot(model)
    assert due <= set(before)

    dry = run(now, data_class, mode="dry_run")

    assert (dry.status, dry.eligible) == ("finished", len(due))
    assert snapshot(model) == before

    enforced = run(now, data_class)

    assert enforced.status == "finished", enforced.status_reason
    after = snapshot(model)
    if redacted is None:
        assert enforced.deleted == len(due)
        assert after == {pk: row for pk, row in before.items() if pk not in due}
    else:
        assert (enforced.redacted, enforced.deleted) == (len(due), 0)
        assert after == {pk: (redacted(row) if pk in due else row) for pk, row in before.items()}
        assert all(after[pk] != before[pk] for pk in due)

    more = set(seed_more())
    assert more
    api.place_hold(reason="litigation", placed_by=placed_by, data_class=data_class, now=now)
    held = snapshot(model)

    second = run(now, data_class)

    assert second.status == "finished", second.status_reason
    assert (second.deleted, second.redacted) == (0, 0)
    assert second.skipped_held == len(more), (second.skipped_held, second.eligible, len(more))
    assert snapshot(model) == held
    return {"dry_run": dry, "enforce": enforced, "held": second}
