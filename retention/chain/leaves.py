"""An event's leaf hash, written fast: the canonical JSON of
``evidence.leaf_hash(event_fields(event))`` spelled directly (a test holds
the two equal), since it runs for every event of every page."""

from __future__ import annotations

import functools
import hashlib
import uuid
from json.encoder import encode_basestring as _str  # what json uses for ensure_ascii=False
from typing import Any

from retention.receipts import evidence
from retention.selectors.evidence import event_fields


@functools.lru_cache(maxsize=64)
def _run_json(run_id: uuid.UUID | None) -> str:
    # One run per page: its id is spelled once, not once per event.
    return _str(str(run_id)) if run_id else "null"


def event_leaf(event: Any) -> bytes:
    """``evidence.leaf_hash(event_fields(event))``, without the dict: this runs
    for every event of every page, so the canonical JSON is written directly
    (keys in sorted order, the same bytes; a test holds the two equal)."""
    if event.kind == "row":
        return _row_leaf(event)
    if event.record_id is None:
        return evidence.leaf_hash(event_fields(event))
    text = (
        f'{{"attempt":{int(event.attempt)},'
        f'"data_class":{_str(event.data_class)},'
        f'"disposition":{_str(event.disposition)},'
        f'"expires_at":"{evidence.timestamp(event.expires_at)}",'
        f'"idempotency_key":{_str(event.idempotency_key)},'
        f'"key_digest":{_str(event.key_digest)},'
        f'"occurred_at":"{evidence.timestamp(event.occurred_at)}",'
        f'"outcome":{_str(event.outcome)},'
        f'"policy_key":{_str(event.policy_key)},'
        f'"policy_version":{int(event.policy_version_number)},'
        f'"reason":{_str(event.reason)},'
        f'"record_id":{int(event.record_id)},'
        f'"run_id":{_run_json(event.run_id)},'
        f'"tenant_id":{_str(event.tenant_id)}}}'
    )
    return hashlib.sha256(b"\x00" + text.encode()).digest()


def _row_leaf(event: Any) -> bytes:
    """``event_leaf`` of a host row's event: its four fields more, the same way."""
    count = "null" if event.row_count is None else int(event.row_count)
    record = "null" if event.record_id is None else int(event.record_id)
    # Hashed only when set: events written before it existed keep their leaves.
    per_row = f'"evidence":{_str(event.evidence)},' if event.evidence else ""
    text = (
        f'{{"attempt":{int(event.attempt)},'
        f'"data_class":{_str(event.data_class)},'
        f'"disposition":{_str(event.disposition)},'
        f"{per_row}"
        f'"expires_at":"{evidence.timestamp(event.expires_at)}",'
        f'"first_pk":{_str(event.first_pk)},'
        f'"idempotency_key":{_str(event.idempotency_key)},'
        f'"key_digest":{_str(event.key_digest)},'
        f'"kind":{_str(event.kind)},'
        f'"last_pk":{_str(event.last_pk)},'
        f'"occurred_at":"{evidence.timestamp(event.occurred_at)}",'
        f'"outcome":{_str(event.outcome)},'
        f'"policy_key":{_str(event.policy_key)},'
        f'"policy_version":{int(event.policy_version_number)},'
        f'"reason":{_str(event.reason)},'
        f'"record_id":{record},'
        f'"row_count":{count},'
        f'"run_id":{_run_json(event.run_id)},'
        f'"tenant_id":{_str(event.tenant_id)}}}'
    )
    return hashlib.sha256(b"\x00" + text.encode()).digest()
