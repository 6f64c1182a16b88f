"""An erasure request settled after each of its runs: what was done, what is left, its state.

Per class of its frozen scope: what its runs erased (deleted, or gone
already) and redacted, by their events; what of the subject or tenant is
still there within the scope's bound, and of that what a hold keeps (per
hold, with its reason) and what is left otherwise (a failure to retry, a
class the breaker held). A class that keeps on erasure is kept with its
legal basis; one the request cannot reach says why. Then:

- something left otherwise: ``executing`` (the next run takes it again);
- only held items left: ``partially_completed``, resumed once one of those
  holds is released (``selectors.erasure.erasures_due``);
- nothing left: the final re-query found nothing of the subject in any
  class it erased, so ``completed`` with ``verified_at``.

A redacted row stays (and may still carry the subject's link), so a class
that redacts counts as done when the request's last run swept it to its end
(each of its pages redacts every row of the scope it selects that no hold
covers, also rows redacted before, whose events were recorded then) and the
re-query finds no such row whose fields with a fixed redacted value (Null,
Empty, Constant) do not hold it.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Sum, Value
from django.db.models.functions import Coalesce

from retention import redaction
from retention.chain.erasure_certificate import ISSUED_IN, erasure_certificate_issue
from retention.chain.erasure_journal import PARTIAL_KEY, erasure_journal_write
from retention.models import (
    DeletionEvent,
    ErasureAction,
    ErasureRequest,
    ErasureState,
    EventOutcome,
    LegalHold,
    Policy,
    Run,
    RunStatus,
)
from retention.rows.registry import row_class
from retention.selectors.erasure import (
    row_holds_count,
    row_items,
    tracked_holds_count,
    tracked_items,
    within,
    within_q,
)
from retention.selectors.erasure_execution import erasure_plan, request_subject
from retention.selectors.holds import held_rows

logger = logging.getLogger("retention.erasure")

ERASED = (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT)
# Settled again by each run: these states are a request being executed.
SETTLING = (ErasureState.EXECUTING, ErasureState.PARTIALLY_COMPLETED)


def _done(request: ErasureRequest) -> dict[tuple[str, str], int]:
    """How many items the request's runs recorded, per (class, outcome)."""
    rows = (
        DeletionEvent.objects.filter(run__erasure=request)
        .values_list("data_class", "outcome")
        .annotate(n=Sum(Coalesce("row_count", Value(1))))
        .order_by()
    )
    return {(name, outcome): int(n or 0) for name, outcome, n in rows}


