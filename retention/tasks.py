"""django-q2 entry points. Thin: read the database's clock, call the engine, report.

Installed by ``retention_schedule`` (the sweep, the watchdog, the weekly
reconciliation) or published by the engine (a queued run's arm task, its
batches) and by the holds (a large scope's Object Lock batches). Each is
safe to run twice. Their dotted paths are a contract with tasks already
sitting in a broker: an upgrade keeps them.
"""

from __future__ import annotations

from typing import Any

from retention import engine
from retention.chain.anchors import chain_anchor_due
from retention.chain.erasure_journal import erasure_journals_write
from retention.clock import db_now, host_clock_read
from retention.engine.erasure import erasures_enqueue
from retention.models import RunTrigger
from retention.services.hold_mirror import hold_mirror_continue, hold_mirrors_resume


def run_scheduled(**_schedule: Any) -> str | None:
    """The scheduled sweep: start (or join) the run of the current cron slot."""
    run = engine.run_schedule_fire(now=db_now())
    return str(run.pk) if run is not None else None


def reconcile_scheduled(**_schedule: Any) -> str:
    """The weekly reconciliation: compare every store in use with the records."""
    run = engine.reconcile_run(trigger=RunTrigger.SCHEDULE, now=db_now())
    return str(run.pk)


def runs_resume() -> int:
    """The watchdog: advance queued runs that no batch carries on any more,
    start the erasure requests that are due, anchor the chain head when it
    moved and RETENTION_ANCHOR_INTERVAL has passed, journal the completed
    erasures not written yet, and publish again the Object Lock mirrors of
    holds that stalled."""
    now = db_now()
    resumed = len(engine.runs_resume_stalled(now=now))
    # Erasure requests due (approved, past a grace period, a hold released)
    # whose run nobody started, or whose last run left something.
    resumed += len(erasures_enqueue(now=now))
    chain_anchor_due(now=now)
    erasure_journals_write(now=now)
    hold_mirrors_resume(now=now)
    return resumed


def run_resume(run_id: str) -> str:
    """A queued run's own resumption, fired by its one-off schedule (no watchdog needed)."""
    return engine.run_resume(run_id=run_id, now=db_now())


def run_dispatch(payload: dict[str, Any]) -> str:
    """Arm a queued run: measure it and publish its first batches (one bounded unit)."""
    engine.run_host_clock_record(payload["run_id"], host_clock_read())
    return engine.run_arm(run_id=payload["run_id"])


def batch_dispose(payload: dict[str, Any]) -> dict[str, int]:
    """One batch of a queued run; it notes how far this worker's clock is from the database's."""
    engine.run_host_clock_record(payload["run_id"], host_clock_read())
    return dict(engine.batch_dispose(payload=payload).counts)


def erasure_execute(payload: dict[str, Any]) -> int:
    """Published when an erasure request is approved: start the queued runs of the due
    requests (this one, unless its grace period still runs); returns how many started."""
    return len(erasures_enqueue(now=db_now()))


def hold_mirror(payload: dict[str, Any]) -> int:
    """One batch of a legal hold's Object Lock mirror; it publishes the next (one bounded unit)."""
    return hold_mirror_continue(payload=payload)
