"""The kill switch's state: one spelling for the engine, the admin and the checks."""

from __future__ import annotations

from retention.models import KillSwitch


def kill_switch_engaged() -> KillSwitch | None:
    """The switch while it is engaged (paused), else None. Never creates the row."""
    return KillSwitch.objects.filter(pk=1, paused=True).select_related("paused_by").first()


def kill_switch_paused() -> bool:
    """Whether the switch is engaged: the engine asks before every page."""
    return KillSwitch.objects.filter(pk=1, paused=True).exists()
