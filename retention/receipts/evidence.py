"""Tamper evidence: how events are hashed, batched and chained.

Pure functions, no database: the same code writes the chain, verifies it in
``retention_verify`` and checks a single receipt offline (this package), and
docs/evidence.md documents the algorithm so a customer can re-implement it.

- An event's leaf hash is SHA-256(0x00 || canonical JSON of its fields). An
  event about database rows (``kind`` "row") also hashes ``kind``,
  ``row_count``, ``first_pk`` and ``last_pk``; an event about a tracked object
  hashes the fields it always did, so chains written before stay valid.
- A page event of a class with per-row evidence (``evidence`` "per_row", also
  hashed) stands for one event per row: each row is a *subject* (its keyed
  digest and its deadline), whose leaf is SHA-256(0x00 || canonical JSON of
  ``expires_at`` and ``key_digest``), and the event's ``key_digest`` is the
  Merkle root of its subjects' leaves in keyset order. A row's receipt is its
  audit path to that root, then the event's own path to its batch's root.
- A run's held rows (``evidence`` "held") are one event per class, hold and
  tenant: ``row_count`` rows, ``key_digest`` the Merkle root of their
  subjects' leaves (as above) in keyset order; the rows themselves are not
  stored (an auditor holding the table recomputes the root).
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
# And by a page event standing for one event per row ("evidence": "per_row").
PER_ROW = "per_row"
# And by the event of a run's rows kept under one hold ("evidence": "held").
HELD = "held"

_SORTED_FIELDS = tuple(sorted(LEAF_FIELDS))
_SORTED_ROW_FIELDS = tuple(sorted(LEAF_FIELDS + ROW_LEAF_FIELDS))
_SORTED_PER_ROW_FIELDS = tuple(sorted((*LEAF_FIELDS, *ROW_LEAF_FIELDS, "evidence")))

# A row subject as a page event stores it: its 32-byte digest, then its
# deadline as the 27 ASCII characters of ``timestamp``.
SUBJECT_DIGEST_SIZE = 32
SUBJECT_TIME_SIZE = 27
SUBJECT_SIZE = SUBJECT_DIGEST_SIZE + SUBJECT_TIME_SIZE
# One encoder for every call: json.dumps builds a new one per call when given
# options, which is most of the cost of hashing a page of events.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def stamp(value: datetime) -> str:
    """RFC 3339, UTC, microseconds, 'Z': one spelling per instant (``timestamp``,
    uncached: for the deadlines of a page's rows, which are all different)."""
    if value.utcoffset():
        value = value.astimezone(UTC)
    # isoformat is C; its first 26 characters are the date and time to the microsecond.
    return value.isoformat(timespec="microseconds")[:26] + "Z"


# Cached: a page of events shares one occurred_at, and uploads of one batch
# often share their expiry; equal datetimes are one instant.
timestamp = functools.lru_cache(maxsize=4096)(stamp)


def canonical(fields: Mapping[str, Any]) -> bytes:
    """Sorted keys, no whitespace, UTF-8: the same bytes for the same fields."""
    names = _SORTED_FIELDS
    if fields.get("kind") == "row":
        names = _SORTED_PER_ROW_FIELDS if "evidence" in fields else _SORTED_ROW_FIELDS
    try:
        body = {name: fields[name] for name in names}
    except KeyError:
        missing = [name for name in names if name not in fields]
        raise ValueError(f"event fields missing: {', '.join(missing)}") from None
    return _ENCODER.encode(body).encode()


def leaf_hash(fields: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(b"\x00" + canonical(fields)).digest()


def subject_leaf(key_digest: str, expires_at: str) -> bytes:
    """The leaf of one row under its per-row page event (``timestamp`` spelling)."""
    text = _ENCODER.encode({"expires_at": expires_at, "key_digest": key_digest})
    return hashlib.sha256(b"\x00" + text.encode()).digest()


def subjects_unpack(blob: bytes) -> list[tuple[str, str]]:
    """A page event's stored subjects: (key digest in hex, deadline) in keyset order."""
    if len(blob) % SUBJECT_SIZE:
        raise ValueError("the stored row subjects are not whole entries")
    return [
        (
            blob[at : at + SUBJECT_DIGEST_SIZE].hex(),
            blob[at + SUBJECT_DIGEST_SIZE : at + SUBJECT_SIZE].decode("ascii"),
        )
        for at in range(0, len(blob), SUBJECT_SIZE)
    ]


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (RFC 6962, 2.1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """RFC 6962's Merkle Tree Hash, built bottom-up: pairing neighbours level by
    level and carrying a last, unpaired node up unchanged gives the same tree as
    the RFC's split at the largest power of two (and runs for every page)."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    level = list(leaves)
    sha256 = hashlib.sha256
    while len(level) > 1:
        paired = [
            sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


class MerkleStream:
    """``merkle_root`` of leaves added one at a time, in memory logarithmic in their count.

    RFC 6962 splits n leaves at the largest power of two below n, so the tree
    of n leaves is its perfect subtrees (one per bit of n, largest first)
    joined from the right; only their roots are kept.
    """

    def __init__(self) -> None:
        self.count = 0
        self._stack: list[tuple[int, bytes]] = []  # (size, root) of the perfect subtrees

    def add(self, leaf: bytes) -> None:
        size, node = 1, leaf
        stack = self._stack
        while stack and stack[-1][0] == size:
            left = stack.pop()[1]
            node = hashlib.sha256(b"\x01" + left + node).digest()
            size *= 2
        stack.append((size, node))
        self.count += 1

    def root(self) -> bytes:
        if not self._stack:
            return hashlib.sha256(b"").digest()
        node = self._stack[-1][1]
        for _size, left in reversed(self._stack[:-1]):
            node = _node(left, node)
        return node


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
