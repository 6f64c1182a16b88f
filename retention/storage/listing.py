"""List a store in key order, one entry per key: what reconciliation compares with the records.

Both listings yield keys as the records hold them (without the storage's
location), in the order of their UTF-8 bytes (S3's order, and Python's for
str), and hold one page (S3) or one directory (a Django storage) at a time,
so memory does not grow with the number of objects. Errors never name a key.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.core.exceptions import SuspiciousOperation

from .base import StorageAdapter, StorageUnavailable

if TYPE_CHECKING:
    from django.core.files.storage import Storage

    from .s3 import S3Adapter


@dataclass(frozen=True, slots=True)
class Listed:
    """One key of a store."""

    key: str
    # A current object is there (on a versioned bucket: the latest version
    # is an object, not a delete marker).
    present: bool
    # Of the current object; None when only old versions or markers remain.
    size: int | None = None
    modified: datetime | None = None
    # Versioned listing: the key's versions and delete markers other than
    # the current object.
    leftovers: int = 0


# Keys per listing request (S3's maximum); tests make it small to cross pages.
LIST_PAGE_SIZE = 1000


class ListingFailed(Exception):
    """The listing stopped before its end; the message names no key."""


def s3_objects(adapter: S3Adapter, prefix: str, *, versions: bool) -> Iterator[Listed]:
    """``ListObjectsV2`` pages, or ``ListObjectVersions`` pages with ``versions``."""
    from .s3 import REQUEST_ERRORS

    location = f"{adapter.prefix}/" if adapter.prefix else ""
    paginator = adapter.client.get_paginator(
        "list_object_versions" if versions else "list_objects_v2"
    )
    pages = paginator.paginate(
        Bucket=adapter.bucket,
        Prefix=location + prefix,
        PaginationConfig={"PageSize": LIST_PAGE_SIZE},
    )
    entries = _version_entries(pages) if versions else _object_entries(pages)
    try:
        for key, entry in entries:
            if key.startswith(location):
                yield _strip(entry, len(location))
    except REQUEST_ERRORS as exc:
        raise ListingFailed(
            f"storage {adapter.alias!r}, bucket {adapter.bucket!r}: listing failed "
            f"({type(exc).__name__})"
        ) from exc


def _strip(entry: Listed, length: int) -> Listed:
    if not length:
        return entry
    return Listed(entry.key[length:], entry.present, entry.size, entry.modified, entry.leftovers)


def _object_entries(pages: Any) -> Iterator[tuple[str, Listed]]:
    for page in pages:
        for item in page.get("Contents", ()):
            key = item["Key"]
            yield key, Listed(key, True, item.get("Size"), item.get("LastModified"))


def _version_entries(pages: Any) -> Iterator[tuple[str, Listed]]:
    """Fold each key's versions and delete markers (which may span pages) into one entry."""
    current: str | None = None
    latest: dict[str, Any] | None = None
    count = 0
    for page in pages:
        # Two lists per page, each in key order: merge them by key.
        versions = ((v["Key"], False, v) for v in page.get("Versions", ()))
        markers = ((m["Key"], True, m) for m in page.get("DeleteMarkers", ()))
        for key, is_marker, item in heapq.merge(versions, markers, key=lambda e: e[0]):
            if key != current:
                if current is not None:
                    yield current, _folded(current, latest, count)
                current, latest, count = key, None, 0
            count += 1
            if item.get("IsLatest") and not is_marker:
                latest = item
    if current is not None:
        yield current, _folded(current, latest, count)


def _folded(key: str, latest: dict[str, Any] | None, count: int) -> Listed:
    if latest is None:
        return Listed(key, False, leftovers=count)
    return Listed(key, True, latest.get("Size"), latest.get("LastModified"), count - 1)


def django_objects(alias: str, storage: Storage, prefix: str) -> Iterator[Listed]:
    """Walk ``listdir`` depth-first, each directory's entries in key order.

    A directory ``d`` sorts as ``d/``: every key under it starts with that,
    and no sibling's name holds a ``/``, so the walk yields keys in order.
    A missing top directory is an empty store.
    """
    top = prefix.rpartition("/")[0]
    try:
        yield from _walk(storage, top, prefix, top_level=True)
    except (OSError, SuspiciousOperation) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else ""
        raise ListingFailed(
            f"storage {alias!r}: listing failed ({type(exc).__name__}{': ' if detail else ''}"
            f"{detail})"
        ) from exc


