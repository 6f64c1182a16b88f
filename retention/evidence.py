"""Tamper evidence: how events are hashed, batched and chained.

Pure functions, no database: the same code verifies the chain in
``retention_verify`` and a single receipt offline, and docs/evidence.md documents
the algorithm so a customer can re-implement it.

- An event's leaf hash is SHA-256(0x00 || canonical JSON of its fields). An
  event about database rows (``kind`` "row") also hashes ``kind``,
  ``row_count``, ``first_pk`` and ``last_pk``; an event about a tracked object
  hashes the fields it always did, so chains written before stay valid.
- The events finalized together form a batch whose root is the RFC 6962
  Merkle Tree Hash of their leaves (in leaf order); interior nodes are
  SHA-256(0x01 || left || right).
- Batches are chained: chain = SHA-256("lethe-chain-v1" || previous chain ||
  seq as 8 bytes big-endian || leaf count as 8 bytes || root); the first
  batch's previous chain is 32 zero bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

GENESIS = bytes(32)
CHAIN_TAG = b"lethe-chain-v1"

# The fields of an event that its hash covers, in the receipt's vocabulary.
LEAF_FIELDS = (
    "idempotency_key",
    "record_id",
    "run_id",
    "tenant_id",
    "data_class",
    "policy_key",
    "policy_version",
    "disposition",
    "outcome",
    "attempt",
    "reason",
    "key_digest",
    "expires_at",
    "occurred_at",
)

# Hashed as well by the events of database rows (kind "row").
ROW_LEAF_FIELDS = ("kind", "row_count", "first_pk", "last_pk")

_SORTED_FIELDS = tuple(sorted(LEAF_FIELDS))
_SORTED_ROW_FIELDS = tuple(sorted(LEAF_FIELDS + ROW_LEAF_FIELDS))
# One encoder for every call: json.dumps builds a new one per call when given
# options, which is most of the cost of hashing a page of events.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


# Cached: a page of events shares one occurred_at, and uploads of one batch
# often share their expiry; equal datetimes are one instant.
@functools.lru_cache(maxsize=4096)
def timestamp(value: datetime) -> str:
    """RFC 3339, UTC, microseconds, 'Z': one spelling per instant."""
    if value.utcoffset():
        value = value.astimezone(UTC)
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:"
        f"{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}Z"
    )


def canonical(fields: Mapping[str, Any]) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the same bytes for the same fields."""
    names = _SORTED_ROW_FIELDS if fields.get("kind") == "row" else _SORTED_FIELDS
    try:
        body = {name: fields[name] for name in names}
    except KeyError:
        missing = [name for name in names if name not in fields]
        raise ValueError(f"event fields missing: {', '.join(missing)}") from None
    return _ENCODER.encode(body).encode()


def leaf_hash(fields: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(b"\x00" + canonical(fields)).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (RFC 6962, 2.1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def inclusion_path(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path of leaf ``index`` (RFC 6962, 2.1.1), nearest sibling first."""
    if not 0 <= index < len(leaves):
        raise IndexError(index)
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*inclusion_path(leaves[:k], index), merkle_root(leaves[k:])]
    return [*inclusion_path(leaves[k:], index - k), merkle_root(leaves[:k])]


def root_from_path(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes:
    """Recompute the root from a leaf and its audit path (RFC 9162, 2.1.3.2)."""
    if not 0 <= index < size:
        raise ValueError("leaf index outside the batch")
    fn, sn = index, size - 1
    node = leaf
    for sibling in path:
        if sn == 0:
            raise ValueError("audit path is too long")
        if fn % 2 == 1 or fn == sn:
            node = _node(sibling, node)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            node = _node(node, sibling)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("audit path is too short")
    return node


def chain_hash(previous: bytes, seq: int, count: int, root: bytes) -> bytes:
    return hashlib.sha256(
        CHAIN_TAG + previous + seq.to_bytes(8, "big") + count.to_bytes(8, "big") + root
    ).digest()
