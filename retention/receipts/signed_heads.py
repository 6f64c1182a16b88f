"""The signed chain head: its format, its name in a store, and checking a signature.

Part of the offline verifier (see the package): no Django and no database.
``cryptography`` is imported only when a key is used, so receipts verify
without it. Signing needs the private key and is the server's:
``retention.anchoring.signing``.

A signed head is one JSON object::

    {"anchored_at": "2026-03-14T12:00:00.000000Z", "chain": "<64 hex>",
     "format": "lethe-anchor-v1", "key_id": "<16 hex>", "seq": 12,
     "signature": "<base64 of 64 bytes>"}

The signature is Ed25519 over the canonical JSON of every other member
(sorted keys, no whitespace, UTF-8): the object without ``signature``.
``key_id`` is the first 16 hex digits of SHA-256 of the raw 32-byte public key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FORMAT = "lethe-anchor-v1"
ALGORITHM = "Ed25519"
# Where the head of batch ``seq`` is written, under the store's prefix: names sort by seq.
HEADS_DIR = "heads"
_NAME = re.compile(r"^heads/(\d{20})\.json$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_STATEMENT = ("anchored_at", "chain", "format", "key_id", "seq")


class AnchorError(ValueError):
    """A key or a signed head that cannot be used; the message names no secret."""


def ed25519_module() -> Any:
    """``cryptography``'s Ed25519, or AnchorError saying which extra to install."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise AnchorError(
            'signed chain heads need the cryptography package (pip install "django-lethe[anchors]")'
        ) from None
    return ed25519


def canonical(value: Mapping[str, Any]) -> bytes:
    """Sorted keys, no whitespace, UTF-8, as for events (``evidence.canonical``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()[:16]


def b64_decode(value: str, what: str, size: int) -> bytes:
    """``size`` raw bytes from their base64; AnchorError naming ``what`` otherwise."""
    try:
        raw = base64.b64decode(str(value).strip(), validate=True)
    except (binascii.Error, ValueError):
        raise AnchorError(f"{what} is not base64") from None
    if len(raw) != size:
        raise AnchorError(f"{what} has {len(raw)} bytes, not {size}")
    return raw


def public_key_load(public_b64: str) -> bytes:
    """A raw 32-byte Ed25519 public key from its base64."""
    return b64_decode(public_b64, "the public key", 32)


@dataclass(frozen=True, slots=True)
class SignedHead:
    seq: int
    chain: str
    anchored_at: str
    key_id: str
    signature: str
    format: str = FORMAT

    def statement(self) -> dict[str, Any]:
        """What the signature covers."""
        return {
            "anchored_at": self.anchored_at,
            "chain": self.chain,
            "format": self.format,
            "key_id": self.key_id,
            "seq": self.seq,
        }

    def as_json(self) -> dict[str, Any]:
        return {**self.statement(), "signature": self.signature}

    def to_bytes(self) -> bytes:
        return canonical(self.as_json()) + b"\n"

    @property
    def name(self) -> str:
        return anchor_name(self.seq)


def anchor_name(seq: int) -> str:
    return f"{HEADS_DIR}/{seq:020d}.json"


def name_seq(name: str) -> int | None:
    """The seq of an anchor's name (``heads/<20 digits>.json``); None for another name."""
    match = _NAME.match(name)
    return int(match.group(1)) if match else None


def head_parse(data: bytes | str | Mapping[str, Any]) -> SignedHead:
    """A signed head from its JSON; AnchorError when it is not one."""
    try:
        value = json.loads(data) if isinstance(data, bytes | str) else data
    except (ValueError, UnicodeDecodeError):
        raise AnchorError("not JSON") from None
    if not isinstance(value, Mapping):
        raise AnchorError("not a JSON object")
    missing = [name for name in (*_STATEMENT, "signature") if name not in value]
    if missing:
        raise AnchorError(f"missing {', '.join(missing)}")
    extra = sorted(set(value) - {*_STATEMENT, "signature"})
    if extra:
        raise AnchorError(f"unknown member(s) {', '.join(extra)}")
    if value["format"] != FORMAT:
        raise AnchorError(f"format {value['format']!r} is not {FORMAT!r}")
    seq = value["seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise AnchorError("seq is not a positive integer")
    for name in ("anchored_at", "chain", "key_id", "signature"):
        if not isinstance(value[name], str):
            raise AnchorError(f"{name} is not a string")
    if not _HEX64.match(value["chain"]):
        raise AnchorError("chain is not a SHA-256 digest in lower-case hex")
    return SignedHead(
        seq=seq,
        chain=value["chain"],
        anchored_at=value["anchored_at"],
        key_id=value["key_id"],
        signature=value["signature"],
    )


def head_verify(head: SignedHead, public_keys: Mapping[str, bytes]) -> str | None:
    """None when a trusted key signed ``head``; else what is wrong.

    ``public_keys`` maps key ids to raw public keys (``key_id`` of each).
    """
    return signature_check(head.statement(), head.key_id, head.signature, public_keys)


def signature_check(
    statement: Mapping[str, Any],
    signer_id: str,
    signature_b64: str,
    public_keys: Mapping[str, bytes],
) -> str | None:
    """None when the trusted key ``signer_id`` signed the canonical ``statement``; else
    what is wrong (a signed head, an erasure journal entry)."""
    public = public_keys.get(signer_id)
    if public is None:
        known = ", ".join(sorted(public_keys)) or "none"
        return f"signed by key {signer_id}, which is not a trusted key (trusted: {known})"
    try:
        signature = b64_decode(signature_b64, "the signature", 64)
    except AnchorError as exc:
        return f"bad signature ({exc})"
    ed25519 = ed25519_module()
    from cryptography.exceptions import InvalidSignature

    try:
        ed25519.Ed25519PublicKey.from_public_bytes(public).verify(signature, canonical(statement))
    except InvalidSignature:
        return "bad signature: the statement is not what the key signed"
    return None
