"""Settings an earlier version read, and a check that names them while a host still sets them.

A setting that does nothing any more is removed from ``conf.py``; a host that
still sets it is told (``retention.W009``) rather than left believing it
changes something.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Warning, register

# Each retired setting, without its RETENTION_ prefix, and why nothing reads it.
RETIRED_SETTINGS = {
    "DISPATCH_POLL_SECONDS": "queued runs have no waiting dispatcher to poll",
}


@register("retention")
def check_retired_settings(**kwargs: Any) -> list[CheckMessage]:
    return [
        Warning(
            f"RETENTION_{name} is set, but Lethe no longer reads it: {why}.",
            hint=f"Remove RETENTION_{name} from your settings.",
            id="retention.W009",
        )
        for name, why in RETIRED_SETTINGS.items()
        if hasattr(django_settings, f"RETENTION_{name}")
    ]
