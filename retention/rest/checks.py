"""System checks of the REST API's own settings, registered by its AppConfig."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, register

from retention.conf import settings
from retention.rest.throttling import TenantRateThrottle


@register("retention")
def check_api_throttle_rate(**kwargs: Any) -> list[Error]:
    rate = settings.API_THROTTLE_RATE
    try:
        requests, duration = TenantRateThrottle().parse_rate(rate)
        valid = bool(requests and requests > 0 and duration)
    except (ValueError, KeyError, TypeError, IndexError):
        valid = False
    if valid:
        return []
    return [
        Error(
            f"RETENTION_API_THROTTLE_RATE {rate!r} is not a rate.",
            hint="Give requests per period, e.g. '120/min', '10/s', '5000/hour', '100000/day'.",
            id="retention.E008",
        )
    ]
