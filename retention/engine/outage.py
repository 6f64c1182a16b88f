"""A lost database connection during a run: retried for a while, then one clear stop.

A PostgreSQL restart or failover drops every connection for a few seconds.
Each database step of a run (a claim, a page's finalize, a heartbeat) is
done again once the connection is back, with backoff, for up to
``RETENTION_DATABASE_RETRY_SECONDS``; every step is safe to repeat (a
finalize only touches rows still leased to its claim, and an event's
idempotency key records nothing twice). Past that the run stops with
``DatabaseUnavailable``, whose message is the one line the command prints.

An inline run on PostgreSQL also holds a session advisory lock while it
works: its connection's liveness. When its process stops (the database was
away too long, a kill), the lock goes with its session, and the next
trigger closes the run at once as ``abandoned`` instead of waiting for its
lease to lapse (``runs_abandon_orphaned``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction

from retention.conf import settings
from retention.models import (
    RecordState,
    RetentionRecord,
    Run,
    RunExecutor,
    RunLease,
    RunMode,
    RunStatus,
)

logger = logging.getLogger("retention.engine")

T = TypeVar("T")

# The first key of the run's advisory lock: "LETH", so no other user of
# two-key advisory locks is likely to collide with it.
_LOCK_NAMESPACE = 0x4C455448
LIVENESS_KEY = "liveness"
ORPHANED_REASON = (
    "database unavailable: the run's process lost its database connection and stopped; "
    "closed when the database was back"
)


class DatabaseUnavailable(Exception):
    """The database did not come back within ``RETENTION_DATABASE_RETRY_SECONDS``."""


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection is gone (not a lock timeout, not a bad query)."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return False
    try:
        return not connection.is_usable()
    except Exception:
        return True


def db_retry(
    step: Callable[[], T],
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    reconnected: Callable[[], object] | None = None,
) -> T:
    """Run ``step``; while the connection is lost, wait for it and run it again.

    Only outside a transaction: inside one, the caller's own transaction is
    what must be done again, so the error goes up to it. ``reconnected`` runs
    once the database answers again (the run takes its liveness lock back).
    """
    deadline: float | None = None
    delay = 0.25
    while True:
        try:
            result = step()
        except (OperationalError, InterfaceError) as exc:
            if connection.in_atomic_block or not connection_lost(exc):
                raise
            detail = _one_line(exc)
            if deadline is None:
                deadline = monotonic() + settings.DATABASE_RETRY_SECONDS
                logger.warning(
                    "database connection lost (%s); retrying for up to %.0f s",
                    what,
                    settings.DATABASE_RETRY_SECONDS,
                )
            _close_quietly()
            left = deadline - monotonic()
            if left <= 0:
                raise DatabaseUnavailable(f"database unavailable: {detail}") from None
            sleep(min(delay, left))
            delay = min(delay * 2, 5.0)
            continue
        if deadline is not None:
            logger.warning("database connection back (%s); the run goes on", what)
            if reconnected is not None:
                reconnected()
            # A new session: the run working on this thread takes its liveness lock back.
            hook = _on_reconnect.get(threading.get_ident())
            if hook is not None and hook is not reconnected:
                hook()
        return result


# What a thread's run does once its connection is back (``liveness_take``),
# whichever of its steps found the connection lost. Django's connections
# are per thread, and so is this.
_on_reconnect: dict[int, Callable[[], object]] = {}


def on_reconnect(hook: Callable[[], object] | None) -> None:
    """Set (None: clear) what this thread's run does once a lost connection is back."""
    if hook is None:
        _on_reconnect.pop(threading.get_ident(), None)
    else:
        _on_reconnect[threading.get_ident()] = hook


def as_unavailable(exc: BaseException) -> DatabaseUnavailable | None:
    """``exc`` as the run's stop, when it is (or comes from) a lost connection."""
    if isinstance(exc, DatabaseUnavailable):
        return exc
    if isinstance(exc, DatabaseError) and connection_lost(exc):
        return DatabaseUnavailable(f"database unavailable: {_one_line(exc)}")
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _close_quietly() -> None:
    try:
        connection.close()
    except Exception:
        # The server is gone; the next query opens a new connection.
        connection.connection = None


def _lock_key(run_id: uuid.UUID | str) -> int:
    # A signed int4 from the run id: the second key of the advisory lock.
    value = zlib.crc32(str(run_id).encode())
    return value - (1 << 32) if value >= (1 << 31) else value


def page_token(run: Run) -> uuid.UUID:
    """A fresh claim token that says whose it is: the run's lease owner's first half.

    When the run's process is gone, ``runs_abandon_orphaned`` frees the
    rows of its pages in flight by that half, at once.
    """
    return uuid.UUID(bytes=run.lease_owner.bytes[:8] + os.urandom(8))


def _page_tokens(lease_owner: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID]:
    head = lease_owner.bytes[:8]
    return uuid.UUID(bytes=head + bytes(8)), uuid.UUID(bytes=head + b"\xff" * 8)


def liveness_take(run: Run) -> bool:
    """Hold the run's advisory lock on this connection (PostgreSQL; False elsewhere)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_NAMESPACE, _lock_key(run.pk)])
        (taken,) = cursor.fetchone() or (False,)
    if taken and not (isinstance(run.report, dict) and run.report.get(LIVENESS_KEY)):
        report = dict(run.report) if isinstance(run.report, dict) else {}
        report[LIVENESS_KEY] = "advisory_lock"
        Run.objects.filter(pk=run.pk).update(report=report)
        run.report = report
    return bool(taken)


def liveness_drop(run: Run) -> None:
    if connection.vendor != "postgresql":
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_unlock(%s, %s)", [_LOCK_NAMESPACE, _lock_key(run.pk)]
            )
    except DatabaseError:
        # A session that is gone holds no lock.
        pass


def runs_abandon_orphaned(now: datetime) -> int:
    """Close inline runs whose process is gone, at once: their liveness lock is free.

    Only runs that took the lock (``report["liveness"]``), on PostgreSQL; any
    other run waits for its lease to lapse, as before. A process that comes
    back later finds its run closed and its lease gone, and stops.
    """
    if connection.vendor != "postgresql":
        return 0
    candidates = dict(
        Run.objects.filter(
            status=RunStatus.RUNNING,
            mode=RunMode.ENFORCE,
            executor=RunExecutor.INLINE,
            report__has_key=LIVENESS_KEY,
        ).values_list("pk", "lease_owner")
    )
    if not candidates:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s AND objsubid = 2",
            [_LOCK_NAMESPACE],
        )
        alive = {(row[0] if row[0] < (1 << 31) else row[0] - (1 << 32)) for row in cursor}
    closed = 0
    for run_id, lease_owner in candidates.items():
        if _lock_key(run_id) in alive:
            continue
        with transaction.atomic():
            done = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(
                status=RunStatus.ABANDONED,
                status_reason=ORPHANED_REASON,
                finished_at=now,
                lease_expires_at=None,
            )
            if done:
                RunLease.objects.filter(run_id=run_id).update(run=None, owner=None, expires_at=None)
                # Its pages in flight: claimable now, and probed by their next claimer.
                low, high = _page_tokens(lease_owner)
                RetentionRecord.objects.filter(
                    state=RecordState.DELETING, lease_owner__gte=low, lease_owner__lte=high
                ).update(lease_expires_at=now)
        if done:
            closed += 1
            logger.warning(
                "run %s closed as abandoned: its process stopped (database unavailable)",
                run_id,
                extra={"run_id": str(run_id)},
            )
    return closed
