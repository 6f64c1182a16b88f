"""Where signed chain heads are written: a directory, or an S3 bucket and prefix.

A store never overwrites an anchor. A directory links a finished temporary
file into place (``os.link`` refuses an existing name); S3 answers a
``PutObject`` with ``If-None-Match: *`` for an existing key with 412, and a
bucket in Object Lock compliance mode keeps every version for its
retention period whoever asks, which is what makes an anchor trustworthy.

``RETENTION_EVIDENCE_ANCHOR`` is ``s3://bucket/prefix``, an absolute directory
path (or ``file:///path``), or a dict ``{"url": ..., "endpoint_url": ...,
"region_name": ..., "access_key": ..., "secret_key": ...}`` (the S3 client's
options; without them boto3's own chain applies: environment, instance role).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from retention.receipts.signed_heads import HEADS_DIR, name_seq

S3_OPTIONS = ("endpoint_url", "region_name", "access_key", "secret_key")
# Anchoring runs when a run closes: a store that does not answer must not hold it for long.
S3_TIMEOUT_SECONDS = 10


class AnchorStoreError(Exception):
    """The store could not be read or written; the message names no secret."""

    def __init__(self, message: str, *, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class AnchorExists(AnchorStoreError):
    """An anchor of that name is already there (anchors are never overwritten)."""


class AnchorStore(Protocol):
    @property
    def description(self) -> str: ...

    def put(self, name: str, body: bytes) -> None:
        """Write a new anchor; AnchorExists when the name is taken."""

    def get(self, name: str) -> bytes: ...

    def names(self, folder: str = HEADS_DIR) -> list[str]:
        """Every anchor's name (``heads/<seq>.json``), in seq order; or every ``.json``
        entry of another folder (``erasures/``: the erasure journal), sorted."""


@dataclass(frozen=True, slots=True)
class AnchorLocation:
    kind: str  # "s3" or "directory"
    path: str = ""
    bucket: str = ""
    prefix: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def description(self) -> str:
        if self.kind == "s3":
            return f"s3://{self.bucket}/{self.prefix}"
        return self.path


def location_parse(value: str | Mapping[str, Any]) -> AnchorLocation | None:
    """The setting's value as a location; None when empty (anchoring off).

    Raises ValueError when malformed (check retention.E030 reports it).
    """
    options: dict[str, Any] = {}
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"url", *S3_OPTIONS})
        if unknown:
            raise ValueError(
                f"unknown key(s) {', '.join(map(repr, unknown))}; "
                f"known: 'url', {', '.join(map(repr, S3_OPTIONS))}"
            )
        url = value.get("url") or ""
        if not isinstance(url, str):
            raise ValueError("'url' is not a string")
        options = {k: v for k, v in value.items() if k != "url" and v not in (None, "")}
    elif isinstance(value, str):
        url = value
    else:
        raise ValueError(f"expected a string or a dict, not {type(value).__name__}")
    url = url.strip()
    if not url:
        return None
    if url.startswith("s3://"):
        parts = urlsplit(url)
        if not parts.netloc or parts.query or parts.fragment:
            raise ValueError("an S3 location is s3://bucket or s3://bucket/prefix")
        prefix = parts.path.strip("/")
        return AnchorLocation(
            "s3", bucket=parts.netloc, prefix=f"{prefix}/" if prefix else "", options=options
        )
    if url.startswith("file://"):
        url = urlsplit(url).path
    elif "://" in url:
        raise ValueError(f"unknown scheme in {url.split('://')[0]!r}: use s3:// or a directory")
    if not os.path.isabs(url):
        raise ValueError("a directory must be given as an absolute path")
    if options:
        raise ValueError("S3 client options given for a directory")
    return AnchorLocation("directory", path=os.path.normpath(url))


def anchor_store(value: str | Mapping[str, Any]) -> AnchorStore | None:
    """The store the setting names; None when anchoring is off."""
    location = location_parse(value)
    if location is None:
        return None
    if location.kind == "s3":
        return S3AnchorStore(location)
    return DirectoryAnchorStore(Path(location.path))


class DirectoryAnchorStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def description(self) -> str:
        return str(self.root)

    def put(self, name: str, body: bytes) -> None:
        target = self.root / name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".anchor-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(body)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.chmod(temporary, 0o444)
                self._place(temporary, target)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
            _fsync_directory(target.parent)
        except FileExistsError:
            raise AnchorExists(f"{name} is already in {self.root}") from None
        except OSError as exc:
            raise AnchorStoreError(
                f"cannot write {name} in {self.root}: {exc.strerror or exc}"
            ) from exc

    @staticmethod
    def _place(temporary: str, target: Path) -> None:
        """Move the finished file into place, never over an existing anchor."""
        try:
            os.link(temporary, target)  # atomic, and refuses an existing name
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            # A filesystem without hard links: checked, then replaced (not atomic against
            # a second writer of the same seq, which would write the same head).
            if target.exists():
                raise FileExistsError(errno.EEXIST, "exists", str(target)) from None
            os.replace(temporary, target)

    def get(self, name: str) -> bytes:
        try:
            return (self.root / name).read_bytes()
        except OSError as exc:
            raise AnchorStoreError(
                f"cannot read {name} in {self.root}: {exc.strerror or exc}"
            ) from exc

    def names(self, folder: str = HEADS_DIR) -> list[str]:
        heads = self.root / folder
        try:
            found = [f"{folder}/{entry.name}" for entry in heads.iterdir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AnchorStoreError(f"cannot list {heads}: {exc.strerror or exc}") from exc
        return sorted(name for name in found if _listed(name, folder))


def _listed(name: str, folder: str) -> bool:
    """A signed head's name in ``heads/``; any finished ``.json`` entry elsewhere."""
    if folder == HEADS_DIR:
        return name_seq(name) is not None
    return name.endswith(".json") and not name.rsplit("/", 1)[-1].startswith(".")


