"""Keyed digest of object keys: the audit trail can name an object without
revealing its key (keys often embed customer names or file names)."""

from __future__ import annotations

import hashlib
import hmac

from django.core.exceptions import ImproperlyConfigured

from retention.conf import settings


def key_digest(object_key: str) -> str:
    secret = settings.DIGEST_KEY
    if not secret:
        raise ImproperlyConfigured("RETENTION_DIGEST_KEY is not set (see check retention.E002).")
    return hmac.new(secret.encode(), object_key.encode(), hashlib.sha256).hexdigest()
