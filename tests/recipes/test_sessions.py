"""Recipe: django.contrib.sessions (docs/recipes.md), on the real Session model.

A session carries its own deadline (``expire_date``) and a text primary key.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.sessions.models import Session

from retention import api
from tests.recipes.recipe import exercise, run, snapshot

pytestmark = pytest.mark.django_db


def _session(key: str, expires: datetime) -> str:
    Session.objects.create(session_key=key, session_data="e30:data", expire_date=expires)
    return key


def _register() -> None:
    api.register_model(Session, data_class="web.sessions", expires_field="expire_date")


def test_recipe_sessions__expired_sessions_go_the_live_ones_stay(
    row_registry: Any, make_policy: Any, approver: Any, now: datetime
):
    _register()
    make_policy("web.sessions", timedelta(days=1), batch_size=3)
    due = [_session(f"old{i:02d}", now - timedelta(days=i + 1)) for i in range(7)]
    for i in range(4):
        _session(f"live{i:02d}", now + timedelta(days=i + 1))

    exercise(
        model=Session,
        data_class="web.sessions",
        now=now,
        due=due,
        seed_more=lambda: [_session(f"late{i}", now - timedelta(hours=i + 1)) for i in range(3)],
        placed_by=approver,
    )


def test_recipe_sessions__a_hold_on_one_session_keeps_it(
    row_registry: Any, make_policy: Any, approver: Any, now: datetime
):
    _register()
    make_policy("web.sessions", timedelta(days=1))
    for i in range(3):
        _session(f"old{i}", now - timedelta(days=2))
    kept = Session.objects.get(session_key="old1")
    api.place_hold(reason="fraud case", placed_by=approver, subject=kept, now=now)

    result = run(now, "web.sessions")

    assert (result.deleted, result.skipped_held) == (2, 1)
    assert set(snapshot(Session)) == {"old1"}
