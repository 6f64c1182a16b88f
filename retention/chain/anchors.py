"""Sign the chain head and write it outside the database (RETENTION_EVIDENCE_ANCHOR).

A run that closes anchors the head once its transaction has committed
(``run_finish``); the watchdog anchors a head that moved at least every
RETENTION_ANCHOR_INTERVAL (appends outside runs, a run that died, an
anchor that failed). A head that did not move since its last anchor is not
anchored again.

Anchoring never fails what called it: a failure is logged (never with a key)
and ``ChainHead.anchored_seq`` stays where it was, so the next attempt
retries. No row lock is held while the store is written: the head is read,
signed and written, then ``anchored_seq`` moves forward in one short update.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from retention.anchoring.signing import Signer, head_sign, signer_load
from retention.anchoring.stores import AnchorExists, AnchorStore, AnchorStoreError, anchor_store
from retention.conf import settings
from retention.models import ChainHead
from retention.receipts.signed_heads import AnchorError, head_parse
from retention.selectors.anchors import anchoring_on

logger = logging.getLogger("retention.anchors")

ANCHORED = "anchored"
UNCHANGED = "unchanged"  # the head did not move since its last anchor
NOT_DUE = "not_due"  # it moved, but the interval has not passed (watchdog only)
OFF = "off"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class AnchorOutcome:
    status: str
    seq: int | None = None
    detail: str = ""


def chain_anchor(
    *, now: datetime, store: AnchorStore | None = None, signer: Signer | None = None
) -> AnchorOutcome:
    """Anchor the chain head unless it did not move since the last anchor. Never raises."""
    if store is None and signer is None and not anchoring_on():
        return AnchorOutcome(OFF)
    seq: int | None = None
    try:
        head = ChainHead.objects.filter(pk=1).values_list("seq", "chain", "anchored_seq").first()
        if head is None or head[0] == 0 or head[0] <= head[2]:
            return AnchorOutcome(UNCHANGED, head[0] if head else None)
        seq, chain = head[0], head[1]
        signer = signer or signer_load(settings.SIGNING_KEY)
        store = store or anchor_store(settings.EVIDENCE_ANCHOR)
        if store is None:
            return AnchorOutcome(OFF)
        signed = head_sign(seq=seq, chain=chain, anchored_at=now, signer=signer)
        try:
            store.put(signed.name, signed.to_bytes())
        except AnchorExists:
            existing = head_parse(store.get(signed.name))
            if existing.chain != chain:
                return _failed(
                    seq,
                    f"{store.description} already holds an anchor of batch {seq} with another "
                    "chain hash: the database was restored from an older dump, or rewritten "
                    "(run retention_verify --anchors)",
                )
            # Another process closing a run anchored this same head a moment ago.
        ChainHead.objects.filter(pk=1, anchored_seq__lt=seq).update(
            anchored_seq=seq, anchored_at=now
        )
    except (AnchorError, AnchorStoreError, ValueError) as exc:
        return _failed(seq, str(exc))
    except Exception as exc:
        # Anything else (the database, a library): its type only, its text may carry more.
        return _failed(seq, type(exc).__name__)
    logger.info(
        "chain head at batch %s anchored in %s (key %s)",
        seq,
        store.description,
        signer.key_id,
    )
    return AnchorOutcome(ANCHORED, seq)


def _failed(seq: int | None, detail: str) -> AnchorOutcome:
    logger.error(
        "chain head%s not anchored: %s; the next run or the watchdog tries again",
        f" at batch {seq}" if seq is not None else "",
        detail,
    )
    return AnchorOutcome(FAILED, seq, detail)


def chain_anchor_due(*, now: datetime) -> AnchorOutcome:
    """The watchdog's anchor: a head that moved, once RETENTION_ANCHOR_INTERVAL has passed."""
    if not anchoring_on():
        return AnchorOutcome(OFF)
    try:
        head = (
            ChainHead.objects.filter(pk=1).values_list("seq", "anchored_seq", "anchored_at").first()
        )
        if head is None or head[0] <= head[1]:
            return AnchorOutcome(UNCHANGED, head[0] if head else None)
        last = head[2]
        if last is not None and now - last < settings.ANCHOR_INTERVAL:
            return AnchorOutcome(NOT_DUE, head[0])
    except Exception as exc:
        return _failed(None, type(exc).__name__)
    return chain_anchor(now=now)


def chain_anchor_on_commit(*, now: datetime) -> None:
    """Anchor once the current transaction commits (at once outside one).

    Never before: a head anchored from inside a transaction that then rolls
    back would be an anchor the database is behind.
    """
    if anchoring_on():
        transaction.on_commit(lambda: chain_anchor(now=now), robust=True)
