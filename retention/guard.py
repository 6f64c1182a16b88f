"""Kept for hosts' settings: the foreground guard lives in ``retention.engine.guard``.

``RETENTION_FOREGROUND_GUARD = "retention.guard.oldest_queued_task_age"`` was
the documented default until issue 27, and a host's own signal returns a
``retention.guard.GuardReading``: both still resolve through this module, as
do the module's other public names (a signal of a host's may wrap them).
"""

from __future__ import annotations

from retention.engine.guard import (
    DEFAULT_SIGNAL,
    BrokerKind,
    GuardReading,
    broker_kind,
    foreground_guard_read,
    oldest_queued_task_age,
)

__all__ = [
    "DEFAULT_SIGNAL",
    "BrokerKind",
    "GuardReading",
    "broker_kind",
    "foreground_guard_read",
    "oldest_queued_task_age",
]
