"""Reads of uploads, scoped to one tenant: another tenant's id does not exist."""

from __future__ import annotations

import uuid

from uploads.models import Upload


def upload_get(*, tenant_id: str, upload_id: str | uuid.UUID) -> Upload:
    """The tenant's upload; ``Upload.DoesNotExist`` for a foreign or malformed id."""
    if not tenant_id:
        raise ValueError("a tenant id is required")
    try:
        key = upload_id if isinstance(upload_id, uuid.UUID) else uuid.UUID(str(upload_id))
    except ValueError:
        raise Upload.DoesNotExist(f"{upload_id!r} is not an upload id") from None
    return Upload.objects.select_related("retention_record").get(tenant_id=tenant_id, pk=key)
