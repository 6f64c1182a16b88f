from __future__ import annotations

import sys
import unicodedata

import pytest

from retention.storage.keys import MAX_KEY_BYTES, MalformedKey, validate_object_key


@pytest.mark.parametrize(
    "key",
    [
        "a",
        "uploads/tenant-7/idv.photo/2026/11/30/3f2a9c.g1.jpg",
        "logs/integration/provider export (final).csv",
        "données/reçu-été.pdf",
        "dotted.name/..hidden/.profile/x..y",
        "x" * MAX_KEY_BYTES,
        "é" * (MAX_KEY_BYTES // 2),
    ],
    ids=[
        "single-char",
        "nested-path",
        "spaces-and-parens",
        "non-ascii",
        "dots-inside-segments",
        "exactly-1024-bytes",
        "1024-bytes-of-two-byte-chars",
    ],
)
def test_validate_object_key__accepts_ordinary_keys(key: str) -> None:
    validate_object_key(key)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "empty"),
        ("x" * (MAX_KEY_BYTES + 1), "1025 bytes"),
        ("é" * (MAX_KEY_BYTES // 2 + 1), "1026 bytes"),
        ("a\x00b", "U+0000"),
        ("a\rb", "U+000D"),
        ("a\nb", "U+000A"),
        ("a\tb", "U+0009"),
        ("a\x7fb", "U+007F"),
        ("a\x85b", "U+0085"),
        ("a\uffffb", "U+FFFF"),
        ("a\udc80b", "UTF-8"),
        ("/a/b", "starts with '/'"),
        ("a\\b", "backslash"),
        (".", "'.' path segment"),
        ("..", "'..' path segment"),
        ("a/./b", "'.' path segment"),
        ("a/../b", "'..' path segment"),
        ("../etc/passwd", "'..' path segment"),
        ("a/..", "'..' path segment"),
        ("a//b", "empty path segment"),
        ("a/b/", "empty path segment"),
    ],
    ids=[
        "empty",
        "over-1024-bytes",
        "over-1024-bytes-in-utf8-only",
        "nul",
        "carriage-return",
        "newline",
        "tab",
        "delete",
        "c1-control",
        "xml-noncharacter",
        "lone-surrogate",
        "leading-slash",
        "backslash",
        "dot",
        "dot-dot",
        "inner-dot",
        "inner-dot-dot",
        "leading-dot-dot",
        "trailing-dot-dot",
        "double-slash",
        "trailing-slash",
    ],
)
def test_validate_object_key__rejects_malformed_keys(key: str, message: str) -> None:
    with pytest.raises(MalformedKey, match=message.replace("+", r"\+")):
        validate_object_key(key)


def test_validate_object_key__rejects_non_strings() -> None:
    with pytest.raises(MalformedKey, match="must be a string"):
        validate_object_key(b"a/b")  # type: ignore[arg-type]


def test_malformed_key__message_never_repeats_the_key() -> None:
    key = "customers/jane.doe@example.com/../passport.jpg"

    with pytest.raises(MalformedKey) as raised:
        validate_object_key(key)

    assert "jane.doe" not in str(raised.value)


def test_malformed_key__is_a_value_error() -> None:
    assert issubclass(MalformedKey, ValueError)


def test_validate_object_key__refuses_exactly_controls_noncharacters_and_backslash() -> None:
    surrogates = range(0xD800, 0xE000)  # refused earlier, as invalid UTF-8
    refused: dict[int, str] = {}
    for code in range(sys.maxunicode + 1):
        if code in surrogates:
            continue
        try:
            validate_object_key(f"a{chr(code)}b")
        except MalformedKey as exc:
            refused[code] = str(exc)

    expected = {
        code
        for code in range(sys.maxunicode + 1)
        if code not in surrogates
        and (unicodedata.category(chr(code)) == "Cc" or code in (0xFFFE, 0xFFFF))
    }
    assert set(refused) == expected | {ord("\\")}
    assert len(expected) == 67
    for code in expected:
        assert f"U+{code:04X} at position 1" in refused[code]


def test_validate_object_key__names_the_first_refused_character() -> None:
    with pytest.raises(MalformedKey, match=r"non-character U\+FFFE at position 3"):
        validate_object_key("ab/\ufffe\x00")
    with pytest.raises(MalformedKey, match=r"control character U\+0000 at position 3"):
        validate_object_key("ab/\x00\ufffe")
