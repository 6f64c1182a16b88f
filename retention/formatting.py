"""Time, duration and size as people and machines read them: the one spelling.

Every screen, report, command line and error message shows an instant to
the minute with its zone ("2026-12-03 08:02 UTC"), a duration in words
("60 days", "1 day 6 hours") and a size in decimal units ("2.4 MB");
machines (``--json``, REST, exports) get RFC 3339 in UTC with ``Z`` and
sizes in bytes. The admin's template filters (``retention_admin``) and its
list columns call these functions, so a new page cannot grow a sixth way
of showing time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.utils.safestring import SafeString

# What a person reads where there is no value: never "None".
NOTHING = "—"

_UNITS: tuple[tuple[str, int], ...] = (
    ("day", 86400),
    ("hour", 3600),
    ("minute", 60),
    ("second", 1),
)


def human(value: datetime | None, *, none: str = "none") -> str:
    """An instant as a person reads it, to the minute: "2026-12-03 08:02 UTC"."""
    if value is None:
        return none
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def human_text(value: str | None, *, none: str = "none") -> str:
    """An instant stored as ISO text (a report, a signed anchor) read as ``human`` reads one."""
    parsed = parse_datetime(value) if value else None
    return human(parsed, none=none) if parsed is not None else (value or none)


def exact(value: datetime | None) -> str:
    """The instant to the second, for a tooltip: "2026-12-03T08:01:41Z"."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339(value: datetime | None) -> str | None:
    """For machines (JSON, CSV): RFC 3339 in UTC with ``Z``, as precise as stored."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def instant_html(value: datetime | None, *, none: str = NOTHING) -> SafeString:
    """``<time>`` showing the minute, the exact instant in its tooltip and attribute."""
    if value is None:
        return format_html("{}", none)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>', exact(value), exact(value), human(value)
    )


def format_duration(value: timedelta | None, *, zero: str = "0 days", none: str = "") -> str:
    """Exact and readable: timedelta(days=1, hours=6) -> '1 day 6 hours'."""
    if value is None:
        return none
    seconds = int(value.total_seconds())
    if seconds == 0:
        return zero
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    parts = []
    for unit, size in _UNITS:
        n, seconds = divmod(seconds, size)
        if n:
            parts.append(_count(n, unit))
    return sign + " ".join(parts)


def approximate_duration(value: timedelta | None, *, units: int = 1, none: str = NOTHING) -> str:
    """Its largest ``units`` units, rounded down, for ages: '3 days', '1 day 1 minute'."""
    if value is None:
        return none
    seconds = int(max(value.total_seconds(), 0))
    parts = []
    for unit, size in _UNITS[:-1]:
        n, seconds = divmod(seconds, size)
        if n:
            parts.append(_count(n, unit))
    return " ".join(parts[:units]) or "less than a minute"


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def count(n: int, singular: str, plural: str | None = None) -> str:
    """'1 event', '3 events', '2 batches': a number with its noun."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


# Decimal (SI) units, as storage consoles and bills count: 1 kB = 1,000 bytes.
_SIZE_UNITS = ("kB", "MB", "GB", "TB", "PB", "EB")


def format_bytes(value: int | None, *, none: str = NOTHING) -> str:
    """A size as people read it: 0 -> '0 bytes', 2_400_000 -> '2.4 MB', 52_000 -> '52 kB'.

    One decimal under 10 of a unit, none from 10 up; never "1000 kB".
    """
    if value is None:
        return none
    if value < 1000:
        return _count(value, "byte")
    amount, unit = value / 1000, _SIZE_UNITS[0]
    for bigger in _SIZE_UNITS[1:]:
        if float(_rounded(amount)) < 1000:
            break
        amount, unit = amount / 1000, bigger
    return f"{_rounded(amount)} {unit}"


def _rounded(amount: float) -> str:
    return f"{amount:.1f}" if amount < 9.95 else f"{amount:.0f}"


def bytes_html(value: int | None, *, unknown: str = "not recorded") -> SafeString:
    """A size in words with the exact count of bytes in its tooltip; "—" (why, in
    its tooltip) when there is none."""
    if value is None:
        return format_html('<span title="{}">{}</span>', unknown, NOTHING)
    return format_html('<span title="{} bytes">{}</span>', f"{value:,}", format_bytes(value))
