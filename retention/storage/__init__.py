"""Storage adapters: how the engine removes objects from a configured store.

``get_adapter(alias)`` picks the adapter for a ``STORAGES`` alias when it is
first asked for, and keeps it for the process: building an S3 client costs
about a quarter of a second, once per run and once per queued batch
otherwise. Changing STORAGES or RETENTION_STORAGE_ADAPTERS (override_settings,
per-test storages) forgets them. boto3 is only imported when an S3 storage is
actually in use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.files.storage import storages
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from .base import KeyResult, Outcome, StorageAdapter, StorageUnavailable
from .keys import MalformedKey, validate_object_key

if TYPE_CHECKING:
    from django.core.files.storage import Storage

__all__ = [
    "KeyResult",
    "MalformedKey",
    "Outcome",
    "StorageAdapter",
    "StorageUnavailable",
    "get_adapter",
    "validate_object_key",
]


_adapters: dict[str, StorageAdapter] = {}


@receiver(setting_changed)
def _forget_adapters(*, setting: str, **kwargs: object) -> None:
    if setting in ("STORAGES", "RETENTION_STORAGE_ADAPTERS"):
        _adapters.clear()


def get_adapter(alias: str) -> StorageAdapter:
    """Return the adapter for ``settings.STORAGES[alias]``, built once per process."""
    adapter = _adapters.get(alias)
    if adapter is None:
        adapter = _adapters[alias] = _build_adapter(alias)
    return adapter


def _build_adapter(alias: str) -> StorageAdapter:
    """Build the adapter for ``settings.STORAGES[alias]``.

    ``RETENTION_STORAGE_ADAPTERS`` maps an alias to the dotted path of a
    factory ``(alias, storage) -> StorageAdapter`` and wins over the default
    choice: S3Adapter for django-storages' S3Storage, DjangoStorageAdapter for
    anything else. An unknown alias raises django's InvalidStorageError.
    """
    storage = storages[alias]
    factories: dict[str, str] = getattr(settings, "RETENTION_STORAGE_ADAPTERS", None) or {}
    if alias in factories:
        factory = import_string(factories[alias])
        adapter: StorageAdapter = factory(alias, storage)
        return adapter
    if _is_s3_storage(storage):
        from .s3 import S3Adapter

        return S3Adapter.from_storage(alias, storage)
    from .django import DjangoStorageAdapter

    return DjangoStorageAdapter(alias, storage)


def _is_s3_storage(storage: Storage) -> bool:
    try:
        from storages.backends.s3 import S3Storage
    except ImportError:
        # django-storages (or boto3) is optional for hosts without S3.
        return False
    return isinstance(storage, S3Storage)
