"""The deletion engine: one loop over claimed pages, run inline or through django-q2.

Modules, one concept each:

- ``rules``: each class's rules and cutoff, fixed when a run starts;
- ``leases``: the single-flight run lease;
- ``outage``: a database connection lost during a run, retried for a while,
  then one clear stop;
- ``pacing``: a run's deletes paced by their class's rate and each storage's
  (the gates themselves, shared with the hold mirror, are
  ``retention.services.rate_gates``);
- ``guard``: the foreground guard, read before a queued run publishes: the
  run waits while the host's own queue is behind;
- ``disposal``: a page's objects removed through the storage adapters;
- ``ledger``: starting, closing and counting runs;
- ``breaker``: the volume breaker, decided per class once a run is
  measured, before its first page: a class about to lose far more than is
  normal is held until an approver releases it;
- ``stepping``: when a run stops, lease arithmetic, heartbeats, retry waits;
- ``claims``: bounded pages moved to ``deleting`` under a lease;
- ``events``, ``finalize``, ``page``, ``overlap``: disposing of a page —
  its events, re-check, delete and finalize, and the next page's deletes
  in flight while one finalizes;
- ``rows``: model rows as data classes, a page at a time on the host's
  tables (a sub-package; its ``__init__`` maps its modules);
- ``measure``: what a run owes, and the dry-run report;
- ``inline`` and ``queued`` (+ ``batch``): the two executors; a queued run
  moves in bounded tasks (an arm task, then batches that claim their
  successors), so no task holds a worker for the whole run;
- ``at_write``: a zero-period object swept by a run of its own once the
  host's transaction that tracked it commits;
- ``publish``: task names and how queued runs are published;
- ``schedule``: the nightly sweep and its watchdog;
- ``erasure``: approved erasure requests executed as runs of mode
  ``erase`` (inline before a sweep, or queued), settled after each run;
- ``reconcile``: the store compared with the records, and mirrored legal
  holds with the holds (a sub-package with its own map).

Imported one way, each only from those before it: ``rules``, ``leases``,
``outage``, ``pacing``, ``guard`` ← ``disposal`` ← ``ledger`` ← ``breaker``,
``stepping``, ``claims`` ← ``events`` ← ``finalize`` ← ``page`` ←
``overlap`` ← ``rows`` ← ``measure`` ← ``inline`` ← ``at_write``, ``publish`` ←
``queued`` ← ``batch``, ``schedule``, ``erasure``, ``reconcile``. The one call back,
claims to page, imports inside its function.

The names below are the engine's entry points for the interfaces (command,
tasks, REST API, admin) and for ``retention.api``.
"""

from __future__ import annotations

from retention.engine.at_write import record_dispose_at_write
from retention.engine.batch import batch_dispose
from retention.engine.claims import Claim, ClaimedItem, records_claim, records_claim_next
from retention.engine.events import ClaimOutcome
from retention.engine.inline import run_execute
from retention.engine.ledger import (
    run_abort,
    run_counts,
    run_finish,
    run_host_clock_record,
    run_start,
)
from retention.engine.page import claim_dispose
from retention.engine.publish import BATCH_TASK, DISPATCH_TASK, run_enqueue
from retention.engine.queued import run_advance, run_arm
from retention.engine.reconcile.run import reconcile_run
from retention.engine.schedule import (
    SWEEP_SCHEDULE,
    WATCHDOG_SCHEDULE,
    ScheduleChange,
    run_resume,
    run_schedule_fire,
    runs_resume_stalled,
    schedule_slot_for,
    schedules_install,
    schedules_remove,
)

__all__ = [
    "BATCH_TASK",
    "DISPATCH_TASK",
    "SWEEP_SCHEDULE",
    "WATCHDOG_SCHEDULE",
    "Claim",
    "ClaimOutcome",
    "ClaimedItem",
    "ScheduleChange",
    "batch_dispose",
    "claim_dispose",
    "reconcile_run",
    "record_dispose_at_write",
    "records_claim",
    "records_claim_next",
    "run_abort",
    "run_advance",
    "run_arm",
    "run_counts",
    "run_enqueue",
    "run_execute",
    "run_finish",
    "run_host_clock_record",
    "run_resume",
    "run_schedule_fire",
    "run_start",
    "runs_resume_stalled",
    "schedule_slot_for",
    "schedules_install",
    "schedules_remove",
]
