"""django-q2 entry points. Thin: read the clock, call the engine, report.

Installed by ``retention_schedule`` (the sweep and the watchdog) or published
by the engine (dispatchers, batches, continuations). Each is safe to run
twice. Their dotted paths are a contract with tasks already sitting in a
broker: an upgrade keeps them.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from retention import engine


def run_scheduled(**_schedule: Any) -> str | None:
    """The scheduled sweep: start (or join) the run of the current cron slot."""
    run = engine.run_schedule_fire(now=timezone.now())
    return str(run.pk) if run is not None else None


def runs_resume() -> int:
    """The watchdog: give queued runs without a live dispatcher a new one."""
    return len(engine.runs_resume_stalled(now=timezone.now()))


def run_dispatch(payload: dict[str, Any]) -> str:
    return engine.run_dispatch(
        run_id=payload["run_id"], budget_seconds=engine.task_budget_seconds()
    )


def batch_dispose(payload: dict[str, Any]) -> dict[str, int]:
    return dict(engine.batch_dispose(payload=payload).counts)
