"""Template helpers of the retention admin: the kill-switch banner, instants, durations, sizes.

The filters are ``retention.formatting``'s functions, so a page shows time as the
commands and reports do: ``{{ run.started_at|instant }}``, ``{{ period|duration }}``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.template import Context
from django.utils.dateparse import parse_datetime
from django.utils.safestring import SafeString

from retention.formatting import (
    NOTHING,
    approximate_duration,
    bytes_html,
    format_duration,
    human,
    instant_html,
)
from retention.selectors.control import kill_switch_engaged

register = template.Library()


@register.inclusion_tag("retention/admin/kill_switch_banner.html", takes_context=True)
def retention_kill_switch_banner(context: Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_active or not user.is_staff:
        return {"switch": None}
    return {
        "switch": kill_switch_engaged(),
        "can_view": user.has_perm("retention.view_killswitch"),
    }


@register.filter
def instant(value: datetime | str | None) -> SafeString:
    """An instant to the minute with its zone; the exact one in its tooltip. A report's
    stored ISO string reads the same as a datetime."""
    if isinstance(value, str):
        value = parse_datetime(value)
    return instant_html(value)


@register.filter
def duration(value: timedelta | None) -> str:
    return format_duration(value, none=NOTHING)


@register.filter
def margin(value: timedelta | None) -> str:
    """A safety margin: 'none' rather than '0 days'."""
    return format_duration(value, zero="none", none=NOTHING)


@register.filter
def age(value: timedelta | None) -> str:
    return approximate_duration(value)


@register.filter
def size(value: object) -> SafeString:
    """A size in bytes in words ("2.4 MB"), the exact count in its tooltip; a dash
    saying "not recorded" when there is none (a report from before sizes were kept)."""
    return bytes_html(value if isinstance(value, int) and not isinstance(value, bool) else None)


@register.filter
def rule_value(value: object) -> str:
    """A policy rule as a reviewer reads it: durations in words, yes/no, a dash."""
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or value == "":
        return "—"
    return str(value)


@register.filter
def human_instant(value: datetime | None) -> str:
    """An instant to the minute with its zone ("2026-12-03 08:02 UTC"), or a dash."""
    return human(value, none=NOTHING)
