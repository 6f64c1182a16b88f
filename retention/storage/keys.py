"""Reject object keys that cannot name exactly one object.

A retention record stores the exact key it will delete. A key that is empty,
too long, has path tricks or characters an XML request body cannot carry
would either address something else or poison a whole DeleteObjects batch, so
adapters refuse it before any request. Messages never repeat the key: it may
carry personal data, and failure reasons end up in the audit trail.
"""

from __future__ import annotations

import re

MAX_KEY_BYTES = 1024

# XML 1.0 cannot carry these, so a DeleteObjects body naming them is rejected
# as a whole (MalformedXML) and would fail every other key of the batch.
_XML_FORBIDDEN = frozenset({"\ufffe", "\uffff"})

# Every character refused below, in one pass: the control characters
# (Unicode category Cc is exactly U+0000-U+001F and U+007F-U+009F; a test
# holds the two equal) and the XML non-characters. This runs for every key of
# every page.
_REFUSED_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f\ufffe\uffff]")


class MalformedKey(ValueError):
    """The object key cannot be deleted safely; retrying will not help."""


def validate_object_key(key: str) -> None:
    if not isinstance(key, str):
        raise MalformedKey(f"object key must be a string, not {type(key).__name__}")
    if not key:
        raise MalformedKey("object key is empty")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise MalformedKey("object key is not valid UTF-8 (lone surrogate)") from None
    if size > MAX_KEY_BYTES:
        raise MalformedKey(f"object key is {size} bytes in UTF-8, more than {MAX_KEY_BYTES}")
    refused = _REFUSED_CHARACTER.search(key)
    if refused is not None:
        char = refused.group()
        kind = "non-character" if char in _XML_FORBIDDEN else "control character"
        raise MalformedKey(
            f"object key contains {kind} U+{ord(char):04X} at position {refused.start()}"
        )
    if "\\" in key:
        raise MalformedKey("object key contains a backslash")
    if key.startswith("/"):
        raise MalformedKey("object key starts with '/'")
    for segment in key.split("/"):
        if segment in {".", ".."}:
            raise MalformedKey(f"object key has a {segment!r} path segment")
        if not segment:
            # Storages normalise "a//b" and "a/" to other names, so such a key
            # does not name the object the storage wrote.
            raise MalformedKey("object key has an empty path segment")
