"""Erasure requests executed by the engine: each step a run of mode ``erase``.

An approved request (past its ``not_before``) is executed by a run of mode
``erase`` over its frozen scope (``ledger.run_start(erasure=)``), with the
claims, re-checks, pacing, kill switch, leases and evidence of any run:
inline by ``run_retention`` (before its own sweep, or alone with
``--erasures``), queued when it is approved (``retention.tasks``) and by the
watchdog. When its run ends the request is settled
(``services.erasure_settle``): completed once a final re-query finds nothing
left, partially completed while holds keep some of it (it goes on by itself
once one is released), executing while anything else is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from django.db import transaction

from retention.engine.inline import ProgressFn, run_execute
from retention.engine.leases import runs_abandon_stale
from retention.engine.ledger import run_start
from retention.engine.outage import as_unavailable
from retention.engine.publish import run_enqueue
from retention.exceptions import InvalidTransition, RunRefused
from retention.formatting import human
from retention.models import ErasureRequest, ErasureState, Run, RunExecutor, RunMode, RunTrigger
from retention.selectors.control import kill_switch_paused
from retention.selectors.erasure_execution import erasure_plan, erasures_due
from retention.services.erasure_settle import SETTLING, erasure_settle

logger = logging.getLogger("retention.engine")

# What may be executed: approved, or being executed already.
EXECUTABLE = (ErasureState.APPROVED, *SETTLING)


def _begin(request: ErasureRequest, now: datetime) -> ErasureRequest | None:
    """Mark the request executing; None when it has nothing to dispose of (then settled)."""
    with transaction.atomic():
        request = ErasureRequest.objects.select_for_update().get(pk=request.pk)
        if request.state not in EXECUTABLE:
            raise InvalidTransition(
                f"{request} cannot be executed: it is {request.state} (an approved one can)."
            )
        if request.not_before is not None and request.not_before > now:
            raise InvalidTransition(
                f"{request} may not execute before {human(request.not_before)}."
            )
        if request.state == ErasureState.APPROVED:
            request.state = ErasureState.EXECUTING
            request.save(update_fields=["state"])
    if not erasure_plan(request):
        # Nothing to dispose of (an unknown subject, only classes that keep):
        # settled at once.
        erasure_settle(request=request, now=now)
        return None
    return request


def erasure_start(
    *,
    request: ErasureRequest,
    now: datetime,
    executor: str = RunExecutor.INLINE,
    trigger: str = RunTrigger.ERASURE,
) -> Run | None:
    """Start the request's next run (queued: published to the workers); None when it had
    nothing to dispose of and is settled already. Raises RunRefused as ``run_start`` does
    (kill switch, a class's lease held): the request stays as it was, for the next trigger."""
    begun = _begin(request, now)
    if begun is None:
        return None
    if executor == RunExecutor.QUEUE:
        return run_enqueue(mode=RunMode.ERASE, trigger=trigger, erasure=begun, now=now)
    return run_start(mode=RunMode.ERASE, trigger=trigger, erasure=begun, now=now)


def _started(clock: Callable[[], datetime], *, verb: str, **start: Any) -> Iterator[Run]:
    """Start a run for each due request (``erasure_start``'s arguments), one at a time.

    Nothing starts while paused (a refused run a request would be no news);
    a dead process's erase run is closed first, so its request is due; a
    request whose run is refused (a lease another run holds) is left for the
    next trigger and logged.
    """
    if kill_switch_paused():
        return
    runs_abandon_stale(clock())
    for request in erasures_due(now=clock()):
        try:
            run = erasure_start(request=request, now=clock(), **start)
        except (RunRefused, InvalidTransition) as exc:
            logger.warning(
                "erasure request %s not %s now: %s",
                request.pk,
                verb,
                exc,
                extra={"erasure_id": str(request.pk)},
            )
            continue
        if run is not None:
            yield run


def erasures_execute(
    *,
    clock: Callable[[], datetime],
    progress: ProgressFn | None = None,
    max_seconds: float | None = None,
) -> list[Run]:
    """Run every due erasure request inline, one after the other (``run_retention``).

    One whose run fails is closed with its error; the others, and the
    caller's sweep, go on.
    """
    runs: list[Run] = []
    for run in _started(clock, verb="executed", trigger=RunTrigger.COMMAND):
        try:
            run = run_execute(run=run, clock=clock, progress=progress, max_seconds=max_seconds)
        except Exception as exc:
            if as_unavailable(exc) is not None:
                raise
            run.refresh_from_db()
        runs.append(run)
    return runs


def erasures_enqueue(*, now: datetime) -> list[Run]:
    """Publish a queued run for every due erasure request (the watchdog, approval)."""
    return list(_started(lambda: now, verb="queued", executor=RunExecutor.QUEUE))
