"""Checking a receipt, and a signed head, against a chain head file.

A receipt carries the event's fields, its leaf index in its batch, the
audit path to the batch root, and the batch's link in the chain; a row's
receipt under a per-row page event also carries the row (its key digest,
deadline, index) and its audit path to the event's ``key_digest``. The chain
head file carries the head's chain hash and the links (seq, size, root) of
every batch after the receipt's, so the verifier can walk from the receipt's
batch to the head. A signed head (an anchor, ``signed_heads``) must carry a
good Ed25519 signature and lie on that same walk. See "Verifying a receipt"
and "Anchors outside the database" in docs/evidence.md.

Each check returns the problems it found, as sentences; an empty list means
verified. The command line around them is ``cli``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retention.receipts import evidence
from retention.receipts.signed_heads import AnchorError, SignedHead, head_parse, head_verify, key_id


def _hex(value: Any, what: str) -> bytes:
    try:
        raw = bytes.fromhex(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} is not hexadecimal") from None
    if len(raw) != 32:
        raise ValueError(f"{what} is not a SHA-256 digest")
    return raw


def verify_receipt(receipt: dict[str, Any], head: dict[str, Any]) -> list[str]:
    """Return the problems found; an empty list means the receipt verifies."""
    try:
        batch = receipt["batch"]
        if "row" in receipt:
            problem = _row_problem(receipt["row"], receipt["event"])
            if problem is not None:
                return [problem]
        leaf = evidence.leaf_hash(receipt["event"])
        if receipt.get("event_hash") and _hex(receipt["event_hash"], "event_hash") != leaf:
            return ["the event's fields do not hash to its event_hash"]
        path = [_hex(node, "path node") for node in receipt["path"]]
        root = evidence.root_from_path(leaf, int(receipt["leaf_index"]), int(batch["size"]), path)
        if root != _hex(batch["root"], "batch root"):
            return ["the event is not included in its batch: the audit path gives another root"]
        seq = int(batch["seq"])
        link = evidence.chain_hash(
            _hex(batch["previous_chain"], "previous_chain"), seq, int(batch["size"]), root
        )
        if link != _hex(batch["chain"], "batch chain"):
            return [f"batch {seq} does not link to its previous chain hash"]
        current = link
        for entry in sorted(head.get("links", []), key=lambda e: int(e["seq"])):
            entry_seq = int(entry["seq"])
            if entry_seq <= seq:
                continue
            if entry_seq != seq + 1:
                return [f"the chain head file skips from batch {seq} to {entry_seq}"]
            current = evidence.chain_hash(
                current, entry_seq, int(entry["size"]), _hex(entry["root"], "link root")
            )
            seq = entry_seq
        if int(head["head"]["seq"]) != seq:
            return [f"the chain head file stops at batch {seq}, not at the head"]
        if current != _hex(head["head"]["chain"], "head chain"):
            return ["walking the chain from the receipt's batch does not reach the head"]
    except (KeyError, TypeError) as exc:
        return [f"malformed receipt or chain head: missing or wrong {exc}"]
    except ValueError as exc:
        return [f"malformed receipt or chain head: {exc}"]
    return []


def _row_problem(row: Mapping[str, Any], event: Mapping[str, Any]) -> str | None:
    """Whether a row's receipt is one of the rows its per-row page event stands for."""
    if event.get("evidence") != evidence.PER_ROW:
        return "the receipt names a row, but its event is not a per-row page event"
    leaf = evidence.subject_leaf(str(row["key_digest"]), str(row["expires_at"]))
    path = [_hex(node, "row path node") for node in row["path"]]
    root = evidence.root_from_path(leaf, int(row["index"]), int(event["row_count"]), path)
    if root != _hex(event["key_digest"], "the event's key_digest"):
        return "the row is not among its event's rows: its audit path gives another root"
    return None


def _links(head: Mapping[str, Any]) -> dict[int, tuple[int, bytes]]:
    return {
        int(e["seq"]): (int(e["size"]), _hex(e["root"], "link root")) for e in head.get("links", [])
    }


def _walk(start: bytes, first: int, last: int, head: Mapping[str, Any], *, hint: int) -> bytes:
    """The chain hash of batch ``last``, from that of batch ``first`` and the links between."""
    links, current = _links(head), start
    for seq in range(first + 1, last + 1):
        if seq not in links:
            raise ValueError(
                f"the chain head file has no link of batch {seq}: fetch it with ?from_seq={hint}"
            )
        size, root = links[seq]
        current = evidence.chain_hash(current, seq, size, root)
    return current


def signed_head_check(
    signed: Mapping[str, Any], public_key: bytes, head: Mapping[str, Any] | None = None
) -> tuple[SignedHead | None, list[str]]:
    """The signed head and the problems found: its signature, and with a chain
    head file whether the head file's chain passes through the signed batch."""
    try:
        parsed = head_parse(signed)
    except AnchorError as exc:
        return None, [f"malformed signed head: {exc}"]
    try:
        wrong = head_verify(parsed, {key_id(public_key): public_key})
    except AnchorError as exc:  # no cryptography package
        return parsed, [f"cannot check the signature: {exc}"]
    if wrong is not None:
        return parsed, [f"the signed head of batch {parsed.seq}: {wrong}"]
    if head is None:
        return parsed, []
    try:
        top = int(head["head"]["seq"])
        if parsed.seq > top:
            return parsed, [_behind(parsed.seq, top)]
        reached = _walk(bytes.fromhex(parsed.chain), parsed.seq, top, head, hint=parsed.seq)
        if reached != _hex(head["head"]["chain"], "head chain"):
            return parsed, [_rewritten(parsed.seq)]
    except (KeyError, TypeError) as exc:
        return parsed, [f"malformed chain head: missing or wrong {exc}"]
    except ValueError as exc:
        return parsed, [str(exc)]
    return parsed, []


def _behind(seq: int, top: int) -> str:
    return (
        f"batch {seq} was signed, but the chain head file ends at batch {top}: the trail "
        "was rolled back since (or the chain head file is older than the signed head)"
    )


def _rewritten(seq: int) -> str:
    return f"the chain does not pass through the signed hash of batch {seq}: it was rewritten"


def receipt_signed_head_problems(
    receipt: Mapping[str, Any], head: Mapping[str, Any], signed: SignedHead
) -> list[str]:
    """Whether the receipt's walk to the head passes through the signed head's batch.

    Call after ``verify_receipt`` found no problem. A signed head older than
    the receipt's batch needs the links from it: ``?from_seq=<its seq>``.
    """
    batch = receipt["batch"]
    seq, top, target = int(batch["seq"]), int(head["head"]["seq"]), bytes.fromhex(signed.chain)
    try:
        if signed.seq > top:
            return [_behind(signed.seq, top)]
        if signed.seq >= seq:
            reached = _walk(_hex(batch["chain"], "batch chain"), seq, signed.seq, head, hint=seq)
            return [] if reached == target else [_rewritten(signed.seq)]
        reached = _walk(target, signed.seq, seq - 1, head, hint=signed.seq)
        if reached != _hex(batch["previous_chain"], "previous_chain"):
            return [_rewritten(signed.seq)]
    except (KeyError, TypeError) as exc:
        return [f"malformed chain head: missing or wrong {exc}"]
    except ValueError as exc:
        return [str(exc)]
    return []
