"""Recipe: django-axes (docs/recipes.md): the IP address and user agent of its real
AccessAttempt and AccessLog rows are redacted; the rows stay."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt, AccessLog

from retention import api, redaction
from tests.recipes.recipe import exercise

pytestmark = pytest.mark.django_db

REDACT = {"ip_address": redaction.Null(), "user_agent": redaction.Constant("[redacted]")}


def _redacted(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "ip_address": None, "user_agent": "[redacted]"}


def _attempt(i: int, days: float, now: datetime) -> int:
    attempt = AccessAttempt.objects.create(
        username=f"user{i}",
        ip_address=f"203.0.113.{i}",
        user_agent=f"Mozilla/5.0 agent {i}",
        http_accept="text/html",
        path_info="/admin/login/",
        get_data="",
        post_data="username=user",
        failures_since_start=3,
    )
    # attempt_time is auto_now_add: date it afterwards.
    AccessAttempt.objects.filter(pk=attempt.pk).update(attempt_time=now - timedelta(days=days))
    return int(attempt.pk)


def _log(i: int, days: float, now: datetime) -> int:
    log = AccessLog.objects.create(
        username=f"user{i}",
        ip_address=f"2001:db8::{i}",
        user_agent=f"curl/8.{i}",
        http_accept="*/*",
        path_info="/admin/login/",
        session_hash=f"{i:064x}",
    )
    AccessLog.objects.filter(pk=log.pk).update(attempt_time=now - timedelta(days=days))
    return int(log.pk)


def test_recipe_axes__access_attempts_lose_ip_and_user_agent_after_30_days(
    row_registry: Any, make_policy: Any, approver: Any, now: datetime
):
    api.register_model(
        AccessAttempt, data_class="security.axes_attempts", age_field="attempt_time", redact=REDACT
    )
    make_policy("security.axes_attempts", timedelta(days=30), disposition="redact", batch_size=2)
    due = [_attempt(i, days, now) for i, days in enumerate((31, 45, 90, 400), start=1)]
    for i, days in enumerate((1, 29), start=10):
        _attempt(i, days, now)

    exercise(
        model=AccessAttempt,
        data_class="security.axes_attempts",
        now=now,
        due=due,
        redacted=_redacted,
        # Newer than the last row redacted, as rows dated by auto_now_add always are: a
        # redacting class walks forward from its mark (docs/model-rows.md).
        seed_more=lambda: [_attempt(20, 30.5, now)],
        placed_by=approver,
    )


def test_recipe_axes__access_logs_lose_ip_and_user_agent_after_90_days(
    row_registry: Any, make_policy: Any, approver: Any, now: datetime
):
    api.register_model(
        AccessLog, data_class="security.axes_logs", age_field="attempt_time", redact=REDACT
    )
    make_policy("security.axes_logs", timedelta(days=90), disposition="redact", batch_size=2)
    due = [_log(i, days, now) for i, days in enumerate((91, 120, 365), start=1)]
    for i, days in enumerate((1, 60, 89), start=10):
        _log(i, days, now)

    exercise(
        model=AccessLog,
        data_class="security.axes_logs",
        now=now,
        due=due,
        redacted=_redacted,
        seed_more=lambda: [_log(20, 90.5, now), _log(21, 90.2, now)],
        placed_by=approver,
    )
