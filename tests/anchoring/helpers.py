"""Shared by the anchoring tests: a fresh Ed25519 key, the anchors of a directory, a rewrite."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from retention.anchoring.stores import DirectoryAnchorStore
from retention.models import ChainHead, DeletionEvent, EventBatch
from retention.receipts import evidence
from retention.receipts.signed_heads import SignedHead, head_parse
from retention.selectors.evidence import event_fields


def new_key() -> tuple[str, str]:
    """(base64 seed for RETENTION_SIGNING_KEY, base64 raw public key)."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(seed).decode(), base64.b64encode(public).decode()


def s3_anchor_setting(endpoint_url: str, bucket: str, prefix: str = "lethe/evidence") -> Any:
    return {
        "url": f"s3://{bucket}/{prefix}",
        "endpoint_url": endpoint_url,
        "region_name": "us-east-1",
        "access_key": "testing",
        "secret_key": "testing",
    }


def heads_in(path: Path) -> list[SignedHead]:
    store = DirectoryAnchorStore(path)
    return [head_parse(store.get(name)) for name in store.names()]


def head() -> ChainHead:
    return ChainHead.objects.get(pk=1)


def rewrite_every_event(reason: str = "rewritten") -> None:
    """Edit every event and recompute every hash, root, link and the head consistently:
    the plain chain check cannot tell."""
    previous = evidence.GENESIS
    for batch in EventBatch.objects.order_by("seq"):
        leaves = []
        for event in DeletionEvent.objects.filter(batch=batch).order_by("leaf_index"):
            event.reason = reason
            leaf = evidence.leaf_hash(event_fields(event))
            DeletionEvent.objects.filter(pk=event.pk).update(reason=reason, event_hash=leaf.hex())
            leaves.append(leaf)
        root = evidence.merkle_root(leaves)
        chain = evidence.chain_hash(previous, batch.seq, batch.size, root)
        EventBatch.objects.filter(pk=batch.pk).update(
            root=root.hex(), previous_chain=previous.hex(), chain=chain.hex()
        )
        previous = chain
    last = EventBatch.objects.order_by("-seq").first()
    assert last is not None
    ChainHead.objects.filter(pk=1).update(seq=last.seq, chain=previous.hex())
