"""Signing the chain head: the server's half of a signed head.

The format, the name in a store and checking a signature are the offline
verifier's (``retention.receipts.signed_heads``), which a tenant runs; only
the signer, which holds the private key (RETENTION_SIGNING_KEY), lives here.
No Django and no database either: ``cryptography`` is imported only when a
key is loaded.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from retention.receipts.evidence import timestamp
from retention.receipts.signed_heads import (
    SignedHead,
    b64_decode,
    canonical,
    ed25519_module,
    key_id,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


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
    ed25519 = ed25519_module()
    seed = b64_decode(seed_b64, "the signing key", 32)
    private = ed25519.Ed25519PrivateKey.from_private_bytes(seed)
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return Signer(private, public)


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
