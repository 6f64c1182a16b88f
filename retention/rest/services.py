"""The API's writes: issuing and revoking tenant API keys, consuming signatures.

A key is shown once, when it is created, and stored only as a SHA-512 hash
(djangorestframework-api-key's scheme: a random 8-character prefix to find
the row, a 32-character secret). Revocation is final.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import cast

from django.db import IntegrityError, transaction

from retention.conf import settings
from retention.exceptions import RetentionError
from retention.rest.models import SeenRequestSignature, TenantAPIKey

_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,99}$")


class InvalidTenantKey(RetentionError):
    code = "invalid_tenant_key"


class SignatureReplayed(RetentionError):
    code = "signature_replayed"


def tenant_id_validate(tenant_id: str) -> str:
    tenant_id = (tenant_id or "").strip()
    if not _TENANT.match(tenant_id):
        raise InvalidTenantKey(
            f"{tenant_id!r} is not a tenant id: 1 to 100 letters, digits, '.', '_', ':', '@' "
            "or '-', starting with a letter or digit."
        )
    return tenant_id


def tenant_key_create(
    *, tenant_id: str, name: str = "", expiry_date: datetime | None = None
) -> tuple[TenantAPIKey, str]:
    """Return the new key's row and its clear text, which is never stored."""
    tenant_id = tenant_id_validate(tenant_id)
    name = (name or f"{tenant_id} API key").strip()[:50]
    key, secret = TenantAPIKey.objects.create_key(
        tenant_id=tenant_id, name=name, expiry_date=expiry_date
    )
    return cast(TenantAPIKey, key), secret


def tenant_key_revoke(*, key: TenantAPIKey, now: datetime) -> TenantAPIKey:
    with transaction.atomic():
        key = TenantAPIKey.objects.select_for_update().get(pk=key.pk)
        if not key.revoked:
            key.revoked = True
            key.revoked_at = now
            key.save(update_fields=["revoked", "revoked_at"])
    return key


def tenant_keys_revoke(*, tenant_id: str, now: datetime, prefix: str | None = None) -> int:
    """Revoke the tenant's live keys (or the one with ``prefix``); return how many."""
    keys = TenantAPIKey.objects.filter(tenant_id=tenant_id, revoked=False)
    if prefix:
        keys = keys.filter(prefix=prefix)
    return keys.update(revoked=True, revoked_at=now)


def request_signature_consume(
    *, digest: str, key_id: str, signed_at: datetime, now: datetime
) -> None:
    """Record a verified signature; raise SignatureReplayed if it was seen before.

    The primary key makes this race-free: of two identical requests arriving
    together, exactly one insert succeeds.
    """
    window = timedelta(seconds=settings.SIGNATURE_WINDOW_SECONDS)
    # Past the window a replay is refused as stale, so the row is no longer needed.
    SeenRequestSignature.objects.filter(signed_at__lt=now - window).delete()
    try:
        with transaction.atomic():
            SeenRequestSignature.objects.create(
                digest=digest, key_id=key_id, signed_at=signed_at, seen_at=now
            )
    except IntegrityError:
        raise SignatureReplayed("This signed request was already accepted once.") from None
