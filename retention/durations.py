"""Durations as people type them: '30 days', '1 hour' (admin forms).

Showing one is ``retention.formatting``'s; the names stay importable from here.
"""

from __future__ import annotations

import re
from datetime import timedelta

from django import forms
from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_duration

from retention.formatting import approximate_duration, format_duration

__all__ = ["HumanDurationField", "approximate_duration", "format_duration", "parse_human_duration"]

_ALIASES = {
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "h": 3600,
    "hour": 3600,
    "hours": 3600,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")


def parse_human_duration(text: str) -> timedelta | None:
    text = text.strip().lower()
    if not text:
        return None
    if text == "none":
        return timedelta(0)
    parsed = parse_duration(text)
    if parsed is not None:
        return parsed
    remainder = _PART.sub("", text).replace(",", "").replace("and", "").strip()
    parts = _PART.findall(text)
    if not parts or remainder:
        raise ValidationError(
            "Enter a duration such as '30 days', '12 hours' or '1 day 6 hours'.",
            code="invalid",
        )
    total = 0.0
    for number, unit in parts:
        if unit not in _ALIASES:
            raise ValidationError(f"Unknown unit {unit!r}: use days, hours or minutes.")
        total += float(number) * _ALIASES[unit]
    return timedelta(seconds=total)


class HumanDurationField(forms.DurationField):
    widget = forms.TextInput

    def prepare_value(self, value: timedelta | str | None) -> str | None:
        if isinstance(value, timedelta):
            return format_duration(value)
        return value

    def to_python(self, value: object) -> timedelta | None:
        if value in self.empty_values:
            return None
        if isinstance(value, timedelta):
            return value
        return parse_human_duration(str(value))