def _kept(holds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reasons = dict(
        LegalHold.objects.filter(pk__in=[h["hold"] for h in holds]).values_list("pk", "reason")
    )
    return [{**h, "reason": reasons.get(h["hold"], "")} for h in holds]


def _remaining(
    request: ErasureRequest, name: str, entry: dict[str, Any]
) -> tuple[int, int, list[dict[str, Any]]]:
    """(items still there, of them held, the holds) within the class's frozen bound."""
    who = request_subject(request)
    bound = entry.get("bound") or {}
    row = row_class(name)
    if row is None and entry.get("kind") == "rows":
        # Its registration is gone from the code: nothing can be looked at.
        return int(entry.get("count") or 0), 0, []
    if row is None:
        records = tracked_items(name, who).filter(within_q(bound))
        return records.count(), records.held().count(), tracked_holds_count(name, records)
    try:
        rows = within(row_items(row, who), bound)
        total = rows.count()
    except (ValueError, TypeError, ValidationError):
        # An id the subject field cannot hold names no row (as in the scope).
        return 0, 0, []
    held_q = held_rows(name, label=row.label, tenant_field=row.tenant_field).q(row.tenant_field)
    held = 0 if held_q is None else rows.filter(held_q).count()
    return total, held, row_holds_count(row, rows)


def _swept(last: Run | None, name: str) -> bool:
    """Whether the request's last run swept the class to its end: it finished with the
    class in it, and neither the breaker, a changed registration nor a review the
    class waits for kept its pages from it."""
    if last is None or last.status != RunStatus.FINISHED or name not in last.data_classes:
        return False
    report = last.report if isinstance(last.report, dict) else {}
    breaker = (report.get("breaker") or {}).get(name) or {}
    rules = (report.get("rules") or {}).get(name) or {}
    if breaker.get("held") or rules.get("registration_changed"):
        return False
    return not Policy.objects.filter(data_class=name).exclude(review_reason="").exists()


def _unredacted(request: ErasureRequest, name: str, entry: dict[str, Any]) -> int | None:
    """The scope's rows no hold covers whose fields with a fixed redacted value (Null,
    Empty, Constant) do not hold it: the re-query of a redacting class. None when its
    strategies all compute from the old value (a digest, a mask): nothing to compare."""
    row = row_class(name)
    if row is None:
        return None
    fixed: dict[str, Any] = {}
    for field_name, strategy in row.redact.items():
        field = row.model._meta.get_field(field_name)
        if isinstance(field, models.Field):
            constant, value = redaction.sql_constant(strategy, field)
            if constant:
                fixed[field.name] = value
    if not fixed:
        return None
    try:
        rows = within(row_items(row, request_subject(request)), entry.get("bound") or {})
    except (ValueError, TypeError, ValidationError):
        return 0
    held_q = held_rows(name, label=row.label, tenant_field=row.tenant_field).q(row.tenant_field)
    if held_q is not None:
        rows = rows.exclude(held_q)
    return rows.exclude(**fixed).count()


def _class_outcome(
    request: ErasureRequest,
    entry: dict[str, Any],
    done: dict[tuple[str, str], int],
    last: Run | None,
) -> dict[str, Any]:
    name = entry["data_class"]
    action = entry.get("on_erasure") or ""
    result: dict[str, Any] = {
        "on_erasure": action,
        "erased": sum(done.get((name, o), 0) for o in ERASED),
        "redacted": done.get((name, EventOutcome.REDACTED), 0),
        "kept": [],
        "basis": "",
        "left": 0,
        "verified": True,
    }
    if action == ErasureAction.KEEP:
        result.update(basis=entry.get("erasure_basis", ""), kept_count=int(entry.get("count") or 0))
        return result
    total, held, holds = _remaining(request, name, entry)
    if action == ErasureAction.REDACT:
        # Not swept: nothing says its rows were redacted; swept: the re-query.
        swept = _swept(last, name)
        left = (_unredacted(request, name, entry) or 0) if swept else total - held
    else:
        left = total - held
        # Gone since receipt, by this request or otherwise (retention, a
        # reconciliation): an item already gone counts as erased.
        result["erased"] = max(result["erased"], int(entry.get("count") or 0) - total)
    result.update(kept=_kept(holds) if held else [], left=left, verified=left == 0)
    return result


def _certificate(request: ErasureRequest, now: datetime) -> dict[str, Any] | None:
    """Issued again at each settling that completes or partially completes the request."""
    try:
        return erasure_certificate_issue(request, now=now)
    except ValueError as exc:
        # A certificate that would not verify is not issued; the request says so.
        logger.error("erasure request %s: no certificate issued: %s", request.pk, exc)
        return None


def erasure_settle(*, request: ErasureRequest, now: datetime) -> ErasureRequest:
    """Record what the request's runs did and move it on (see the module docstring).

    Nothing happens while one of its runs still runs (the last to end settles it).
    """
    with transaction.atomic():
        request = ErasureRequest.objects.select_for_update().get(pk=request.pk)
        if request.state not in SETTLING:
            return request
        if Run.objects.filter(erasure=request, status=RunStatus.RUNNING).exists():
            return request
        done = _done(request)
        last = Run.objects.filter(erasure=request).order_by("-started_at").first()
        # A class the request cannot reach has no outcome: its scope says why.
        classes = {
            entry["data_class"]: _class_outcome(request, entry, done, last)
            for entry in (request.scope or {}).get("classes") or []
            if entry.get("reachable")
        }
        planned = erasure_plan(request)
        left = sum(c["left"] for name, c in classes.items() if name in planned)
        kept = sum(len(c["kept"]) for name, c in classes.items() if name in planned)
        # Kept across settlings: the partial journal entry is written once.
        journaled = {k: v for k, v in (request.outcome or {}).items() if k == PARTIAL_KEY}
        request.outcome = {"classes": classes, "settled_at": now.isoformat(), **journaled}
        fields = ["outcome", "state"]
        if left:
            request.state = ErasureState.EXECUTING
        elif kept:
            request.state = ErasureState.PARTIALLY_COMPLETED
        else:
            request.state = ErasureState.COMPLETED
            request.completed_at = request.verified_at = now
            fields += ["completed_at", "verified_at"]
        if request.state in ISSUED_IN:
            request.certificate = _certificate(request, now)
            fields.append("certificate")
        request.save(update_fields=fields)
        if request.state in ISSUED_IN:
            # Outside the database, once this is committed (never before: a
            # rolled-back completion must not be in the journal).
            transaction.on_commit(partial(erasure_journal_write, request, now=now), robust=True)
    return request
