"""HMAC-SHA256 request signatures for the control plane.

The signed message is ``METHOD\\nPATH\\nTIMESTAMP\\nSHA256(BODY)`` (hex digest,
Unix seconds, the path without query string). Clients send the key id, the
timestamp and the hex signature in three headers. Pure functions: the replay
record is a service (``request_signature_consume``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime

KEY_ID_HEADER = "X-Lethe-Key-Id"
TIMESTAMP_HEADER = "X-Lethe-Timestamp"
SIGNATURE_HEADER = "X-Lethe-Signature"

_SIGNATURE = re.compile(r"^[0-9a-fA-F]{64}$")
_TIMESTAMP = re.compile(r"^[0-9]{1,10}$")


class SignatureError(Exception):
    """A refused signature; ``code`` is stable and safe to show to the caller."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def canonical_message(*, method: str, path: str, timestamp: str, body: bytes) -> bytes:
    digest = hashlib.sha256(body).hexdigest()
    return f"{method.upper()}\n{path}\n{timestamp}\n{digest}".encode()


def sign(*, secret: str, method: str, path: str, timestamp: str, body: bytes) -> str:
    message = canonical_message(method=method, path=path, timestamp=timestamp, body=body)
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(
    *,
    key_id: str,
    secret: str,
    method: str,
    path: str,
    body: bytes,
    timestamp: int | None = None,
) -> dict[str, str]:
    """The three headers a client sends; ``timestamp`` defaults to now."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {
        KEY_ID_HEADER: key_id,
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: sign(secret=secret, method=method, path=path, timestamp=stamp, body=body),
    }


def replay_digest(*, key_id: str, signature: str) -> str:
    return hashlib.sha256(f"{key_id}\n{signature.lower()}".encode()).hexdigest()


def verify(
    *,
    headers: Mapping[str, str],
    method: str,
    path: str,
    body: bytes,
    keys: Mapping[str, str],
    now: datetime,
    window_seconds: float,
) -> datetime:
    """Return the signed time of a valid, fresh request; raise SignatureError otherwise.

    The signature is checked before the clock, so only a holder of a key
    learns whether a request was refused as stale.
    """
    key_id = headers.get(KEY_ID_HEADER, "")
    timestamp = headers.get(TIMESTAMP_HEADER, "")
    signature = headers.get(SIGNATURE_HEADER, "")
    if not (key_id and timestamp and signature):
        raise SignatureError(
            f"Signed request expected: send {KEY_ID_HEADER}, {TIMESTAMP_HEADER} and "
            f"{SIGNATURE_HEADER}.",
            code="signature_missing",
        )
    if not _TIMESTAMP.match(timestamp) or not _SIGNATURE.match(signature):
        raise SignatureError(
            f"{TIMESTAMP_HEADER} must be Unix seconds and {SIGNATURE_HEADER} a hex HMAC-SHA256.",
            code="signature_malformed",
        )
    secret = keys.get(key_id)
    if secret is None:
        raise SignatureError("Unknown signing key id.", code="signature_key_unknown")
    expected = sign(secret=secret, method=method, path=path, timestamp=timestamp, body=body)
    if not hmac.compare_digest(expected.encode(), signature.lower().encode()):
        raise SignatureError("The signature does not match the request.", code="signature_invalid")
    signed_at = datetime.fromtimestamp(int(timestamp), tz=UTC)
    if abs((now - signed_at).total_seconds()) > window_seconds:
        raise SignatureError(
            f"The timestamp is more than {window_seconds:g} seconds away from the server's "
            "clock; sign the request again.",
            code="signature_expired",
        )
    return signed_at
