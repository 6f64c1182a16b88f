"""retention.W001: the kill-switch banner must reach every admin page.

It rides on ``admin/base_site.html``, which the app ships; a project that
lists ``retention`` below ``django.contrib.admin``, or has its own
``base_site.html`` without the banner, would hide a paused switch.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Warning, register
from django.template import TemplateDoesNotExist
from django.template.loader import get_template

BANNER_MARKERS = ("retention_kill_switch_banner", "retention/admin/kill_switch_banner")


@register("retention")
def check_kill_switch_banner(**kwargs: Any) -> list[Warning]:
    try:
        template = get_template("admin/base_site.html")
    except TemplateDoesNotExist:
        return []
    source = getattr(getattr(template, "template", None), "source", "")
    if any(marker in source for marker in BANNER_MARKERS):
        return []
    return [
        Warning(
            "The admin does not show the retention kill-switch banner: "
            "admin/base_site.html does not come from the retention app.",
            hint='List "retention" above "django.contrib.admin" in INSTALLED_APPS, or add '
            '{% include "retention/admin/kill_switch_banner_block.html" %} to your own '
            "admin/base_site.html.",
            id="retention.W001",
        )
    ]
