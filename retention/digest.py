"""Keyed digest of object keys: the audit trail can name an object without
revealing its key (keys often embed customer names or file names)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from django.core.exceptions import ImproperlyConfigured

from retention.conf import settings


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
