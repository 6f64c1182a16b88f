"""Delete from S3 with batched DeleteObjects and report one outcome per key.

It talks to boto3 directly: ``S3Storage.delete()`` swallows every 404, even
the one for a bucket that does not exist, so a misconfigured store would look
like a successful deletion. Reasons and errors never contain an object key:
they end up in the audit trail, and keys may carry personal data.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.parsers import ResponseParserError
from django.core.exceptions import ImproperlyConfigured

from .base import KeyResult, Outcome, StorageUnavailable
from .keys import MAX_KEY_BYTES, MalformedKey, validate_object_key
from .s3_errors import (
    DELETED,
    NETWORK_ERRORS,
    NO_ANSWER,
    THROTTLE_CODES,
    THROTTLE_STATUSES,
    TRANSIENT_CODES,
    TRANSIENT_STATUSES,
    UNAVAILABLE_CODES,
    Failure,
    error_parts,
    key_error_outcome,
    scrub,
)
from .s3_outage import EndpointOutage, client_config

if TYPE_CHECKING:
    from storages.backends.s3 import S3Storage
    from types_boto3_s3 import S3Client
    from types_boto3_s3.type_defs import (
        DeletedObjectTypeDef,
        ErrorTypeDef,
        ObjectIdentifierTypeDef,
    )

MAX_CHUNK_SIZE = 1000

# Everything a request can raise that says something about the request.
REQUEST_ERRORS = (ClientError, BotoCoreError, ResponseParserError)
# A key's outcome is its worst version's: one locked version keeps the object.
_RANK = {
    Outcome.ABSENT: 0,
    Outcome.DELETED: 1,
    Outcome.TRANSIENT: 2,
    Outcome.LOCKED: 3,
    Outcome.PERMANENT: 4,
}


@dataclass(frozen=True, slots=True)
class _Target:
    """One entry of a DeleteObjects request: a key, or one version of it."""

    key: str
    s3_key: str
    version_id: str | None = None


class S3Adapter:
    # boto3 clients are thread-safe, and deleting touches no database.
    thread_safe = True

    def __init__(
        self,
        alias: str,
        client: S3Client,
        bucket: str,
        *,
        chunk_size: int = MAX_CHUNK_SIZE,
        prefix: str = "",
    ) -> None:
        if not bucket:
            raise ValueError(f"storage {alias!r}: no bucket name")
        if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
            raise ValueError(f"chunk_size must be between 1 and {MAX_CHUNK_SIZE}, got {chunk_size}")
        self.alias = alias
        self.client = client
        self.bucket = bucket
        self.chunk_size = chunk_size
        # S3Storage stores name N under "<location>/N"; records hold N.
        self.prefix = prefix.strip("/")
        self.outage = EndpointOutage(alias)

    @classmethod
    def from_storage(
        cls,
        alias: str,
        storage: S3Storage,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_attempts: int = 3,
        chunk_size: int = MAX_CHUNK_SIZE,
    ) -> S3Adapter:
        if not storage.bucket_name:
            raise ImproperlyConfigured(
                f"storage {alias!r} has no bucket name (AWS_STORAGE_BUCKET_NAME)"
            )
        if storage.session_profile:
            session = boto3.session.Session(profile_name=storage.session_profile)
        else:
            session = boto3.session.Session(
                aws_access_key_id=storage.access_key,
                aws_secret_access_key=storage.secret_key,
                aws_session_token=storage.security_token,
            )
        config = client_config(
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            max_attempts=max_attempts,
        )
        # Keep the storage's addressing style, signature version and proxies.
        base_config = getattr(storage, "client_config", None)
        if base_config is not None:
            config = base_config.merge(config)
        client = session.client(
            "s3",
            region_name=storage.region_name,
            use_ssl=storage.use_ssl,
            endpoint_url=storage.endpoint_url,
            verify=storage.verify,
            config=config,
        )
        return cls(
            alias,
            client,
            storage.bucket_name,
            chunk_size=chunk_size,
            prefix=storage.location or "",
        )

    def check(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code, status, message = error_parts(exc)
            if code in {"404", "NoSuchBucket"} or status == 404:
                detail = "bucket does not exist"
            elif code in {"403", "AccessDenied"} or status == 403:
                detail = "access denied"
            else:
                detail = f"{code}: {message}"
            raise StorageUnavailable(self._describe(detail)) from exc
        except NETWORK_ERRORS as exc:
            detail = (
                f"endpoint {self.client.meta.endpoint_url} unreachable or not answering "
                f"as S3 ({type(exc).__name__})"
            )
            raise StorageUnavailable(self._describe(detail)) from exc
        except REQUEST_ERRORS as exc:
            detail = f"{type(exc).__name__}: {exc}"
            raise StorageUnavailable(self._describe(detail)) from exc

    def delete_many(
        self,
        keys: Sequence[str],
        *,
        erase_versions: bool = False,
        probe: Collection[str] = (),
    ) -> dict[str, KeyResult]:
        unique = list(dict.fromkeys(keys))
        results: dict[str, KeyResult] = {}
        candidates: list[str] = []
        for key in unique:
            try:
                validate_object_key(key)
                size = len(self._s3_key(key).encode("utf-8"))
                if size > MAX_KEY_BYTES:
                    raise MalformedKey(
                        f"object key is {size} bytes under location {self.prefix!r}, "
                        f"more than {MAX_KEY_BYTES}"
                    )
            except MalformedKey as exc:
                results[key] = KeyResult(key, Outcome.PERMANENT, f"MalformedKey: {exc}")
            else:
                candidates.append(key)

        if erase_versions:
            targets = self._version_targets(candidates, results)
        else:
            targets = self._probed_targets(candidates, set(probe), results)

        outcomes: dict[str, list[Failure]] = {}
        for chunk in _chunks(targets, self.chunk_size):
            for target, answer in self._delete_chunk(chunk):
                outcomes.setdefault(target.key, []).append(answer)
        for key, per_entry in outcomes.items():
            outcome, reason, _ = max(per_entry, key=lambda item: _RANK[item[0]])
            throttled = any(entry.throttled for entry in per_entry)
            results[key] = KeyResult(key, outcome, reason, throttled)
        return {key: results[key] for key in unique}

    def exists_many(
        self, keys: Sequence[str], *, any_version: bool = False
    ) -> dict[str, bool | None]:
        """Whether each key's object is in the bucket (None: the store would not say).

        ``any_version``: any version of the exact key counts, not only a
        current one (a delete marker hides the data, it does not remove it).
        """
        answers: dict[str, bool | None] = {}
        for key in dict.fromkeys(keys):
            s3_key = self._s3_key(key)
            try:
                if any_version:
                    pages = self.client.get_paginator("list_object_versions").paginate(
                        Bucket=self.bucket, Prefix=s3_key, Delimiter="/"
                    )
                    answers[key] = any(
                        entry["Key"] == s3_key
                        for page in pages
                        for entry in page.get("Versions", ())
                    )
                    continue
                self.client.head_object(Bucket=self.bucket, Key=s3_key)
                answers[key] = True
            except ClientError as exc:
                code, status, _ = error_parts(exc)
                found = status == 404 or code in {"404", "NoSuchKey"}
                answers[key] = False if found else None
            except REQUEST_ERRORS:
                answers[key] = None
        if False in answers.values():
            # A missing bucket answers HEAD with a bare 404 too.
            self.check()
        return answers

    def _s3_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _describe(self, detail: str) -> str:
        return f"storage {self.alias!r}, bucket {self.bucket!r}: {detail}"

    def _probed_targets(
        self, keys: Iterable[str], probe: set[str], results: dict[str, KeyResult]
    ) -> list[_Target]:
        targets: list[_Target] = []
        saw_not_found = False
        for key in keys:
            s3_key = self._s3_key(key)
            if key in probe:
                try:
                    self.client.head_object(Bucket=self.bucket, Key=s3_key)
                except ClientError as exc:
                    code, status, _ = error_parts(exc)
                    if status == 404 or code in {"404", "NoSuchKey"}:
                        saw_not_found = True
                        results[key] = KeyResult(key, Outcome.ABSENT)
                        continue
                    # Without s3:ListBucket a missing object answers 403;
                    # deleting is harmless either way, so do not give up here.
                    if status != 403:
                        results[key] = KeyResult(key, *self._request_failure(exc))
                        continue
                except REQUEST_ERRORS as exc:
                    results[key] = KeyResult(key, *self._request_failure(exc))
                    continue
            targets.append(_Target(key, s3_key))
        if saw_not_found:
            # HEAD on a missing bucket is a bare 404 too: make sure the objects
            # are gone, not the bucket, before reporting them absent.
            self.check()
        return targets

    def _version_targets(self, keys: Iterable[str], results: dict[str, KeyResult]) -> list[_Target]:
        targets: list[_Target] = []
        paginator = self.client.get_paginator("list_object_versions")
        for key in keys:
            s3_key = self._s3_key(key)
            # The delimiter folds "key/..." children into one common prefix;
            # siblings such as "key2" still need the exact-match filter.
            pages = paginator.paginate(Bucket=self.bucket, Prefix=s3_key, Delimiter="/")
            try:
                version_ids = [
                    entry["VersionId"]
                    for page in pages
                    for entry in itertools.chain(
                        page.get("Versions", ()), page.get("DeleteMarkers", ())
                    )
                    if entry["Key"] == s3_key
                ]
            except REQUEST_ERRORS as exc:
                results[key] = KeyResult(key, *self._request_failure(exc))
                continue
            if not version_ids:
                results[key] = KeyResult(key, Outcome.ABSENT)
                continue
            targets.extend(_Target(key, s3_key, version_id) for version_id in version_ids)
        return targets

    def _delete_chunk(self, chunk: Sequence[_Target]) -> Iterator[tuple[_Target, Failure]]:
        objects: list[ObjectIdentifierTypeDef] = []
        for target in chunk:
            entry: ObjectIdentifierTypeDef = {"Key": target.s3_key}
            if target.version_id is not None:
                entry["VersionId"] = target.version_id
            objects.append(entry)
        try:
            response = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": objects, "Quiet": False}
            )
        except REQUEST_ERRORS as exc:
            failure = self._request_failure(exc, keys=len(chunk))
            for target in chunk:
                yield target, failure
            return
        self.outage.answered()

        pending: dict[str, dict[str | None, _Target]] = {}
        for target in chunk:
            pending.setdefault(target.s3_key, {})[target.version_id] = target

        def claim(answer: DeletedObjectTypeDef | ErrorTypeDef) -> _Target | None:
            versions = pending.get(answer.get("Key", ""))
            if not versions:
                return None
            version_id = answer.get("VersionId")
            if version_id in versions:
                return versions.pop(version_id)
            if None in versions:
                return versions.pop(None)
            if version_id is None:
                # Some servers leave VersionId out of a per-version answer.
                return versions.pop(next(iter(versions)))
            return None

        for answer in response.get("Deleted", ()):
            deleted = claim(answer)
            if deleted is not None:
                yield deleted, DELETED
        for error in response.get("Errors", ()):
            failed = claim(error)
            if failed is None:
                continue
            code = error.get("Code", "")
            message = scrub(error.get("Message", ""), failed.key, failed.s3_key)
            yield (
                failed,
                Failure(
                    key_error_outcome(code, message), f"{code}: {message}", code in THROTTLE_CODES
                ),
            )
        for versions in pending.values():
            for unanswered in versions.values():
                yield unanswered, NO_ANSWER

    def _request_failure(self, exc: Exception, *, keys: int = 1) -> Failure:
        """Classify an error that failed a whole request."""
        if isinstance(exc, ClientError):
            code, status, message = error_parts(exc)
            if code in UNAVAILABLE_CODES:
                raise StorageUnavailable(self._describe(f"{code}: {message}")) from exc
            throttled = code in THROTTLE_CODES or status in THROTTLE_STATUSES
            if throttled or code in TRANSIENT_CODES or status in TRANSIENT_STATUSES:
                return Failure(Outcome.TRANSIENT, f"{code}: {message}", throttled)
            return Failure(Outcome.PERMANENT, f"{code}: {message}")
        if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
            raise StorageUnavailable(self._describe(str(exc))) from exc
        # The text of these errors contains the request URL, which for a HEAD
        # or a listing contains the key, so only the type is reported.
        if isinstance(exc, NETWORK_ERRORS):
            self.outage.unanswered(exc, keys)
            return Failure(Outcome.TRANSIENT, f"{type(exc).__name__}: no answer from the endpoint")
        return Failure(Outcome.PERMANENT, type(exc).__name__)


def _chunks(items: Sequence[_Target], size: int) -> Iterator[Sequence[_Target]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
