"""The kill switch's state: one spelling for the engine, the admin and the checks."""

from __future__ import annotations

from django.db.models import QuerySet

from retention.models import KillSwitch


def _engaged() -> QuerySet[KillSwitch]:
    return KillSwitch.objects.filter(pk=1, paused=True)


def kill_switch_engaged() -> KillSwitch | None:
    """The switch while it is engaged (paused), else None. Never creates the row."""
    return _engaged().select_related("paused_by").first()


def kill_switch_paused() -> bool:
    """Whether the switch is engaged: the engine asks before every page."""
    return _engaged().exists()
