"""The erasure journal: one signed entry per completed request, outside the database.

A database restored from a dump taken before an erasure brings the
subject's data back, and with it no trace of the request. So when a request
completes, an entry goes to ``RETENTION_EVIDENCE_ANCHOR`` beside the signed
chain heads (``erasures/<request id>.json``), written once and never
overwritten, signed with ``RETENTION_SIGNING_KEY``::

    {"format": "lethe-erasure-journal-v1", "request": "<uuid>",
     "subject_id": "<as the host gave it>", "subject_digest": "<hex>",
     "tenant_id": "acme", "data_classes": ["idv.photo", ...],
     "received_at": "...Z", "approved_at": "...Z", "completed_at": "...Z",
     "bounds": {"idv.photo": {"max_record_id": 41}, ...},
     "counts": {"idv.photo": {"erased": 4, "redacted": 0}, ...},
     "certificate_sha256": "<hex>", "key_id": "<16 hex>", "signature": "<base64>"}

It keeps the subject's id as given: it is a suppression record, the one
thing that lets ``retention_erasure replay`` find the subject's rows again
after a restore (their digest cannot name a row). Hosts pass a stable
internal id, never an email. Once the entry is written the database
forgets the id (the request keeps its digest).

Writing never fails what called it: a failure is logged, ``journaled_at``
stays empty, and the watchdog writes it later (``erasure_journals_write``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from retention.anchoring.signing import Signer
from retention.anchoring.stores import AnchorExists, AnchorStore, AnchorStoreError, anchor_store
from retention.conf import settings
from retention.formatting import human_text
from retention.models import ErasureRequest, ErasureState
from retention.receipts.signed_heads import AnchorError, canonical, signature_check
from retention.selectors.anchors import anchoring_on, signing_key
from retention.selectors.erasure_execution import erasure_plan

logger = logging.getLogger("retention.erasure")

FORMAT = "lethe-erasure-journal-v1"
JOURNAL_DIR = "erasures"


# A request partially completed (holds keep some of it) has erased the rest:
# its entry is written then too, under a name of its own, and the completed
# one follows when the holds are released.
PARTIAL = ErasureState.PARTIALLY_COMPLETED
JOURNALED = (ErasureState.COMPLETED, PARTIAL)
PARTIAL_KEY = "journaled_partial"


def journal_name(request_id: Any, *, partial: bool = False) -> str:
    return f"{JOURNAL_DIR}/{request_id}{'.partial' if partial else ''}.json"


def _z(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def certificate_sha256(certificate: Any) -> str:
    """The hash a journal entry records of the request's certificate (canonical JSON)."""
    body = json.dumps(certificate, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


def journal_entry(request: ErasureRequest, signer: Signer) -> dict[str, Any]:
    """The request's signed entry (see the module docstring)."""
    plan = erasure_plan(request)
    classes = (request.outcome or {}).get("classes") or {}
    entry: dict[str, Any] = {
        "format": FORMAT,
        "request": str(request.pk),
        "subject_id": request.subject_id,
        "subject_digest": request.subject_digest,
        "tenant_id": request.tenant_id,
        "data_classes": sorted(plan),
        "state": str(request.state),
        "received_at": _z(request.received_at),
        "approved_at": _z(request.approved_at),
        "completed_at": _z(request.completed_at),
        "settled_at": (request.outcome or {}).get("settled_at"),
        "bounds": {name: entry.get("bound") or {} for name, entry in sorted(plan.items())},
        "counts": {
            name: {
                "erased": int((classes.get(name) or {}).get("erased") or 0),
                "redacted": int((classes.get(name) or {}).get("redacted") or 0),
            }
            for name in sorted(plan)
        },
        "certificate_sha256": certificate_sha256(request.certificate),
        "key_id": signer.key_id,
    }
    entry["signature"] = base64.b64encode(signer.sign(canonical(entry))).decode()
    return entry


@dataclass(frozen=True, slots=True)
class JournalRead:
    """The journal as read back: the entries a trusted key signed, and what was wrong."""

    entries: list[dict[str, Any]]
    problems: list[str]


def journal_read(*, store: AnchorStore, public_keys: dict[str, bytes]) -> JournalRead:
    """Every entry of the journal, its signature checked; a bad one is a problem, not an entry."""
    entries: list[dict[str, Any]] = []
    problems: list[str] = []
    for name in store.names(JOURNAL_DIR):
        try:
            entry = json.loads(store.get(name))
        except (AnchorStoreError, ValueError) as exc:
            problems.append(f"{name}: unreadable ({exc})")
            continue
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            problems.append(f"{name}: not an erasure journal entry")
            continue
        statement = {k: v for k, v in entry.items() if k != "signature"}
        wrong = signature_check(
            statement, str(entry.get("key_id")), str(entry.get("signature")), public_keys
        )
        if wrong is not None:
            problems.append(f"{name}: {wrong}")
            continue
        partial = entry.get("state") == PARTIAL
        if name != journal_name(entry.get("request"), partial=partial):
            problems.append(f"{name}: names request {entry.get('request')}, not its own")
            continue
        entries.append(entry)
    return JournalRead(_latest(entries), problems)


def _latest(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per request: the completed one when there is one."""
    kept: dict[str, dict[str, Any]] = {}
    for entry in entries:
        request = str(entry["request"])
        if request not in kept or entry.get("state") != PARTIAL:
            kept[request] = entry
    return list(kept.values())


def journal_known(entry: dict[str, Any], state: str | None) -> bool:
    """Whether a database holding the entry's request in ``state`` (None: not at all)
    knows what the entry records: completed, or partially completed as far as it."""
    if entry.get("state") == PARTIAL:
        return state in JOURNALED
    return state == ErasureState.COMPLETED


def journal_gaps(read: JournalRead) -> list[str]:
    """The journaled erasures this database does not know as far as the journal does (a
    restore brought their data back): one line each, saying what to run."""
    ids = [str(entry["request"]) for entry in read.entries]
    states = {
        str(pk): state
        for pk, state in ErasureRequest.objects.filter(pk__in=ids).values_list("pk", "state")
    }
    return [
        f"journaled erasure {entry['request']} ({str(entry.get('state')).replace('_', ' ')} "
        f"{human_text(entry.get('completed_at') or entry.get('settled_at'))}) is not known so "
        "far in this database: run `manage.py retention_erasure replay`"
        for entry in read.entries
        if not journal_known(entry, states.get(str(entry["request"])))
    ]


def erasure_journal_write(
    request: ErasureRequest,
    *,
    now: datetime,
    store: AnchorStore | None = None,
    signer: Signer | None = None,
) -> bool:
    """Write a completed request's entry, then forget its subject id; a partially
    completed one's, keeping the id (it resumes by it). Never raises.

    True once the journal holds it (written now, or found there already).
    Without anchoring configured nothing is written and the id is kept.
    """
    partial = request.state == PARTIAL
    if partial and (request.outcome or {}).get(PARTIAL_KEY):
        return True
    if request.state not in JOURNALED or request.journaled_at is not None:
        return request.journaled_at is not None
    if store is None and signer is None and not anchoring_on():
        return False
    try:
        signer = signer or signing_key()
        store = store or anchor_store(settings.EVIDENCE_ANCHOR)
        if signer is None or store is None:
            return False
        body = json.dumps(journal_entry(request, signer), sort_keys=True).encode()
        # There already: written by an earlier attempt whose database update was lost.
        with contextlib.suppress(AnchorExists):
            store.put(journal_name(request.pk, partial=partial), body)
    except (AnchorError, AnchorStoreError, ValueError) as exc:
        logger.error("erasure request %s not journaled: %s; the watchdog retries", request.pk, exc)
        return False
    if partial:
        outcome = {**(request.outcome or {}), PARTIAL_KEY: now.isoformat()}
        ErasureRequest.objects.filter(pk=request.pk, state=PARTIAL).update(outcome=outcome)
        request.outcome = outcome
        return True
    ErasureRequest.objects.filter(pk=request.pk).update(journaled_at=now, subject_id="")
    request.journaled_at, request.subject_id = now, ""
    logger.info("erasure request %s journaled in %s", request.pk, store.description)
    return True


def erasure_journals_write(*, now: datetime) -> int:
    """The watchdog: journal the requests whose entry could not be written then."""
    if not anchoring_on():
        return 0
    pending = ErasureRequest.objects.filter(
        Q(state=ErasureState.COMPLETED, journaled_at__isnull=True)
        | (Q(state=PARTIAL) & ~Q(outcome__has_key=PARTIAL_KEY))
    ).order_by("received_at")
    return sum(erasure_journal_write(request, now=now) for request in pending)
