"""Verify a deletion receipt offline, without the database or Django.

    python -m retention.receipts verify receipt.json chain-head.json

A receipt carries the event's fields, its leaf index in its batch, the
audit path to the batch root, and the batch's link in the chain. The chain
head file carries the head's chain hash and the links (seq, size, root) of
every batch after the receipt's, so the verifier can walk from the receipt's
batch to the head. See "Verifying a receipt" in docs/evidence.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from retention import evidence


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retention.receipts")
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="verify one receipt against a chain head")
    verify.add_argument("receipt")
    verify.add_argument("chain_head")
    args = parser.parse_args(argv)
    try:
        with open(args.receipt, encoding="utf-8") as fh:
            receipt = json.load(fh)
        with open(args.chain_head, encoding="utf-8") as fh:
            head = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"cannot read input: {exc}", file=sys.stderr)
        return 2
    problems = verify_receipt(receipt, head)
    if problems:
        for problem in problems:
            print(f"NOT VERIFIED: {problem}")
        return 1
    event = receipt["event"]
    print(
        f"VERIFIED: record {event['record_id']} {event['outcome']} at {event['occurred_at']} "
        f"is event {receipt['leaf_index']} of batch {receipt['batch']['seq']}, "
        f"chained to head batch {head['head']['seq']}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
