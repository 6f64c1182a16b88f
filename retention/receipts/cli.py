"""The offline verifier's command line: ``python -m retention.receipts``.

    python -m retention.receipts verify receipt.json chain-head.json \\
        [--signed-head signed-head.json --public-key KEY]
    python -m retention.receipts verify-head signed-head.json --public-key KEY \\
        [--chain-head chain-head.json]
    python -m retention.receipts verify certificate.json [--public-key KEY] \\
        [--receipts receipts.json ...]

KEY is the base64 public key, or the JSON file of
``GET /api/v1/deletions/chain/key/``. ``verify`` with one file checks an
erasure certificate (``certificate``), and the receipts given against it.
Prints ``VERIFIED: ...`` and exits 0, or prints ``NOT VERIFIED: ...`` for
each problem and exits 1; 2 when an input cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from retention.receipts.certificate import certificate_check, certificate_summary, receipt_items
from retention.receipts.signed_heads import SignedHead, public_key_load
from retention.receipts.verify import (
    receipt_signed_head_problems,
    signed_head_check,
    verify_receipt,
)


def _public_key(value: str) -> bytes:
    """Base64, or the JSON saved from GET /api/v1/deletions/chain/key/."""
    if os.path.isfile(value):
        with open(value, encoding="utf-8") as fh:
            value = json.load(fh)["public_key"]
    return public_key_load(value)


def _load(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retention.receipts")
    sub = parser.add_subparsers(dest="command", required=True)
    verify = sub.add_parser("verify", help="verify one receipt against a chain head")
    verify.add_argument("receipt", help="a receipt, or an erasure certificate alone")
    verify.add_argument("chain_head", nargs="?")
    verify.add_argument("--signed-head", metavar="FILE", help="an anchored, signed chain head")
    verify.add_argument("--public-key", metavar="KEY", help="its key: base64, or a JSON file")
    verify.add_argument(
        "--receipts",
        metavar="FILE",
        nargs="+",
        action="extend",
        help="with a certificate: receipts whose events must be among its events",
    )
    head_only = sub.add_parser("verify-head", help="verify a signed chain head")
    head_only.add_argument("signed_head")
    head_only.add_argument("--public-key", metavar="KEY", required=True)
    head_only.add_argument("--chain-head", metavar="FILE", help="a later chain head file")
    args = parser.parse_args(argv)
    if args.command == "verify" and args.chain_head is None:
        if args.signed_head:
            parser.error("--signed-head goes with a receipt and its chain head file")
        return _certificate(args.receipt, args.public_key, args.receipts or [])
    if args.command == "verify" and args.receipts:
        parser.error("--receipts goes with an erasure certificate alone")
    if args.command == "verify" and bool(args.signed_head) != bool(args.public_key):
        parser.error("--signed-head and --public-key go together")
    try:
        public = _public_key(args.public_key) if args.public_key else b""
        signed: Any = _load(args.signed_head) if args.signed_head else None
        if args.command == "verify-head":
            head = _load(args.chain_head) if args.chain_head else None
            return _report(*signed_head_check(signed, public, head), head=head)
        receipt, head = _load(args.receipt), _load(args.chain_head)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"cannot read input: {exc}", file=sys.stderr)
        return 2
    problems = verify_receipt(receipt, head)
    parsed = None
    if not problems and signed is not None:
        parsed, problems = signed_head_check(signed, public)
        if parsed is not None and not problems:
            problems = receipt_signed_head_problems(receipt, head, parsed)
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
    if parsed is not None:
        print(f"VERIFIED: {_signed(parsed)}; the receipt's chain passes through it.")
    return 0


def _certificate(path: str, public_key: str | None, receipt_paths: Sequence[str]) -> int:
    try:
        doc = _load(path)
        if isinstance(doc, Mapping) and "format" not in doc and "batch" in doc:
            raise ValueError(
                f"{path} is a receipt: verify it with its chain head file, "
                "verify RECEIPT CHAIN_HEAD"
            )
        public = _public_key(public_key) if public_key else None
        receipts = [item for name in receipt_paths for item in receipt_items(_load(name))]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"cannot read input: {exc}", file=sys.stderr)
        return 2
    problems = certificate_check(doc, public_key=public, receipts=receipts)
    if problems:
        for problem in problems:
            print(f"NOT VERIFIED: {problem}")
        return 1
    summary = certificate_summary(doc, key_checked=public is not None, receipts=len(receipts))
    print(f"VERIFIED: {summary}")
    return 0


def _signed(signed: SignedHead) -> str:
    return (
        f"the head of batch {signed.seq} was signed by key {signed.key_id} at {signed.anchored_at}"
    )


def _report(
    signed: SignedHead | None, problems: list[str], *, head: Mapping[str, Any] | None
) -> int:
    if problems or signed is None:
        for problem in problems:
            print(f"NOT VERIFIED: {problem}")
        return 1
    later = f"; the chain to head batch {head['head']['seq']} passes through it" if head else ""
    print(f"VERIFIED: {_signed(signed)}{later}.")
    return 0
