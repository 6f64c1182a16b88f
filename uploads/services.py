"""Write an upload and track it, as one unit.

The object is written first under a fresh, never-reused key; the record and
the Upload row follow in one transaction. If that transaction fails, the
object is removed again, so there is never an object without a record nor a
record without an object. (Called inside a transaction of the caller's that
later rolls back, the object stays: call it outside, or clean up in the
caller.)
"""

from __future__ import annotations

import logging
import re
import unicodedata
import uuid
from datetime import datetime

from django.core.files.base import File
from django.core.files.storage import storages
from django.db import transaction

from retention import api
from uploads.models import Upload

logger = logging.getLogger("uploads")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """ASCII, no path, no leading dots, at most 100 characters."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = unicodedata.normalize("NFKD", base).encode("ascii", "ignore").decode()
    base = _UNSAFE.sub("-", base).strip(".-")[:100]
    return base or "file"


def upload_key(*, tenant_id: str, data_class: str, name: str) -> str:
    # The UUID is the generation component: a re-upload of the same file
    # name gets a new key, so deleting an old generation never hits it.
    return f"{tenant_id}/{data_class}/{uuid.uuid4().hex}/{safe_name(name)}"


def upload_create(
    *,
    tenant_id: str,
    data_class: str,
    file: File,
    now: datetime | None = None,
    storage: str = "default",
    content_type: str = "",
    subject_id: str | int | None = None,
) -> Upload:
    # Refuse before writing anything when no policy would govern the object.
    api.policy_version_in_force(data_class)
    backend = storages[storage]
    key = upload_key(tenant_id=tenant_id, data_class=data_class, name=file.name or "file")
    saved_key = backend.save(key, file)
    try:
        with transaction.atomic():
            record = api.track(
                tenant_id=tenant_id,
                data_class=data_class,
                object_key=saved_key,
                storage=storage,
                subject_id=subject_id,
                size=file.size,
                now=now,
            )
            return Upload.objects.create(
                tenant_id=tenant_id,
                data_class=data_class,
                storage=storage,
                object_key=saved_key,
                original_name=(file.name or "file")[:255],
                size=file.size or 0,
                content_type=content_type[:100],
                retention_record=record,
                created_at=record.created_at,
            )
    except BaseException:
        try:
            backend.delete(saved_key)
        except Exception:
            # Keep the original error; the orphan is logged by id, not by key.
            logger.exception("could not remove an untracked upload for tenant %s", tenant_id)
        raise
