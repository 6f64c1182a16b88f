"""The kill switch's state: one spelling for the engine, the admin and the checks."""

from __future__ import annotations

import functools
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from retention.models import KillSwitch


def _engaged() -> QuerySet[KillSwitch]:
    return KillSwitch.objects.filter(pk=1, paused=True)


def kill_switch_engaged() -> KillSwitch | None:
    """The switch while it is engaged (paused), else None. Never creates the row."""
    return _engaged().select_related("paused_by").first()


def kill_switch_paused() -> bool:
    """Whether the switch is engaged: the engine asks before every page.

    So the query is built once, then only run (building it cost twice what
    running it does).
    """
    sql, params = _engaged_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


@functools.cache
def _engaged_sql() -> tuple[str, tuple[Any, ...]]:
    return _engaged().values_list("pk")[:1].query.sql_with_params()
