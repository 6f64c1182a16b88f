"""A lost database connection during a run: retried for a while, then one clear stop.

A PostgreSQL restart or failover drops every connection for a few seconds.
Each database step of a run (a claim, a page's finalize, a heartbeat) is
done again once the connection is back, with backoff, for up to
``RETENTION_DATABASE_RETRY_SECONDS``; every step is safe to repeat (a
finalize only touches rows still leased to its claim, and an event's
idempotency key records nothing twice). Past that the run stops with
``DatabaseUnavailable``, whose message is the one line the command prints.

An inline run on PostgreSQL also holds a session advisory lock while it
works: its process's liveness, kept by a thread of its own (``Liveness``).
When its process stops (the database was away too long, a kill), the lock
goes with its session, and the next trigger closes the run as ``abandoned``
within seconds instead of waiting for its lease to lapse
(``runs_abandon_orphaned``). A live process takes its lock back within
``LIVENESS_GRACE_SECONDS`` of the database answering again; one that cannot
(its old session still holds it) stops before its next page.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial, wraps
from typing import ParamSpec, TypeVar

from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connection,
    connections,
    transaction,
)

from retention.conf import settings
from retention.models import (
    DISPOSING_MODES,
    RecordState,
    RetentionRecord,
    Run,
    RunExecutor,
    RunLease,
    RunStatus,
)

logger = logging.getLogger("retention.engine")

T = TypeVar("T")
P = ParamSpec("P")

# The first key of the run's advisory lock: "LETH", so no other user of
# two-key advisory locks is likely to collide with it.
_LOCK_NAMESPACE = 0x4C455448
LIVENESS_KEY = "liveness"
ORPHANED_REASON = (
    "database unavailable: the run's process lost its database connection and stopped; "
    "closed when the database was back"
)


# How long a run's lock must stay free before the run is closed: well past
# what a live process's liveness thread needs to take it back (it tries
# every ``_KEEP_EVERY`` seconds).
LIVENESS_GRACE_SECONDS = 3.0
_KEEP_EVERY = 0.5


class LivenessLost(Exception):
    """The run could not hold its liveness lock: it must not go on deleting."""


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
    once the database answers again.
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
        return result


def retried(what: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A step every call of which is done with ``db_retry`` (``what`` names it in the log)."""

    def wrap(step: Callable[P, T]) -> Callable[P, T]:
        @wraps(step)
        def retried_step(*args: P.args, **kwargs: P.kwargs) -> T:
            return db_retry(partial(step, *args, **kwargs), what=what)

        return retried_step

    return wrap


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


class Liveness:
    """An inline run's liveness lock, held by a thread on a connection of its own.

    The run's own connection may sit in a page's storage call for a minute,
    or be lost without the run knowing yet: this thread's looks at its
    session every ``_KEEP_EVERY`` seconds and, once that session is gone (a
    database restart, a network blip), takes the lock back on a new one as
    soon as the database answers, whatever the run is doing. When it cannot
    for ``RETENTION_DATABASE_RETRY_SECONDS`` (the database stays away, the
    old session still holds the lock) or the run was closed meanwhile, the
    run is told (``check``) and stops before its next page.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.lost: str | None = None
        # Lost because the database is away: the run stops as any step of
        # it would then (``DatabaseUnavailable``, one line).
        self.down = False
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take the lock (PostgreSQL); raise ``LivenessLost`` when it cannot be taken."""
        if connection.vendor != "postgresql":
            return
        self._thread = threading.Thread(
            target=self._keep, name=f"retention-liveness-{self.run.pk}", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        self.check()

    def check(self) -> None:
        """Raise ``LivenessLost`` once the lock could not be kept: no page after that."""
        if self.lost is not None and self.down:
            raise DatabaseUnavailable(self.lost)
        if self.lost is not None:
            raise LivenessLost(self.lost)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _keep(self) -> None:
        holding = False
        deadline: float | None = None
        try:
            while True:
                try:
                    if holding:
                        _ping()
                    else:
                        if not liveness_take(self.run):
                            raise LivenessLost("its lock is held by another session")
                        holding = True
                        # Taken back: another trigger may have closed the run
                        # while this process could not answer for it.
                        closed = (
                            self._ready.is_set()
                            and not Run.objects.filter(
                                pk=self.run.pk, status=RunStatus.RUNNING
                            ).exists()
                        )
                        if closed:
                            self.lost = "liveness lost: the run was closed meanwhile"
                            return
                    deadline = None
                    self._ready.set()
                except Exception as exc:
                    holding = False
                    _close_quietly()
                    if deadline is None:
                        deadline = time.monotonic() + settings.DATABASE_RETRY_SECONDS
                    if time.monotonic() >= deadline:
                        self.down = isinstance(exc, (OperationalError, InterfaceError))
                        self.lost = (
                            f"database unavailable: {_one_line(exc)}"
                            if self.down
                            else f"liveness lock could not be held: {_one_line(exc)}"
                        )
                        return
                if self._stop.wait(_KEEP_EVERY):
                    return
        finally:
            self._ready.set()
            if holding:
                liveness_drop(self.run)
            connections.close_all()


def _ping() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


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
    """Close inline runs whose process is gone: their liveness lock stays free.

    Only runs that took the lock (``report["liveness"]``), on PostgreSQL; any
    other run waits for its lease to lapse, as before. A lock seen free is
    looked at again ``LIVENESS_GRACE_SECONDS`` later, unless the run's lease
    lapsed already: a live process whose session was lost (a restart, a
    network blip) has taken it back by then, and its run is left alone. A
    process that comes back later finds its run closed and its lease gone,
    and stops.
    """
    if connection.vendor != "postgresql":
        return 0
    running = Run.objects.filter(
        status=RunStatus.RUNNING,
        mode__in=DISPOSING_MODES,
        executor=RunExecutor.INLINE,
        report__has_key=LIVENESS_KEY,
    )
    candidates = dict(running.values_list("pk", "lease_owner"))
    if not candidates:
        return 0
    free = _lock_free(candidates)
    lapsed = set(
        running.filter(pk__in=free, lease_expires_at__lte=now).values_list("pk", flat=True)
    )
    if free - lapsed:
        time.sleep(LIVENESS_GRACE_SECONDS)
        free = lapsed | _lock_free(free)
    closed = 0
    for run_id, lease_owner in candidates.items():
        if run_id not in free:
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


def _lock_free(run_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Of these runs, those whose liveness lock no session holds now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s AND objsubid = 2",
            [_LOCK_NAMESPACE],
        )
        alive = {(row[0] if row[0] < (1 << 31) else row[0] - (1 << 32)) for row in cursor}
    return {run_id for run_id in run_ids if _lock_key(run_id) not in alive}
