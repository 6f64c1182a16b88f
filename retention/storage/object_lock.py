"""S3 Object Lock legal holds on single objects: set, clear, read, and the bucket's lock.

Lethe mirrors its legal holds into the store (``RETENTION_OBJECT_LOCK_HOLDS``)
so that no delete of a held version succeeds, whoever sends it. S3 keeps a
legal hold per version; these calls address the current version of the exact
key, which is the only one, since record keys are never reused. One request
per object (S3 has no batch call for legal holds), a few in flight at once:
boto3 clients are thread-safe and nothing here touches the database. Reasons
never contain an object key.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from botocore.exceptions import ClientError

from .base import StorageUnavailable
from .s3 import REQUEST_ERRORS, S3Adapter
from .s3_errors import NETWORK_ERRORS, error_parts, scrub

# Requests in flight at once per call; moto answers ~200 legal-hold puts/s
# here whatever the number, S3 scales with it.
THREADS = 8
_ABSENT = frozenset({"NoSuchKey", "NoSuchVersion", "404"})
# S3 answers a never-locked object with this error; moto with an empty LegalHold.
_NEVER_LOCKED = frozenset({"NoSuchObjectLockConfiguration"})


class LockState(enum.StrEnum):
    ON = "on"
    OFF = "off"
    # No such object (or only a delete marker): nothing to hold.
    ABSENT = "absent"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class LockResult:
    key: str
    state: LockState
    reason: str = ""


class NotLockable(Exception):
    """The storage is not one whose objects can carry an S3 legal hold."""


class ObjectLock:
    """Legal holds on the objects of one S3 storage, through its adapter's client."""

    def __init__(self, adapter: S3Adapter, *, threads: int = THREADS) -> None:
        self.adapter = adapter
        self.threads = threads

    @classmethod
    def for_alias(cls, alias: str) -> ObjectLock:
        from . import get_adapter

        adapter = get_adapter(alias)
        if not isinstance(adapter, S3Adapter):
            raise NotLockable(
                f"storage {alias!r} is not an S3 storage ({type(adapter).__name__}): "
                "its objects cannot carry an Object Lock legal hold"
            )
        return cls(adapter)

    @property
    def alias(self) -> str:
        return self.adapter.alias

    def enabled(self) -> bool:
        """Whether the bucket has Object Lock enabled (GetObjectLockConfiguration).

        Raises StorageUnavailable when the bucket or its endpoint cannot be asked.
        """
        adapter = self.adapter
        try:
            answer = adapter.client.get_object_lock_configuration(Bucket=adapter.bucket)
        except ClientError as exc:
            code, _, message = error_parts(exc)
            if code == "ObjectLockConfigurationNotFoundError":
                return False
            raise StorageUnavailable(f"{_describe(adapter)}: {code}: {message}") from exc
        except NETWORK_ERRORS as exc:
            raise StorageUnavailable(
                f"{_describe(adapter)}: endpoint {adapter.client.meta.endpoint_url} "
                f"unreachable ({type(exc).__name__})"
            ) from exc
        except REQUEST_ERRORS as exc:
            raise StorageUnavailable(f"{_describe(adapter)}: {type(exc).__name__}") from exc
        config = answer.get("ObjectLockConfiguration") or {}
        return config.get("ObjectLockEnabled") == "Enabled"

    def set_many(self, keys: Iterable[str], *, on: bool) -> dict[str, LockResult]:
        """Set (``on``) or clear the legal hold of each key's current version."""
        return self._each(list(dict.fromkeys(keys)), lambda key: self._set(key, on))

    def get_many(self, keys: Iterable[str]) -> dict[str, LockResult]:
        """Each key's legal hold (GetObjectLegalHold): ON, OFF, ABSENT, or ERROR."""
        return self._each(list(dict.fromkeys(keys)), self._get)

    def _each(self, keys: list[str], call: Callable[[str], LockResult]) -> dict[str, LockResult]:
        if len(keys) <= 1 or self.threads <= 1:
            return {key: call(key) for key in keys}
        with ThreadPoolExecutor(max_workers=min(self.threads, len(keys))) as pool:
            return dict(zip(keys, pool.map(call, keys), strict=True))

    def _set(self, key: str, on: bool) -> LockResult:
        adapter = self.adapter
        s3_key = adapter._s3_key(key)
        try:
            adapter.client.put_object_legal_hold(
                Bucket=adapter.bucket, Key=s3_key, LegalHold={"Status": "ON" if on else "OFF"}
            )
        except REQUEST_ERRORS as exc:
            failure = self._failure(key, exc)
            if failure.state is LockState.ERROR and self._absent(s3_key):
                # S3 says NoSuchKey for a missing object; moto answers 500.
                return LockResult(key, LockState.ABSENT)
            return failure
        return LockResult(key, LockState.ON if on else LockState.OFF)

    def _get(self, key: str) -> LockResult:
        adapter = self.adapter
        try:
            answer = adapter.client.get_object_legal_hold(
                Bucket=adapter.bucket, Key=adapter._s3_key(key)
            )
        except ClientError as exc:
            code, _, _ = error_parts(exc)
            if code in _NEVER_LOCKED:
                return LockResult(key, LockState.OFF)
            return self._failure(key, exc)
        except REQUEST_ERRORS as exc:
            return self._failure(key, exc)
        status = (answer.get("LegalHold") or {}).get("Status")
        return LockResult(key, LockState.ON if status == "ON" else LockState.OFF)

    def _absent(self, s3_key: str) -> bool:
        try:
            self.adapter.client.head_object(Bucket=self.adapter.bucket, Key=s3_key)
        except ClientError as exc:
            code, status, _ = error_parts(exc)
            return status == 404 or code in _ABSENT
        except REQUEST_ERRORS:
            return False
        return False

    def _failure(self, key: str, exc: Exception) -> LockResult:
        if isinstance(exc, ClientError):
            code, status, message = error_parts(exc)
            if status == 404 or code in _ABSENT:
                return LockResult(key, LockState.ABSENT)
            reason = f"{code}: {scrub(message, key, self.adapter._s3_key(key))}"
            return LockResult(key, LockState.ERROR, reason)
        # Network errors carry the request URL, which holds the key: the type only.
        return LockResult(
            key, LockState.ERROR, f"{type(exc).__name__}: no answer from the endpoint"
        )


def _describe(adapter: S3Adapter) -> str:
    return f"storage {adapter.alias!r}, bucket {adapter.bucket!r}"
