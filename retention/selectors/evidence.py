"""Reading the hash chain: verify it, build a receipt's inclusion proof, report the head.

Reads only; the chain is written by ``retention.chain.events``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from retention.models import ChainHead, DeletionEvent, EventBatch, EventKind
from retention.receipts import evidence


def event_fields(event: Any) -> dict[str, Any]:
    """The hashed fields of an event (a DeletionEvent, or one about to be
    appended: the same attributes), in the receipt's vocabulary."""
    fields: dict[str, Any] = {
        "idempotency_key": event.idempotency_key,
        "record_id": event.record_id,
        "run_id": str(event.run_id) if event.run_id else None,
        "tenant_id": event.tenant_id,
        "data_class": event.data_class,
        "policy_key": event.policy_key,
        "policy_version": event.policy_version_number,
        "disposition": event.disposition,
        "outcome": event.outcome,
        "attempt": event.attempt,
        "reason": event.reason,
        "key_digest": event.key_digest,
        "expires_at": evidence.timestamp(event.expires_at),
        "occurred_at": evidence.timestamp(event.occurred_at),
    }
    if event.kind == EventKind.ROW:
        fields.update(
            kind=event.kind,
            row_count=event.row_count,
            first_pk=event.first_pk,
            last_pk=event.last_pk,
        )
        if event.evidence:
            fields["evidence"] = event.evidence
    return fields


@dataclass(frozen=True, slots=True)
class RowSubject:
    """One row's event under a per-row page event: its place, digest and deadline."""

    index: int
    key_digest: str
    expires_at: str


def row_subjects(event: DeletionEvent) -> list[RowSubject]:
    """The rows a per-row page event stands for, in keyset order (empty for other events)."""
    if event.evidence != evidence.PER_ROW:
        return []
    if "row_subjects" in event.get_deferred_fields():
        event.refresh_from_db(fields=["row_subjects"])
    blob = event.row_subjects
    return [
        RowSubject(index, digest, at)
        for index, (digest, at) in enumerate(evidence.subjects_unpack(bytes(blob or b"")))
    ]


def _subjects_problem(event: DeletionEvent) -> str | None:
    """Why a per-row page event's stored rows do not match what it hashed, or None."""
    try:
        subjects = evidence.subjects_unpack(bytes(event.row_subjects or b""))
    except (ValueError, UnicodeDecodeError):
        return f"event {event.pk}: its stored rows are malformed"
    if len(subjects) != event.row_count:
        return f"event {event.pk}: it counts {event.row_count} rows and stores {len(subjects)}"
    root = evidence.merkle_root([evidence.subject_leaf(d, at) for d, at in subjects])
    if root.hex() != event.key_digest:
        return f"event {event.pk}: its stored rows do not hash to its key digest"
    return None


# --------------------------------------------------------------------------
# Verification


@dataclass(frozen=True, slots=True)
class VerifyResult:
    batches: int
    events: int
    first_seq: int | None
    last_seq: int | None
    broken: str | None

    @property
    def ok(self) -> bool:
        return self.broken is None


def _batch_events(batch: EventBatch) -> list[DeletionEvent]:
    # Every field, the rows of per-row page events too: the walk checks them.
    return list(DeletionEvent.objects.filter(batch=batch).order_by("leaf_index", "id"))


