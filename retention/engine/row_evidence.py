"""The events of model rows: one per row, or one per page (``evidence="per_batch"``).

A row is named by a keyed digest of its model label and primary key, never
by its field values. A page event carries the count, the first and last
primary keys and a keyed digest over the page's keys, so an auditor holding
the table can recompute it. Both kinds go into the same hash chain as the
events of tracked objects, in the page's transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from retention.digest import key_digest, key_digests
from retention.engine.ledger import run_counts_sql
from retention.engine.rules import ClassRules
from retention.models import EventKind, EventOutcome, Run
from retention.rows.registry import RowClass
from retention.services.evidence import NewEvent, events_append

# (pk, time, tenant) of a row, as pages read them.
Row = tuple[Any, datetime, Any]
DISPOSED = (EventOutcome.DELETED, EventOutcome.REDACTED)

# Set while a page is done again after its events met a recorded key.
_look_up: ContextVar[bool] = ContextVar("retention_row_keys_looked_up", default=False)


@contextmanager
def keys_looked_up() -> Iterator[None]:
    """Within it, a page's events look their keys up before they are appended."""
    token = _look_up.set(True)
    try:
        yield
    finally:
        _look_up.reset(token)


@dataclass(slots=True)
class PageGroup:
    """A tenant's rows of a page, as its ``per_batch`` event names them."""

    tenant: Any
    count: int
    keys: str  # the rows' primary keys in keyset order, one a line: the digest is over it
    first: Any
    last: Any
    latest_at: datetime


class RowEvents:
    """Collects a page's events, then appends them to the chain in one batch."""

    def __init__(self, *, run: Run, row: RowClass, rules: ClassRules, now: datetime) -> None:
        self.run, self.row, self.rules, self.now = run, row, rules, now
        self.events: list[NewEvent] = []
        # Rows cut by their age are due at time + period; rows with a deadline at it.
        self.period = timedelta(0)
        if not row.by_expiry and rules.row_cutoff is not None:
            self.period = run.started_at - rules.safety_margin - rules.row_cutoff

    def _event(
        self,
        *,
        key: str,
        outcome: str,
        digest: str,
        tenant: Any,
        due: datetime,
        reason: str,
        count: int | None = None,
        first: Any = "",
        last: Any = "",
    ) -> NewEvent:
        assert self.rules.version_id is not None and self.rules.version_number is not None
        return NewEvent(
            idempotency_key=key[:200],
            record_id=None,
            run_id=self.run.pk,
            tenant_id="" if tenant is None else str(tenant),
            data_class=self.row.data_class,
            policy_version_id=self.rules.version_id,
            policy_key=self.row.data_class,
            policy_version_number=self.rules.version_number,
            disposition=self.rules.disposition,
            outcome=outcome,
            attempt=1,
            reason=reason[:2000],
            key_digest=digest,
            expires_at=due,
            occurred_at=self.now,
            kind=EventKind.ROW,
            row_count=count,
            first_pk="" if first == "" else str(first),
            last_pk="" if last == "" else str(last),
        )

    def _key_parts(self, outcome: str) -> tuple[str, str, str]:
        """(version and model, disposition, run suffix) of an event's idempotency key.

        A row is deleted or redacted once; it is skipped (held, protected) or
        fails again in every run that meets it, and each run records that.
        """
        per_run = "" if outcome in DISPOSED else f":{self.run.pk}"
        return f"{self.rules.version_id}:{self.row.label}", self.rules.disposition, per_run

    def add(self, outcome: str, rows: Sequence[Row], *, reason: str = "") -> None:
        if not rows:
            return
        if self.row.evidence == "per_row":
            base, disposition, per_run = self._key_parts(outcome)
            label = self.row.label
            digests = key_digests([f"{label}:{r[0]}" for r in rows])
            for (_pk, at, tenant), digest in zip(rows, digests, strict=True):
                key = f"{base}:{digest}:{disposition}"
                if outcome not in DISPOSED:
                    key = f"{key}:{outcome}{per_run}"
                self.events.append(
                    self._event(
                        key=key,
                        outcome=outcome,
                        digest=digest,
                        tenant=tenant,
                        due=at + self.period,
                        reason=reason,
                    )
                )
            return
        # One event per tenant of the page: receipts stay per tenant.
        tenants: dict[Any, list[Row]] = {}
        for r in rows:
            tenants.setdefault(r[2], []).append(r)
        groups = [
            PageGroup(
                tenant=tenant,
                count=len(part),
                keys="\n".join([str(r[0]) for r in part]),
                first=part[0][0],
                last=part[-1][0],
                latest_at=max(r[1] for r in part),
            )
            for tenant, part in tenants.items()
        ]
        self.add_groups(outcome, groups, reason=reason)

    def add_groups(self, outcome: str, groups: Sequence[PageGroup], *, reason: str = "") -> None:
        """A ``per_batch`` page's events, one per tenant (the groups of its rows)."""
        base, disposition, per_run = self._key_parts(outcome)
        for group in sorted(groups, key=lambda g: "" if g.tenant is None else str(g.tenant)):
            digest = key_digest(group.keys)
            self.events.append(
                self._event(
                    key=f"{base}:{disposition}:{outcome}:page:{digest}{per_run}",
                    outcome=outcome,
                    digest=digest,
                    tenant=group.tenant,
                    due=group.latest_at + self.period,
                    reason=reason,
                    count=group.count,
                    first=group.first,
                    last=group.last,
                )
            )

    def append(self, *, counts: Counter[str] | None = None) -> None:
        """Append the collected events, with the page's run ``counts`` (inside its transaction).

        Events of rows disposed of in this transaction are new: their rows
        were there, locked, until now. Their keys are not looked up first;
        should one exist all the same (a primary key used again), the
        insert is refused, the page rolls back (``EventsRecorded``), and
        ``rows_page`` does it again under ``keys_looked_up()``.
        """
        also = run_counts_sql(self.run.pk, counts) if counts else None
        trusted = not _look_up.get() and all(e.outcome in DISPOSED for e in self.events)
        events_append(
            self.events,
            run_id=self.run.pk,
            now=self.now,
            known_new="page" if trusted else False,
            also=also,
        )
        self.events = []
