"""The signed chain head: its format, signing it and checking a signature.

No Django and no database: the tenant's offline verifier
(``python -m retention.receipts``) checks signed heads with this module.
``cryptography`` is imported only when a key is used, so receipts verify
without it.

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
from datetime import datetime
from typing import TYPE_CHECKING, Any

from retention.evidence import timestamp

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

FORMAT = "lethe-anchor-v1"
ALGORITHM = "Ed25519"
# Where the head of batch ``seq`` is written, under the store's prefix: names sort by seq.
HEADS_DIR = "heads"
_NAME = re.compile(r"^heads/(\d{20})\.json$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_STATEMENT = ("anchored_at", "chain", "format", "key_id", "seq")


class AnchorError(ValueError):
    """A key or a signed head that cannot be used; the message names no secret."""


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise AnchorError(
            'signed chain heads need the cryptography package (pip install "django-lethe[anchors]")'
        ) from None
    return ed25519


def canonical(value: Mapping[str, Any]) -> bytes:
    """Sorted keys, no whitespace, UTF-8, as for events (``retention.evidence``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()[:16]


def _b64(value: str, what: str, size: int) -> bytes:
    try:
        raw = base64.b64decode(str(value).strip(), validate=True)
    except (binascii.Error, ValueError):
        raise AnchorError(f"{what} is not base64") from None
    if len(raw) != size:
        raise AnchorError(f"{what} has {len(raw)} bytes, not {size}")
    return raw


@dataclass(frozen=True, slots=True)
class Signer:
    """An Ed25519 private key and its public half; ``repr`` never shows the key."""

    private_key: Ed25519PrivateKey
    public_key: bytes

    def __repr__(self) -> str:
        return f"Signer(key_id={self.key_id!r})"

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)

    @property
    def public_key_b64(self) -> str:
        return base64.b64encode(self.public_key).decode()

    def sign(self, message: bytes) -> bytes:
        signature: bytes = self.private_key.sign(message)
        return signature


def signer_load(seed_b64: str) -> Signer:
    """The signer of RETENTION_SIGNING_KEY: the base64 of a 32-byte Ed25519 seed."""
    ed25519 = _ed25519()
    seed = _b64(seed_b64, "the signing key", 32)
    private = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return Signer(private, public)


def public_key_load(public_b64: str) -> bytes:
    """A raw 32-byte Ed25519 public key from its base64."""
    return _b64(public_b64, "the public key", 32)


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


def head_sign(*, seq: int, chain: str, anchored_at: datetime, signer: Signer) -> SignedHead:
    unsigned = SignedHead(
        seq=seq,
        chain=chain,
        anchored_at=timestamp(anchored_at),
        key_id=signer.key_id,
        signature="",
    )
    signature = signer.sign(canonical(unsigned.statement()))
    return SignedHead(
        seq=seq,
        chain=chain,
        anchored_at=unsigned.anchored_at,
        key_id=signer.key_id,
        signature=base64.b64encode(signature).decode(),
    )


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
    public = public_keys.get(head.key_id)
    if public is None:
        known = ", ".join(sorted(public_keys)) or "none"
        return f"signed by key {head.key_id}, which is not a trusted key (trusted: {known})"
    try:
        signature = _b64(head.signature, "the signature", 64)
    except AnchorError as exc:
        return f"bad signature ({exc})"
    ed25519 = _ed25519()
    from cryptography.exceptions import InvalidSignature

    try:
        ed25519.Ed25519PublicKey.from_public_bytes(public).verify(
            signature, canonical(head.statement())
        )
    except InvalidSignature:
        return "bad signature: the statement is not what the key signed"
    return None