def chain_verify(
    *, since: datetime | None = None, until: datetime | None = None
) -> Iterator[VerifyResult | str]:
    """Walk the chain; yield progress lines, then one VerifyResult.

    With a time range, the batch before the range is trusted as the anchor;
    without one, the walk starts at the genesis and ends at the chain head.
    """
    batches = EventBatch.objects.order_by("seq")
    if since is not None:
        batches = batches.filter(created_at__gte=since)
    if until is not None:
        batches = batches.filter(created_at__lt=until)
    first = batches.first()
    if first is None or since is None:
        previous_seq, previous_chain = 0, evidence.GENESIS.hex()
    else:
        anchor = EventBatch.objects.filter(seq__lt=first.seq).order_by("-seq").first()
        previous_seq = anchor.seq if anchor else 0
        previous_chain = anchor.chain if anchor else evidence.GENESIS.hex()
    count_batches = count_events = 0
    first_seq: int | None = None

    def result(broken: str | None) -> VerifyResult:
        return VerifyResult(count_batches, count_events, first_seq, previous_seq or None, broken)

    for batch in batches.iterator(chunk_size=500):
        if first_seq is None:
            first_seq = batch.seq
        if batch.seq != previous_seq + 1:
            yield result(f"batch {previous_seq + 1} is missing (next found: {batch.seq})")
            return
        if batch.previous_chain != previous_chain:
            yield result(f"batch {batch.seq} does not link to batch {previous_seq}")
            return
        events = _batch_events(batch)
        if [e.leaf_index for e in events] != list(range(batch.size)):
            yield result(
                f"batch {batch.seq} should hold events 0..{batch.size - 1} in order; "
                f"it holds {len(events)} (event ids {', '.join(str(e.pk) for e in events[:10])})"
            )
            return
        leaves = []
        for event in events:
            leaf = evidence.leaf_hash(event_fields(event))
            if leaf.hex() != event.event_hash:
                yield result(f"event {event.pk} (batch {batch.seq}) was altered after recording")
                return
            if event.evidence == evidence.PER_ROW:
                problem = _subjects_problem(event)
                if problem is not None:
                    yield result(f"{problem} (batch {batch.seq}): altered after recording")
                    return
            leaves.append(leaf)
        root = evidence.merkle_root(leaves)
        if root.hex() != batch.root:
            yield result(f"batch {batch.seq}: its events do not hash to its root")
            return
        chain = evidence.chain_hash(bytes.fromhex(previous_chain), batch.seq, batch.size, root)
        if chain.hex() != batch.chain:
            yield result(f"batch {batch.seq}: its chain hash does not match")
            return
        previous_seq, previous_chain = batch.seq, batch.chain
        count_batches += 1
        count_events += len(events)
        if count_batches % 1000 == 0:
            yield f"checked {count_batches} batches ({count_events} events) up to {batch.seq}"
    outside = DeletionEvent.objects.filter(batch__isnull=True)
    if since is not None or until is not None:
        if since is not None:
            outside = outside.filter(occurred_at__gte=since)
        if until is not None:
            outside = outside.filter(occurred_at__lt=until)
    stray = outside.order_by("id").first()
    if stray is not None:
        yield result(f"event {stray.pk} is outside the chain (inserted without a batch)")
        return
    if since is None and until is None:
        head, _ = ChainHead.objects.get_or_create(pk=1)
        if head.seq != previous_seq or head.chain != previous_chain:
            yield result(
                f"the chain head says batch {head.seq}, the chain ends at batch {previous_seq}"
            )
            return
    yield result(None)


# --------------------------------------------------------------------------
# Receipts


def batch_leaves(batch_id: int) -> list[bytes]:
    return [
        bytes.fromhex(h)
        for h in DeletionEvent.objects.filter(batch_id=batch_id)
        .order_by("leaf_index")
        .values_list("event_hash", flat=True)
    ]


def receipt_for(
    event: DeletionEvent, *, leaves: Sequence[bytes] | None = None, row: str | None = None
) -> dict[str, Any]:
    """The event with its inclusion proof; ``leaves`` may pass the batch's leaves.

    With ``row`` (a key digest), the receipt of that row under a per-row page
    event: the same, plus the row's subject and its audit path to the
    event's ``key_digest``. ``LookupError`` when the event has no such row.
    """
    batch = event.batch
    if batch is None or event.leaf_index is None:
        raise ValueError(f"event {event.pk} is not chained")
    if leaves is None:
        leaves = batch_leaves(batch.pk)
    path = evidence.inclusion_path(leaves, event.leaf_index)
    receipt: dict[str, Any] = {
        "event": event_fields(event),
        "event_hash": event.event_hash,
        "leaf_index": event.leaf_index,
        "path": [node.hex() for node in path],
        "batch": {
            "seq": batch.seq,
            "size": batch.size,
            "root": batch.root,
            "previous_chain": batch.previous_chain,
            "chain": batch.chain,
        },
    }
    if row is not None:
        receipt["row"] = _row_proof(event, row)
    return receipt


def _row_proof(event: DeletionEvent, row: str) -> dict[str, Any]:
    subjects = row_subjects(event)
    index = next((s.index for s in subjects if s.key_digest == row), None)
    if index is None:
        raise LookupError(f"event {event.pk} stands for no row {row}")
    leaves = [evidence.subject_leaf(s.key_digest, s.expires_at) for s in subjects]
    return {
        "key_digest": row,
        "expires_at": subjects[index].expires_at,
        "index": index,
        "path": [node.hex() for node in evidence.inclusion_path(leaves, index)],
    }


def chain_head(*, from_seq: int = 0) -> dict[str, Any]:
    """The head and the links after ``from_seq``, for offline verification."""
    head, _ = ChainHead.objects.get_or_create(pk=1)
    links: Iterable[dict[str, Any]] = (
        {"seq": seq, "size": size, "root": root}
        for seq, size, root in EventBatch.objects.filter(seq__gt=from_seq)
        .order_by("seq")
        .values_list("seq", "size", "root")
        .iterator(chunk_size=2000)
    )
    return {"head": {"seq": head.seq, "chain": head.chain}, "links": list(links)}