def _walk(storage: Storage, directory: str, prefix: str, *, top_level: bool) -> Iterator[Listed]:
    try:
        dirs, files = storage.listdir(directory)
    except FileNotFoundError:
        if top_level:
            return
        raise
    base = f"{directory}/" if directory else ""
    entries = sorted([(f"{base}{d}/", True) for d in dirs] + [(f"{base}{f}", False) for f in files])
    for name, is_dir in entries:
        if is_dir:
            # Only directories that can hold keys starting with the prefix.
            if name.startswith(prefix) or prefix.startswith(name):
                yield from _walk(storage, name[:-1], prefix, top_level=False)
        elif name.startswith(prefix):
            yield Listed(name, True, storage.size(name), _modified(storage, name))


def _modified(storage: Storage, name: str) -> datetime | None:
    try:
        value = storage.get_modified_time(name)
    except NotImplementedError:
        return None
    if value.tzinfo is None:
        # USE_TZ = False: the storage answers in local time.
        value = datetime.fromtimestamp(value.timestamp(), tz=UTC)
    return value


def objects_listed(
    adapter: StorageAdapter, prefix: str = "", *, versions: bool = False
) -> Iterator[Listed]:
    """The listing of an adapter's store; StorageUnavailable for a store that cannot be listed.

    An adapter of its own (``RETENTION_STORAGE_ADAPTERS``) may offer
    ``iter_objects(prefix, *, versions)`` yielding ``Listed`` in key order.
    """
    from .django import DjangoStorageAdapter

    s3 = _as_s3(adapter)
    if s3 is not None:
        return s3_objects(s3, prefix, versions=versions)
    if isinstance(adapter, DjangoStorageAdapter):
        return django_objects(adapter.alias, adapter.storage, prefix)
    custom = getattr(adapter, "iter_objects", None)
    if custom is None:
        raise StorageUnavailable(
            f"storage {adapter.alias!r}: its adapter ({type(adapter).__name__}) cannot list "
            "the store (no iter_objects)"
        )
    listed: Iterator[Listed] = custom(prefix, versions=versions)
    return listed


def object_present(adapter: StorageAdapter, key: str) -> bool:
    """Whether the exact key is there now (a second look before a record is called missing)."""
    from .django import DjangoStorageAdapter

    s3 = _as_s3(adapter)
    if s3 is not None:
        from botocore.exceptions import ClientError

        from .s3 import REQUEST_ERRORS
        from .s3_errors import error_parts

        try:
            s3.client.head_object(Bucket=s3.bucket, Key=s3._s3_key(key))
        except REQUEST_ERRORS as exc:
            code, status, _ = error_parts(exc) if isinstance(exc, ClientError) else ("", 0, "")
            if status == 404 or code in {"404", "NoSuchKey"}:
                return False
            if status == 403:
                # Without s3:ListBucket a missing object answers 403 too: its
                # absence is not proven, so the record is not closed.
                return True
            raise ListingFailed(
                f"storage {adapter.alias!r}: could not look at an object ({type(exc).__name__})"
            ) from exc
        return True
    if isinstance(adapter, DjangoStorageAdapter):
        try:
            return bool(adapter.storage.exists(key))
        except (OSError, SuspiciousOperation) as exc:
            raise ListingFailed(
                f"storage {adapter.alias!r}: could not look at an object ({type(exc).__name__})"
            ) from exc
    custom = getattr(adapter, "object_present", None)
    return True if custom is None else bool(custom(key))


def _as_s3(adapter: StorageAdapter) -> S3Adapter | None:
    # boto3 is imported only where S3 is in use: no S3Adapter exists before
    # its module was imported.
    module = sys.modules.get("retention.storage.s3")
    if module is not None and isinstance(adapter, module.S3Adapter):
        s3: S3Adapter = adapter
        return s3
    return None
