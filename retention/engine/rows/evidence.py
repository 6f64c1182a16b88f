"""The events of model rows: one per row, or one per page (``evidence="per_batch"``).

A row is named by a keyed digest of its model label and primary key, never
by its field values. A ``per_batch`` page event carries the count, the first
and last primary keys and a keyed digest over the page's keys, so an auditor
holding the table can recompute it. Both kinds go into the same hash chain as
the events of tracked objects, in the page's transaction.

``per_row`` evidence is one event per row in a compact shape: a page event
per tenant and outcome stores its rows' subjects (digest and deadline) and
commits to them through their Merkle root, and each row's idempotency key
(policy version + row + disposition) goes into ``RowEventKey``. A full event
row per deleted row, with its seven indexes, cost four times the delete.
The keys are written before the chain's lock is taken, so concurrent pages
only queue for the page events themselves.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from django.conf import settings as django_settings
from django.db import models

from retention.chain.events import EventsRecorded, NewEvent, events_append
from retention.chain.row_keys import row_keys_record
from retention.digest import key_digest, key_digests_raw
from retention.engine.ledger import run_counts_sql
from retention.models import EventKind, EventOutcome, Run
from retention.receipts import evidence
from retention.rows.registry import RowClass
from retention.selectors.rows import as_instant as instant
from retention.selectors.run_rules import ClassRules

# (pk, time, tenant) of a row, as pages read them.
Row = tuple[Any, datetime, Any]
# (pk, tenant, deadline as ``evidence.stamp`` spells it) of a row of a per-row page.
StampedRow = tuple[Any, Any, str]
DISPOSED = (EventOutcome.DELETED, EventOutcome.REDACTED)

# A row's idempotency key (policy version + row + disposition, and for an
# outcome recorded per run, the outcome and the run) is stored in 128 bits
# (``RowEventKey``). For an integer primary key: 64 bits of SHA-256 of the
# rest, then the key itself (offset to sort as unsigned), so a page's rows,
# consecutive in a log, write neighbouring index entries: random keys cost
# twice as much a page at a million rows and grow with the table. Otherwise
# the first 128 bits of SHA-256 of the whole key, the row named by its digest.
INT_KEY_OFFSET = 1 << 63

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


_P = ParamSpec("_P")
_T = TypeVar("_T")


def new_events_trusted(page: Callable[_P, _T]) -> Callable[_P, _T]:
    """A page whose events are trusted to be new (its rows were there, locked).

    Should one be recorded already (``EventsRecorded``: the page rolled
    back), the page is done again with its keys looked up.
    """

    @wraps(page)
    def trusted_page(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return page(*args, **kwargs)
        except EventsRecorded:
            with keys_looked_up():
                return page(*args, **kwargs)

    return trusted_page


@dataclass(slots=True)
class PageGroup:
    """A tenant's rows of a page, as its ``per_batch`` event names them."""

    tenant: Any
    count: int
    keys: str  # the rows' primary keys in keyset order, one a line: the digest is over it
    first: Any
    last: Any
    latest_at: datetime


@dataclass(slots=True)
class Subjects:
    """A tenant's rows of a page under one outcome, for their per-row page event.

    Per row, in keyset order: its primary key, its deadline, its leaf under
    the event, its stored subject (digest and deadline) and its idempotency
    key (32 hex digits: ``RowEventKey``).
    """

    outcome: str
    tenant: Any
    reason: str
    # Their keys written already, by the statement that disposed of them (no ``keys``).
    recorded: bool = False
    pks: list[Any] = field(default_factory=list)
    dues: list[str] = field(default_factory=list)
    leaves: list[bytes] = field(default_factory=list)
    packed: list[bytes] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)

    def keep(self, new: set[str]) -> None:
        """Keep the rows whose keys are ``new``: leave out those recorded before."""
        kept = [i for i, key in enumerate(self.keys) if key in new]
        if len(kept) == len(self.keys):
            return
        for name in ("pks", "dues", "leaves", "packed", "keys"):
            values = getattr(self, name)
            setattr(self, name, [values[i] for i in kept])


