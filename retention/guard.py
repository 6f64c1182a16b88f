"""Kept for hosts' settings: the foreground guard lives in ``retention.engine.guard``.

``RETENTION_FOREGROUND_GUARD = "retention.guard.oldest_queued_task_age"`` was
the documented default until issue 27, and a host's own signal returns a
``retention.guard.GuardReading``: both still resolve through this module.
"""

from __future__ import annotations

from retention.engine.guard import GuardReading, oldest_queued_task_age

__all__ = ["GuardReading", "oldest_queued_task_age"]
