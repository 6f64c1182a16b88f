"""The one clock that decides: the database's.

Cutoffs, claim and run leases, their expiry, heartbeats, deadlines and event
times are compared across every process that shares the database, on any
number of hosts. A worker's own clock may be minutes off; if it decided, a
host running ahead would delete objects before they expire and take over
the lease of a run that is still alive. So every outer interface that
decides (the command, the tasks, ``retention.api``, the engine's page
clocks) reads :func:`db_now`, and hands it on as ``now``.

On PostgreSQL that is ``clock_timestamp()`` on the connection the engine
writes to (not ``now()``, which stays at the start of the transaction). On
SQLite and other single-process backends there is one process, and its clock
is the database's.

The host's own clock is read here only to say how far it is off
(:func:`host_clock_read`), so ``retention_check`` can name a worker
whose clock drifted.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

# The statement db_now sends (tests that freeze the Python clock pin the
# database's to it by recognising this statement: tests/conftest.py).
DB_NOW_SQL = "SELECT clock_timestamp()"


def db_now(using: str = DEFAULT_DB_ALIAS) -> datetime:
    """The database's time now, aware, in UTC."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(DB_NOW_SQL)
        (value,) = cursor.fetchone()
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    result: datetime = value.astimezone(UTC)
    return result


def db_epoch(using: str = DEFAULT_DB_ALIAS) -> float:
    """Seconds since the epoch on the database's clock (the rate gates' time)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return time.time()
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())")
        (value,) = cursor.fetchone()
    return float(value)


@dataclass(frozen=True, slots=True)
class HostClock:
    """How far this host's clock is from the database's, read at ``at`` (database time)."""

    host: str
    offset_seconds: float  # host minus database: positive when the host runs ahead
    at: datetime


def host_clock_read(using: str = DEFAULT_DB_ALIAS) -> HostClock:
    """This host's clock against the database's.

    The database's time is read between two readings of the host's, so the
    round trip does not count as skew.
    """
    before = timezone.now()
    database = db_now(using)
    after = timezone.now()
    host = before + (after - before) / 2
    offset = round((host - database).total_seconds(), 3)
    return HostClock(
        host=socket.gethostname() or "unknown host", offset_seconds=offset, at=database
    )
