"""Settings of the ``qcluster`` and commands that tests start as subprocesses.

The project's own settings (so REDIS_URL picks the Redis broker, as in
production), with leases short enough for a test to watch a crashed run
converge in seconds rather than minutes.
"""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403
from config.settings import Q_CLUSTER

RETENTION_LEASE_SECONDS = float(os.environ.get("RETENTION_LEASE_SECONDS", "300"))
RETENTION_RUN_LEASE_SECONDS = float(os.environ.get("RETENTION_RUN_LEASE_SECONDS", "300"))
RETENTION_DISPATCHER_LEASE_SECONDS = float(
    os.environ.get("RETENTION_DISPATCHER_LEASE_SECONDS", "60")
)
RETENTION_DATABASE_RETRY_SECONDS = float(os.environ.get("RETENTION_DATABASE_RETRY_SECONDS", "60"))
Q_CLUSTER["poll"] = 0.2
# django-q2's guard calls the scheduler once its counter (the cycle, added
# every loop) reaches 30: a 30 s cycle makes its first loop, at start, a
# tick. A test of a schedule asks for it rather than wait 30 s for the tick.
if "Q_GUARD_CYCLE" in os.environ:
    Q_CLUSTER["guard_cycle"] = float(os.environ["Q_GUARD_CYCLE"])
# The project's default (pages for up to 2 s a batch task) unless a test asks.
if "RETENTION_BATCH_SECONDS" in os.environ:
    RETENTION_BATCH_SECONDS = float(os.environ["RETENTION_BATCH_SECONDS"])
# A test's own foreground signal (tests/queue/headroom.py), when it asks.
if "RETENTION_FOREGROUND_GUARD" in os.environ:
    RETENTION_FOREGROUND_GUARD = os.environ["RETENTION_FOREGROUND_GUARD"]
