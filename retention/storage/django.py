"""Delete through any Django storage backend, one key at a time.

The fallback for stores without a batch API (the demo's local filesystem,
third-party backends). It asks ``exists()`` first because ``delete()`` of a
missing file is silent in most backends, and an absent object must be
reported as such. Reasons never contain the key or a path built from it.

On a ``FileSystemStorage`` the folders a deletion leaves empty go too, up
to (never including) the storage's root: a key such as
``acme/2026/11/scan.jpg`` would otherwise leave ``acme/2026/11/`` behind
for every deleted upload.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from pathlib import Path

from django.core.exceptions import SuspiciousOperation
from django.core.files.storage import FileSystemStorage, Storage

from .base import KeyResult, Outcome, StorageUnavailable
from .keys import MalformedKey, validate_object_key


class DjangoStorageAdapter:
    def __init__(self, alias: str, storage: Storage) -> None:
        self.alias = alias
        self.storage = storage

    def check(self) -> None:
        if not isinstance(self.storage, FileSystemStorage):
            return
        location = Path(self.storage.location)
        # The storage creates missing directories on save, so a location that
        # does not exist yet is fine as long as it could be created.
        existing = location
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise StorageUnavailable(
                f"storage {self.alias!r}: {existing} is not a directory, "
                f"so location {location} cannot be used"
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise StorageUnavailable(
                f"storage {self.alias!r}: directory {existing} is not writable"
            )

    def delete_many(
        self,
        keys: Sequence[str],
        *,
        erase_versions: bool = False,
        probe: Collection[str] = (),
    ) -> dict[str, KeyResult]:
        # Every key is checked with exists(), so probe adds nothing; plain
        # Django storages have no versions to erase.
        return {key: self._delete_one(key) for key in dict.fromkeys(keys)}

    def _delete_one(self, key: str) -> KeyResult:
        try:
            validate_object_key(key)
        except MalformedKey as exc:
            return KeyResult(key, Outcome.PERMANENT, f"MalformedKey: {exc}")
        try:
            if not self.storage.exists(key):
                return KeyResult(key, Outcome.ABSENT)
            self.storage.delete(key)
        except SuspiciousOperation as exc:
            return KeyResult(key, Outcome.PERMANENT, type(exc).__name__)
        except PermissionError as exc:
            return KeyResult(key, Outcome.PERMANENT, _os_reason(exc, key))
        except OSError as exc:
            # TimeoutError and ConnectionError are OSErrors as well.
            return KeyResult(key, Outcome.TRANSIENT, _os_reason(exc, key))
        if isinstance(self.storage, FileSystemStorage):
            empty_folders_remove(self.storage, key)
        return KeyResult(key, Outcome.DELETED)


def empty_folders_remove(storage: FileSystemStorage, key: str) -> None:
    """Remove the folders above a deleted file that are empty now, bottom up,
    stopping at the first that is not, and never at or above the root.

    Race-safe: another process may write into a folder meanwhile ("not
    empty": it stays, and so do its parents) or remove it first (gone: go on
    up). Any other refusal (permissions) leaves the folders; the file is
    deleted either way.
    """
    root = os.path.abspath(storage.location)
    folder = os.path.dirname(os.path.abspath(storage.path(key)))
    while folder != root and folder.startswith(root + os.sep):
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError:
            # ENOTEMPTY or EEXIST (written into meanwhile), ENOTDIR (a
            # symlink), EACCES, EBUSY (a mount point): it stays, and so do
            # the folders above it.
            return
        folder = os.path.dirname(folder)


def _os_reason(exc: OSError, key: str) -> str:
    # str(exc) appends the file name, and the file name contains the key.
    detail = exc.strerror
    if detail is None and exc.args and isinstance(exc.args[0], str):
        detail = exc.args[0].replace(key, "<key>")
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