def _fsync_directory(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class S3AnchorStore:
    def __init__(self, location: AnchorLocation) -> None:
        self.location = location
        self._client: Any = None

    @property
    def description(self) -> str:
        return self.location.description

    def _s3(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise AnchorStoreError(
                    'an S3 anchor store needs boto3 (pip install "django-lethe[s3]")'
                ) from None
            options = self.location.options
            self._client = boto3.session.Session().client(
                "s3",
                endpoint_url=options.get("endpoint_url"),
                region_name=options.get("region_name"),
                aws_access_key_id=options.get("access_key"),
                aws_secret_access_key=options.get("secret_key"),
                config=Config(
                    connect_timeout=S3_TIMEOUT_SECONDS,
                    read_timeout=S3_TIMEOUT_SECONDS,
                    retries={"mode": "standard", "total_max_attempts": 3},
                ),
            )
        return self._client

    def _key(self, name: str) -> str:
        return f"{self.location.prefix}{name}"

    def _call(self, what: str, name: str, fn: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(Bucket=self.location.bucket, **kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
            code = str(error.get("Code") or status or "error")
            if code in ("PreconditionFailed", "412"):
                raise AnchorExists(f"{name} is already in {self.description}") from None
            raise AnchorStoreError(
                f"S3 {what} {name} in {self.description}: {code}", code=code
            ) from None
        except BotoCoreError as exc:
            raise AnchorStoreError(
                f"S3 {what} {name} in {self.description}: {type(exc).__name__}"
            ) from None

    def put(self, name: str, body: bytes) -> None:
        s3 = self._s3()
        key = self._key(name)
        # Also asked first: a store that ignores If-None-Match would overwrite.
        try:
            self._call("head", name, s3.head_object, Key=key)
        except AnchorExists:
            raise
        except AnchorStoreError as exc:
            if exc.code not in ("404", "NoSuchKey", "NotFound"):
                raise
        else:
            raise AnchorExists(f"{name} is already in {self.description}")
        self._call(
            "put",
            name,
            s3.put_object,
            Key=key,
            Body=body,
            ContentType="application/json",
            IfNoneMatch="*",
        )

    def get(self, name: str) -> bytes:
        response = self._call("get", name, self._s3().get_object, Key=self._key(name))
        data: bytes = response["Body"].read()
        return data

    def names(self, folder: str = HEADS_DIR) -> list[str]:
        s3 = self._s3()
        prefix = self._key(f"{folder}/")
        found: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call("list", f"{folder}/", s3.list_objects_v2, **kwargs)
            for entry in page.get("Contents", []):
                name = entry["Key"][len(self.location.prefix) :]
                if _listed(name, folder):
                    found.append(name)
            if not page.get("IsTruncated"):
                break
            token = page.get("NextContinuationToken")
        return sorted(found)
