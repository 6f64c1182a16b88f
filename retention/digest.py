"""Keyed digests of object keys and of data subjects' ids.

The audit trail can name an object without revealing its key (keys often
embed customer names or file names), and a record names its data subject
without holding the subject's id (``subject_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from retention.conf import settings
from retention.exceptions import RetentionError

# Kept apart from object keys': a subject id never digests to an object key's digest.
SUBJECT_DOMAIN = b"retention.subject\x00"


def _secret() -> bytes:
    secret = settings.DIGEST_KEY
    if not secret:
        raise ImproperlyConfigured("RETENTION_DIGEST_KEY is not set (see check retention.E002).")
    return secret.encode()


def key_digest(object_key: str) -> str:
    return hmac.new(_secret(), object_key.encode(), hashlib.sha256).hexdigest()


def key_digests(object_keys: Iterable[str]) -> list[str]:
    """``key_digest`` of each key: the key read and its HMAC set up once, for a page."""
    return [digest.hex() for digest in key_digests_raw(object_keys)]


def key_digests_raw(object_keys: Iterable[str]) -> list[bytes]:
    """``key_digests`` as the 32 bytes of each digest."""
    keyed = hmac.new(_secret(), digestmod=hashlib.sha256)
    digests = []
    for object_key in object_keys:
        mac = keyed.copy()
        mac.update(object_key.encode())
        digests.append(mac.digest())
    return digests


def subject_id_text(subject_id: Any) -> str:
    """A data subject's id as the text its digest is taken of: a non-empty string or an int."""
    if isinstance(subject_id, bool) or not isinstance(subject_id, str | int):
        raise RetentionError(
            f"subject_id is a string or an integer (the host's stable id of the person), "
            f"not {type(subject_id).__name__}."
        )
    # Surrounding spaces are not part of an id: " 42" and "42" are one subject.
    text = str(subject_id).strip()
    if not text:
        raise RetentionError("subject_id is empty.")
    return text


def subject_digest(subject_id: Any) -> str:
    """The keyed digest (HMAC-SHA256, hex) of a data subject's id: what a record keeps of it."""
    text = subject_id_text(subject_id)
    return hmac.new(_secret(), SUBJECT_DOMAIN + text.encode(), hashlib.sha256).hexdigest()
