"""Instants, lengths and lists as a person reads them in the demo's output."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

# Where a step writes a line: a command's ``self.stdout.write``.
Out = Callable[[str], object]


def fmt(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def span(delta: timedelta) -> str:
    """A human length: '25 days', '1 day', '6 hours', '1 hour'."""
    seconds = max(delta.total_seconds(), 0)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = round(seconds / size)
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return "less than a minute"


def period(delta: timedelta) -> str:
    if delta % timedelta(days=1) == timedelta(0):
        days = delta.days
        return f"{days} day{'' if days == 1 else 's'}"
    return span(delta)


def and_list(words: list[str]) -> str:
    """'name, email and phone'."""
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def per_tenant(counts: Counter[str]) -> str:
    return ", ".join(f"{t} {n}" for t, n in sorted(counts.items()))
