"""django-q2 entry points. Thin: read the clock, call one service, report.

Installed by ``retention_schedule`` (the sweep and the watchdog) or published
by the dispatcher (batches, continuations). Each is safe to run twice.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django_q.conf import Conf  # type: ignore[import-untyped]

from retention.services.dispatch import (
    batch_dispose as _batch_dispose,
)
from retention.services.dispatch import (
    run_dispatch as _run_dispatch,
)
from retention.services.dispatch import (
    run_schedule_fire,
    runs_resume_stalled,
)


def run_scheduled(**_schedule: Any) -> str | None:
    """The scheduled sweep: start (or join) the run of the current cron slot."""
    run = run_schedule_fire(now=timezone.now())
    return str(run.pk) if run is not None else None


def runs_resume() -> int:
    """The watchdog: give queued runs without a live dispatcher a new one."""
    return len(runs_resume_stalled(now=timezone.now()))


def run_dispatch(payload: dict[str, Any]) -> str:
    # End well before the worker's timeout would kill the task mid-claim; a
    # continuation task carries on.
    budget = Conf.TIMEOUT * 0.8 if Conf.TIMEOUT else None
    return _run_dispatch(run_id=payload["run_id"], budget_seconds=budget)


def batch_dispose(payload: dict[str, Any]) -> dict[str, int]:
    return dict(_batch_dispose(payload=payload).counts)
