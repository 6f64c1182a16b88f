"""Erasures honoured again after a restore: the journal replayed through the engine.

``retention_erasure replay`` reads the erasure journal (signed entries
beside the chain heads, ``retention.chain.erasure_journal``) and
re-executes every entry the database does not know as completed. A request
the restored database lacks is received again from its entry, approved as
it was (``replayed_at`` says so), its scope frozen within the journaled
bounds and the time of the original request (``selectors.erasure.
replay_bound``), so only data written at or before it is touched; then it
runs as any request does, with its own runs and events in the chain. A
request the database knows but had not completed is simply executed.
Running it twice changes nothing: the first run leaves each request
completed, and a completed one is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils.dateparse import parse_datetime

from retention.chain.erasure_journal import journal_known
from retention.conf import settings
from retention.digest import subject_digest
from retention.engine.erasure import erasure_start
from retention.engine.inline import run_execute
from retention.exceptions import InvalidTransition, RunRefused
from retention.models import ErasureRequest, ErasureState, Run, RunTrigger
from retention.models.erasure import OPEN_STATES
from retention.selectors.erasure import Subject, class_scope
from retention.selectors.erasure_execution import key_bound_only, replay_bound

REPLAY_REASON = "Replayed from the erasure journal after a restore (request {id}, completed {at})."


@dataclass(frozen=True, slots=True)
class Replayed:
    """What the replay did with one journal entry."""

    request: str
    # "completed already", "partially completed already", "would replay", "replayed",
    # "not replayed"
    action: str
    detail: str
    items: int = 0
    run: Run | None = None
    # Classes whose rows the replay bounded by key only (no age column).
    key_bound: tuple[str, ...] = ()


def _scope(entry: dict[str, Any]) -> tuple[Subject, dict[str, Any]]:
    subject_id = str(entry.get("subject_id") or "")
    who = Subject(
        subject_id=subject_id,
        subject_digest=subject_digest(subject_id) if subject_id else "",
        tenant_id=str(entry.get("tenant_id") or ""),
    )
    bounds = entry.get("bounds") or {}
    written_by = str(entry.get("received_at") or "")
    classes = [
        class_scope(
            name, who, record_bound=0, bound=replay_bound(name, bounds.get(name) or {}, written_by)
        )
        for name in entry.get("data_classes") or []
    ]
    return who, {"classes": classes, "total": sum(c["count"] for c in classes)}


def _receive_again(entry: dict[str, Any], now: datetime) -> ErasureRequest:
    who, scope = _scope(entry)
    received = parse_datetime(str(entry.get("received_at"))) or now
    open_one = (
        ErasureRequest.objects.filter(
            state__in=OPEN_STATES, subject_digest=who.subject_digest, tenant_id=who.tenant_id
        )
        .values_list("pk", flat=True)
        .first()
    )
    if open_one is not None:
        raise InvalidTransition(f"an open request for the same subject exists: {open_one}")
    with transaction.atomic():
        return ErasureRequest.objects.create(
            id=entry["request"],
            state=ErasureState.APPROVED,
            subject_id=who.subject_id,
            subject_digest=who.subject_digest,
            tenant_id=who.tenant_id,
            data_classes=list(entry.get("data_classes") or []),
            reason=REPLAY_REASON.format(id=entry["request"], at=entry.get("completed_at")),
            requested_by=None,
            received_at=received,
            # A new answer period: the original one has passed.
            due_at=now + settings.ERASURE_DUE,
            approved_at=parse_datetime(str(entry.get("approved_at"))) or now,
            replayed_at=now,
            scope=scope,
        )


def erasures_replay(
    *, entries: list[dict[str, Any]], clock: Callable[[], datetime], dry_run: bool = False
) -> list[Replayed]:
    """Replay the journal's entries the database does not know as completed (oldest first)."""
    done: list[Replayed] = []
    for entry in sorted(entries, key=lambda e: str(e.get("completed_at"))):
        request_id = str(entry.get("request"))
        known = ErasureRequest.objects.filter(pk=request_id).first()
        if journal_known(entry, known.state if known is not None else None):
            assert known is not None
            done.append(
                Replayed(
                    request_id, f"{known.state.replace('_', ' ')} already", "the database knows it"
                )
            )
            continue
        if dry_run:
            items = known.scope.get("total", 0) if known is not None else _scope(entry)[1]["total"]
            why = "lacks it" if known is None else f"has it {known.state}"
            done.append(Replayed(request_id, "would replay", f"the database {why}", items))
            continue
        try:
            request = known or _receive_again(entry, clock())
            run = erasure_start(request=request, now=clock(), trigger=RunTrigger.COMMAND)
        except IntegrityError as exc:
            done.append(Replayed(request_id, "not replayed", f"could not be received again: {exc}"))
            continue
        except (RunRefused, InvalidTransition) as exc:
            done.append(Replayed(request_id, "not replayed", str(exc)))
            continue
        if run is not None:
            run = run_execute(run=run, clock=clock)
        request.refresh_from_db()
        items = int(request.scope.get("total", 0))
        by_key = tuple(n for n in entry.get("data_classes") or [] if key_bound_only(n))
        done.append(Replayed(request_id, "replayed", f"now {request.state}", items, run, by_key))
    return done
