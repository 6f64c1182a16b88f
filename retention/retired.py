"""The check that names a setting an earlier version read while a host still sets it.

A setting that does nothing any more moves from the declarations of
``conf.py`` to its ``RETIRED_SETTINGS``; a host that still sets it is told
(``retention.W009``) rather than left believing it changes something.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Warning, register

from retention.conf import RETIRED_SETTINGS


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
