from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone

import pytest

from retention.receipts import evidence


def leaves(n: int) -> list[bytes]:
    return [hashlib.sha256(f"leaf {i}".encode()).digest() for i in range(n)]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33])
def test_inclusion_path__every_leaf_recomputes_the_root(size):
    items = leaves(size)
    root = evidence.merkle_root(items)
    for index in range(size):
        path = evidence.inclusion_path(items, index)
        assert evidence.root_from_path(items[index], index, size, path) == root


@pytest.mark.parametrize("size", [2, 5, 8, 13])
def test_inclusion_path__a_changed_leaf_or_index_does_not_recompute_the_root(size):
    items = leaves(size)
    root = evidence.merkle_root(items)
    for index in range(size):
        path = evidence.inclusion_path(items, index)
        forged = hashlib.sha256(b"forged").digest()
        assert evidence.root_from_path(forged, index, size, path) != root
        other = (index + 1) % size
        try:
            moved = evidence.root_from_path(items[index], other, size, path)
        except ValueError:
            continue  # a path of the wrong length for that index is refused outright
        assert moved != root


def test_merkle_root__matches_rfc6962_shape_for_three_leaves():
    a, b, c = leaves(3)
    node = lambda left, right: hashlib.sha256(b"\x01" + left + right).digest()  # noqa: E731
    assert evidence.merkle_root([a, b, c]) == node(node(a, b), c)


def _rfc6962_root(items: list[bytes]) -> bytes:
    """The RFC's recursive definition, written out: split at the largest power of two."""
    if not items:
        return hashlib.sha256(b"").digest()
    if len(items) == 1:
        return items[0]
    k = 1
    while k * 2 < len(items):
        k *= 2
    return hashlib.sha256(b"\x01" + _rfc6962_root(items[:k]) + _rfc6962_root(items[k:])).digest()


def test_merkle_root__bottom_up_gives_the_rfc6962_tree_for_every_size():
    for size in range(0, 300):
        assert evidence.merkle_root(leaves(size)) == _rfc6962_root(leaves(size)), size


@pytest.mark.parametrize(
    "when",
    [
        datetime(2026, 3, 14, 12, 0, tzinfo=UTC),
        datetime(2026, 3, 14, 7, 5, 9, 30, tzinfo=timezone(timedelta(hours=-5))),
        datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        datetime(2026, 3, 14, 12, 0, 0, 1),
    ],
)
def test_stamp__one_spelling_per_instant_whatever_the_zone(when):
    utc = when.astimezone(UTC) if when.tzinfo else when
    spelled = (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond:06d}Z"
    )
    assert evidence.stamp(when) == evidence.timestamp(when) == spelled
    assert len(spelled) == evidence.SUBJECT_TIME_SIZE


def test_subject_leaf__is_the_canonical_json_of_its_two_fields():
    digest, at = "ab" * 32, "2026-03-14T12:00:00.000000Z"
    text = f'{{"expires_at":"{at}","key_digest":"{digest}"}}'.encode()
    assert evidence.subject_leaf(digest, at) == hashlib.sha256(b"\x00" + text).digest()
    blob = bytes.fromhex(digest) + at.encode()
    assert evidence.subjects_unpack(blob * 2) == [(digest, at), (digest, at)]
    with pytest.raises(ValueError):
        evidence.subjects_unpack(blob[:-1])


def test_root_from_path__rejects_paths_of_the_wrong_length():
    items = leaves(4)
    path = evidence.inclusion_path(items, 1)
    with pytest.raises(ValueError):
        evidence.root_from_path(items[1], 1, 4, path[:-1])
    with pytest.raises(ValueError):
        evidence.root_from_path(items[1], 1, 4, [*path, path[0]])


def test_leaf_hash__covers_every_field_and_one_spelling_per_instant():
    when = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
    fields = dict.fromkeys(evidence.LEAF_FIELDS, "x")
    fields["occurred_at"] = evidence.timestamp(when)
    base = evidence.leaf_hash(fields)
    for name in evidence.LEAF_FIELDS:
        changed = dict(fields, **{name: "y"})
        assert evidence.leaf_hash(changed) != base, name
    assert evidence.timestamp(when) == "2026-03-14T12:00:00.000000Z"
    with pytest.raises(ValueError):
        evidence.leaf_hash({"outcome": "deleted"})


def test_chain_hash__depends_on_every_input():
    root = hashlib.sha256(b"root").digest()
    base = evidence.chain_hash(evidence.GENESIS, 1, 3, root)
    assert evidence.chain_hash(base, 2, 3, root) != evidence.chain_hash(
        evidence.GENESIS, 2, 3, root
    )
    assert evidence.chain_hash(evidence.GENESIS, 2, 3, root) != base
    assert evidence.chain_hash(evidence.GENESIS, 1, 4, root) != base
    assert evidence.chain_hash(evidence.GENESIS, 1, 3, bytes(32)) != base


def test_event_leaf__fast_path_hashes_exactly_like_the_reference(db):
    import uuid
    from datetime import timedelta

    from retention.chain.leaves import event_leaf
    from retention.models import DeletionEvent
    from retention.selectors.evidence import event_fields

    when = datetime(2026, 3, 14, 12, 0, 0, 123, tzinfo=UTC)
    for run_id, text in [
        (uuid.uuid4(), "plain"),
        (None, 'quote " backslash \\ newline \n tab \t nul \x00'),
        (uuid.uuid4(), "unicode: Zoë, 日本, emoji \U0001f600, \u2028"),
    ]:
        event = DeletionEvent(
            idempotency_key=f"7:{text}:delete",
            record_id=42,
            run_id=run_id,
            tenant_id=text,
            data_class="idv.photo",
            policy_key="idv.photo",
            policy_version_number=3,
            disposition="delete",
            outcome="failed",
            attempt=2,
            reason=text,
            key_digest="ab" * 32,
            expires_at=when - timedelta(days=30),
            occurred_at=when,
        )
        assert event_leaf(event) == evidence.leaf_hash(event_fields(event))
        # A host row's event hashes four fields more (one row, or a page of them).
        for count, first, last in [(None, "", ""), (1000, "17", "1016")]:
            event.record_id, event.kind = None, "row"
            event.row_count, event.first_pk, event.last_pk = count, first, last or text
            assert event_leaf(event) == evidence.leaf_hash(event_fields(event))
        # A per-row page event hashes that it is one, too.
        plain = event_leaf(event)
        event.evidence = evidence.PER_ROW
        assert event_leaf(event) == evidence.leaf_hash(event_fields(event)) != plain
        event.evidence = ""
