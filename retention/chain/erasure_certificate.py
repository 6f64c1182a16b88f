"""The certificate of an erasure request: what it erased, redacted and kept, and its evidence.

Issued once, when the request completes or partially completes; the engine
stores it in ``request.certificate`` and ``api.erasure_certificate`` returns
it. It names the subject by its keyed digest only, says per class of the
frozen scope what was done (the hold and its reason for what a hold kept,
the legal basis of a class that keeps), and commits to the request's events
in the hash chain: their count, the Merkle root of their leaves in chain
order, and the chain head it was issued at. It carries its own hash and,
with ``RETENTION_SIGNING_KEY`` set, an Ed25519 signature, so it can be
checked offline (``retention.receipts.certificate``, docs/erasure.md).

A chain module: it reads the chain and signs with the anchors' key, and
never decides what to erase.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from retention.models import ChainHead, DeletionEvent, ErasureRequest, ErasureState
from retention.receipts import evidence
from retention.receipts.certificate import (
    FORMAT,
    LEAVES_LISTED_MAX,
    certificate_hash,
    certificate_problems,
    signed_bytes,
)
from retention.selectors.anchors import signing_key

ISSUED_IN = (ErasureState.COMPLETED, ErasureState.PARTIALLY_COMPLETED)


def _time(value: datetime | None) -> str | None:
    return evidence.stamp(value) if value is not None else None


def erasure_certificate_issue(request: ErasureRequest, *, now: datetime) -> dict[str, Any]:
    """The certificate of ``request`` as of ``now``, a JSON-serialisable document.

    The request must be completed or partially completed, with its
    ``outcome`` settled; ``ValueError`` when it is not, or when the outcome
    contradicts its frozen scope (a certificate that would not verify is
    never issued).
    """
    if request.state not in ISSUED_IN:
        raise ValueError(
            f"{request}: a certificate is issued when a request completes or partially "
            f"completes, not while it is {request.state}"
        )
    classes = _classes(request)
    totals = {
        "found": sum(c["found"] for c in classes),
        "erased": sum(c["erased"] for c in classes),
        "redacted": sum(c["redacted"] for c in classes),
        "kept": sum(k["count"] for c in classes for k in c["kept"]),
        "left": sum(c["left"] for c in classes),
    }
    doc: dict[str, Any] = {
        "format": FORMAT,
        "id": str(request.pk),
        "subject_digest": request.subject_digest or None,
        "tenant_id": request.tenant_id or None,
        "state": str(request.state),
        "received_at": _time(request.received_at),
        "approved_at": _time(request.approved_at),
        "due_at": _time(request.due_at),
        "completed_at": _time(request.completed_at),
        "verified_at": _time(request.verified_at),
        "classes": classes,
        "totals": totals,
        "events": _events(request),
        "issued_at": _time(now),
    }
    doc["hash"] = certificate_hash(doc)
    signer = signing_key()
    if signer is not None:
        doc["key_id"] = signer.key_id
        doc["signature"] = base64.b64encode(signer.sign(signed_bytes(doc))).decode()
    problems = certificate_problems(doc)
    if problems:
        raise ValueError(f"{request}: its certificate would not verify: {'; '.join(problems)}")
    return doc


def _classes(request: ErasureRequest) -> list[dict[str, Any]]:
    """Per class of the frozen scope, by name: what it found at receipt and what was done."""
    scope = {entry["data_class"]: entry for entry in request.scope.get("classes", [])}
    outcome: dict[str, Any] = dict(request.outcome.get("classes", {}))
    strays = sorted(set(outcome) - set(scope))
    if strays:
        raise ValueError(f"{request}: its outcome names classes outside its scope: {strays}")
    return [_class(scope[name], outcome.get(name), request) for name in sorted(scope)]


def _class(
    frozen: dict[str, Any], done: dict[str, Any] | None, request: ErasureRequest
) -> dict[str, Any]:
    name = frozen["data_class"]
    entry: dict[str, Any] = {
        "data_class": name,
        "kind": frozen["kind"],
        "policy_version": frozen["policy_version"],
        "on_erasure": frozen["on_erasure"],
        "reachable": bool(frozen["reachable"]),
        "not_reachable_because": frozen["not_reachable_because"],
        "found": int(frozen["count"]),
        "erased": 0,
        "redacted": 0,
        "kept": [],
        "basis": "",
        "left": 0,
        # Unreachable: nothing was looked for, so nothing was verified either.
        "verified": None,
    }
    if not entry["reachable"]:
        if done is not None:
            raise ValueError(f"{request}: its outcome names {name}, which it cannot reach")
        return entry
    if frozen["on_erasure"] == "keep":
        entry["basis"] = frozen["erasure_basis"]
    if done is None:
        if entry["found"]:
            raise ValueError(f"{request}: its outcome says nothing of {name}, which has items")
        # Nothing found at receipt, and the frozen bound lets nothing later in.
        entry["verified"] = True
        return entry
    if done.get("on_erasure", frozen["on_erasure"]) != frozen["on_erasure"]:
        raise ValueError(
            f"{request}: {name} was to {frozen['on_erasure']} its items (its frozen scope); "
            f"its outcome says {done['on_erasure']}"
        )
    entry.update(
        erased=int(done.get("erased", 0)),
        redacted=int(done.get("redacted", 0)),
        kept=[
            {"hold": int(k["hold"]), "reason": str(k["reason"]), "count": int(k["count"])}
            for k in sorted(done.get("kept", []), key=lambda k: int(k["hold"]))
            if int(k["count"])
        ],
        left=int(done.get("left", 0)),
        verified=bool(done.get("verified", False)),
    )
    if frozen["on_erasure"] == "keep":
        entry["basis"] = str(done.get("basis") or frozen["erasure_basis"])
    return entry


def _events(request: ErasureRequest) -> dict[str, Any]:
    """The request's events in chain order: count, Merkle root, leaves (when few enough),
    its runs, and the chain head now."""
    events = DeletionEvent.objects.filter(run__erasure=request)
    unchained = events.filter(batch__isnull=True).values_list("pk", flat=True).first()
    if unchained is not None:
        raise ValueError(f"{request}: its event {unchained} is not chained (run retention_verify)")
    stream = evidence.MerkleStream()
    leaves: list[str] = []
    last_seq = 0
    for event_hash, seq in (
        events.order_by("batch__seq", "leaf_index")
        .values_list("event_hash", "batch__seq")
        .iterator(chunk_size=2000)
    ):
        stream.add(bytes.fromhex(event_hash))
        if len(leaves) <= LEAVES_LISTED_MAX:
            leaves.append(event_hash)
        last_seq = seq
    head = ChainHead.objects.filter(pk=1).values_list("seq", "chain").first()
    seq, chain = head if head is not None else (0, evidence.GENESIS.hex())
    if last_seq > seq:
        raise ValueError(f"{request}: its events reach batch {last_seq}, past the chain head")
    runs = request.runs.order_by("started_at", "pk").values_list("pk", flat=True)
    return {
        "count": stream.count,
        "root": stream.root().hex(),
        "leaves": leaves if stream.count <= LEAVES_LISTED_MAX else None,
        "runs": [str(pk) for pk in runs],
        "head": {"seq": seq, "chain": chain},
    }