def _latest(dues: Sequence[str]) -> datetime:
    """The latest of rows' deadlines as ``evidence.stamp`` spells them (one
    spelling, fixed width: the greatest string is the latest instant); naive
    without USE_TZ, as stamp read it."""
    latest = datetime.fromisoformat(max(dues))
    return latest if django_settings.USE_TZ else latest.replace(tzinfo=None)


class RowEvents:
    """Collects a page's events, then appends them to the chain in one batch."""

    def __init__(self, *, run: Run, row: RowClass, rules: ClassRules, now: datetime) -> None:
        self.run, self.row, self.rules, self.now = run, row, rules, now
        self.events: list[NewEvent] = []
        # By (outcome, reason, tenant, keys recorded): one page event each.
        self.subjects: dict[tuple[str, str, Any, bool], Subjects] = {}
        self.int_keys = isinstance(row.model._meta.pk, models.IntegerField)
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
            self._add_subjects(outcome, rows, reason)
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
                    due=instant(group.latest_at) + self.period,
                    reason=reason,
                    count=group.count,
                    first=group.first,
                    last=group.last,
                )
            )

    def _add_subjects(self, outcome: str, rows: Sequence[Row], reason: str) -> None:
        """``per_row``: each row under its tenant's page event of this outcome."""
        period, stamp = self.period, evidence.stamp
        self.add_stamped(
            outcome,
            [(pk, tenant, stamp(instant(at) + period)) for pk, at, tenant in rows],
            reason=reason,
        )

    def held_event(
        self, *, hold_id: int, reason: str, tenant: Any, count: int, root: str, latest: str
    ) -> NewEvent:
        """The event of the run's rows of the class kept under hold ``hold_id`` for
        ``tenant``: their count and the Merkle root of their subjects (``evidence.HELD``).

        One per run, class, hold and tenant, whatever the number of rows: the
        rows' keys are not recorded (``RowEventKey``), nor their subjects.
        """
        base, disposition, per_run = self._key_parts(EventOutcome.SKIPPED_HELD)
        scope = hashlib.sha256(f"{hold_id}:{'' if tenant is None else tenant}".encode())
        event = self._event(
            key=f"{base}:{disposition}:{EventOutcome.SKIPPED_HELD}:held:"
            f"{scope.hexdigest()[:32]}{per_run}",
            outcome=EventOutcome.SKIPPED_HELD,
            digest=root,
            tenant=tenant,
            due=_latest([latest]),
            reason=reason,
            count=count,
        )
        event.evidence = evidence.HELD
        return event

    def _key_affixes(self, outcome: str) -> tuple[str, str]:
        """(prefix, suffix) of a row's idempotency key around the row's digest."""
        base, disposition, per_run = self._key_parts(outcome)
        suffix = f":{disposition}" if outcome in DISPOSED else f":{disposition}:{outcome}{per_run}"
        return f"{base}:", suffix

    def int_key_scope(self, outcome: str) -> str | None:
        """The first 16 hex digits of a row's key of ``outcome``, when its primary key
        is an integer (``INT_KEY_OFFSET``): the rest is the key itself."""
        if not self.int_keys:
            return None
        prefix, suffix = self._key_affixes(outcome)
        return hashlib.sha256(f"{prefix}{suffix}".encode()).hexdigest()[:16]

    def statement_key_scope(self, outcome: str) -> str | None:
        """``int_key_scope``, for a statement disposing of rows to write their keys
        with; None when the page looks its keys up instead (``keys_looked_up``)."""
        return None if _look_up.get() else self.int_key_scope(outcome)

    def add_stamped(
        self,
        outcome: str,
        rows: Sequence[StampedRow],
        *,
        reason: str = "",
        keys_recorded: bool = False,
    ) -> None:
        """``per_row`` rows given with their deadlines spelled (``evidence.stamp``) already.

        ``keys_recorded``: the statement that disposed of the rows wrote their
        keys too (``int_key_scope``). The inner loop of a per-row page (a
        thousand rows): one keyed digest and one leaf hash a row (and a key),
        strings built directly (``evidence.subject_leaf`` spells the same
        leaf; a test holds them equal).
        """
        prefix, suffix = self._key_affixes(outcome)
        sha256 = hashlib.sha256
        scope = None if keys_recorded else self.int_key_scope(outcome)
        digests = key_digests_raw([f"{self.row.label}:{r[0]}" for r in rows])
        groups = self.subjects
        for (pk, tenant, due), raw in zip(rows, digests, strict=True):
            group = groups.get((outcome, reason, tenant, keys_recorded))
            if group is None:
                group = Subjects(outcome, tenant, reason, keys_recorded)
                groups[(outcome, reason, tenant, keys_recorded)] = group
            digest = raw.hex()
            group.pks.append(pk)
            group.dues.append(due)
            group.leaves.append(
                sha256(f'\x00{{"expires_at":"{due}","key_digest":"{digest}"}}'.encode()).digest()
            )
            group.packed.append(raw + due.encode())
            if keys_recorded:
                continue
            group.keys.append(
                f"{scope}{pk + INT_KEY_OFFSET:016x}"
                if scope
                else sha256(f"{prefix}{digest}{suffix}".encode()).hexdigest()[:32]
            )

    def _subject_events(self, *, trusted: bool) -> None:
        """Record the rows' keys, then add one page event per group of new rows.

        Trusted (rows disposed of in this transaction), a recorded key raises
        ``EventsRecorded`` on PostgreSQL; otherwise, and on SQLite, rows whose
        keys are recorded are left out.
        """
        groups = sorted(
            self.subjects.values(),
            key=lambda g: (g.outcome, g.reason, "" if g.tenant is None else str(g.tenant)),
        )
        self.subjects = {}
        new = row_keys_record([key for g in groups for key in g.keys], trusted=trusted)
        for group in groups:
            if not group.recorded:
                group.keep(new)
            if group.pks:
                self.events.append(self._subject_event(group))

    def _subject_event(self, group: Subjects) -> NewEvent:
        root = evidence.merkle_root(group.leaves).hex()
        base, disposition, per_run = self._key_parts(group.outcome)
        event = self._event(
            key=f"{base}:{disposition}:{group.outcome}:rows:{root}{per_run}",
            outcome=group.outcome,
            digest=root,
            tenant=group.tenant,
            due=_latest(group.dues),
            reason=group.reason,
            # Its rows are named by their digests only: no primary key range
            # tells a tenant how many rows of others lie between its own.
            count=len(group.pks),
        )
        event.evidence = evidence.PER_ROW
        event.row_subjects = b"".join(group.packed)
        return event

    def append(self, *, counts: Counter[str] | None = None) -> None:
        """Append the collected events, with the page's run ``counts`` (inside its transaction).

        Events of rows disposed of in this transaction are new: their rows
        were there, locked, until now. Their keys are not looked up first;
        should one exist all the same (a primary key used again), the
        insert is refused, the page rolls back (``EventsRecorded``), and
        ``rows_page`` does it again under ``keys_looked_up()``.
        """
        also = run_counts_sql(self.run.pk, counts) if counts else None
        trusted = (
            not _look_up.get()
            and all(e.outcome in DISPOSED for e in self.events)
            and all(outcome in DISPOSED for outcome, _reason, _tenant, _done in self.subjects)
        )
        if self.subjects:
            # Before the chain's lock: a page's thousand keys do not hold it.
            self._subject_events(trusted=trusted)
        events_append(
            self.events,
            run_id=self.run.pk,
            now=self.now,
            known_new="page" if trusted else False,
            also=also,
        )
        self.events = []
