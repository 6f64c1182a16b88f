"""What an upload may be: its size, and its type as read from its first bytes.

The type comes from magic numbers (``filetype``: pure Python, no libmagic,
reads at most the first 261 bytes), never from the client's Content-Type or
file name, which the client chooses. Plain text has no magic number: it is
recognised as UTF-8 without control characters.

Settings (read when used): ``UPLOADS_MAX_BYTES`` and ``UPLOADS_ALLOWED_TYPES``
(``{data_class: [mime, ...]}``; a class not listed accepts nothing).
"""

from __future__ import annotations

import codecs
from typing import Any

import filetype
from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile

from retention.api import RetentionError

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
SNIFF_BYTES = 8192
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\x1b")


class UploadRejected(RetentionError):
    code = "upload_rejected"


class FileTooLarge(UploadRejected):
    code = "file_too_large"


class EmptyFile(UploadRejected):
    code = "empty_file"


class UnsupportedFileType(UploadRejected):
    code = "unsupported_file_type"


def max_upload_bytes() -> int:
    return int(getattr(settings, "UPLOADS_MAX_BYTES", DEFAULT_MAX_BYTES))


def allowed_types(data_class: str) -> list[str]:
    return list(getattr(settings, "UPLOADS_ALLOWED_TYPES", {}).get(data_class, []))


def _is_text(head: bytes) -> bool:
    # An incremental decoder accepts a multi-byte character cut at the end.
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return not any(ord(ch) < 0x20 and ord(ch) not in _TEXT_CONTROLS for ch in text)


def sniff_content_type(head: bytes) -> str | None:
    """The MIME type the bytes say they are, or None when they say nothing we know."""
    if not head:
        return None
    kind = filetype.guess(head)
    if kind is not None:
        return str(kind.mime)
    return "text/plain" if _is_text(head) else None


def upload_content_type(*, data_class: str, file: Any) -> str:
    """Check size and type; return the sniffed type. Raise UploadRejected otherwise."""
    limit = max_upload_bytes()
    if file.size is not None and file.size > limit:
        raise FileTooLarge(f"The file is larger than the limit of {limit} bytes.")
    if not file.size:
        raise EmptyFile("The file is empty.")
    file.seek(0)
    head = file.read(SNIFF_BYTES)
    file.seek(0)
    sniffed = sniff_content_type(head)
    allowed = allowed_types(data_class)
    if sniffed is None or sniffed not in allowed:
        found = f"looks like {sniffed}" if sniffed else "is of no recognised type"
        raise UnsupportedFileType(
            f"The file {found}; {data_class} accepts "
            f"{', '.join(allowed) if allowed else 'no uploads through the API'}."
        )
    return sniffed


class SizeLimitUploadHandler(FileUploadHandler):
    """Stops storing a file as soon as it passes the limit (no large temp file).

    Put it first in ``request.upload_handlers``; read ``exceeded`` after parsing.
    """

    def __init__(self, request: Any = None, *, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.exceeded = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.exceeded = True
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
