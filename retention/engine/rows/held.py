"""A class's held rows in a run: one event per hold and tenant, counted with it.

Pages leave the rows a hold covers out of their select: nothing of them is
locked, deleted or recorded page by page. Once a run has swept a class to
its end, the rows still due that the holds cover then are recorded here,
in one transaction: per hold and tenant, one event with their count and
the Merkle root of their subjects (each row's keyed digest and deadline, as
a per-row event names a row), and the run's ``skipped_held`` grows by the
rows those events count, so the two agree (``retention_verify --runs``).
A second run over the same held rows adds as many events again, and no
row key: evidence grows with holds, not with the rows they keep.

A row under several holds is counted once, under the oldest of them
(``RowHolds.first_hold``); a row kept because one of its ``files`` is a
tracked record under a hold, under none of them (hold "0"). A run stopped
before a class's end (a limit, its time budget, the kill switch) records no
held rows of it; a hold released while the run swept leaves its rows for
the next run, as any row a page did not take.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from retention.chain.events import events_append
from retention.digest import key_digests_raw
from retention.engine.ledger import run_counts_add
from retention.engine.rows.evidence import RowEvents
from retention.engine.rows.files import held_files_q
from retention.engine.rows.measure import rows_pending
from retention.models import Run
from retention.receipts import evidence
from retention.rows.registry import RowClass
from retention.selectors.holds import held_rows
from retention.selectors.rows import as_instant as instant
from retention.selectors.run_rules import ClassRules

_CHUNK = 2000


@dataclass(slots=True)
class _Kept:
    """The rows of one hold and tenant: their count, running root and latest deadline."""

    tree: evidence.MerkleStream = field(default_factory=evidence.MerkleStream)
    latest: str = ""


def held_rows_record(*, run: Run, row: RowClass, rules: ClassRules, now: datetime) -> Counter[str]:
    """Record the class's rows kept by a hold now, once per run; return the counts added.

    Called when a run has swept the class to its end. Only what is new
    counts: a second call for the run (a batch delivered twice) records
    and counts nothing.
    """
    holds = held_rows(row.data_class, label=row.label, tenant_field=row.tenant_field)
    held = holds.q(row.tenant_field)
    # Rows one of whose objects is a tracked record under a hold stay too.
    files = held_files_q(row) if row.files else None
    if files is not None:
        held = files if held is None else held | files
    if held is None:
        return Counter()
    events = RowEvents(run=run, row=row, rules=rules, now=now)
    rows = (
        rows_pending(row, rules, run)
        .filter(held)
        .order_by(row.time_field, "pk")
        .values_list("pk", row.time_field, row.tenant_field or "pk")
    )
    groups: dict[tuple[int, Any], _Kept] = {}
    chunk: list[tuple[Any, Any, Any]] = []
    with transaction.atomic():
        for values in rows.iterator(chunk_size=_CHUNK):
            chunk.append(values)
            if len(chunk) >= _CHUNK:
                _add(chunk, groups, holds_first=holds.first_hold, row=row, period=events.period)
                chunk = []
        if chunk:
            _add(chunk, groups, holds_first=holds.first_hold, row=row, period=events.period)
        new = [
            events.held_event(
                hold_id=hold_id,
                reason=(
                    f"legal hold applies (hold {hold_id})"
                    if hold_id
                    else "one of its objects is a tracked record under a legal hold"
                ),
                tenant=tenant,
                count=kept.tree.count,
                root=kept.tree.root().hex(),
                latest=kept.latest,
            )
            for (hold_id, tenant), kept in sorted(
                groups.items(), key=lambda g: (g[0][0], "" if g[0][1] is None else str(g[0][1]))
            )
        ]
        if not new:
            return Counter()
        fresh = events_append(new, run_id=run.pk, now=now)
        counts = Counter(skipped_held=sum(e.row_count or 0 for e in fresh))
        run_counts_add(run.pk, counts)
    return counts


def _add(
    chunk: list[tuple[Any, Any, Any]],
    groups: dict[tuple[int, Any], _Kept],
    *,
    holds_first: Callable[[Any, Any], int | None],
    row: RowClass,
    period: timedelta,
) -> None:
    """Add a chunk of held rows (keyset order) to their hold's and tenant's tree."""
    stamp = evidence.stamp
    digests = key_digests_raw([f"{row.label}:{pk}" for pk, _at, _tenant in chunk])
    for (pk, at, tenant_value), raw in zip(chunk, digests, strict=True):
        tenant = tenant_value if row.tenant_field else None
        # Not under a hold on rows: one of its objects is a held tracked record (0).
        hold_id = holds_first(pk, tenant) or 0
        kept = groups.get((hold_id, tenant))
        if kept is None:
            kept = groups[(hold_id, tenant)] = _Kept()
        due = stamp(instant(at) + period)
        kept.tree.add(evidence.subject_leaf(raw.hex(), due))
        if due > kept.latest:
            kept.latest = due
