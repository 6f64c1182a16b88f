"""Recipe: django-axes (docs/recipes.md): the IP address and user agent of its real
AccessAttempt and AccessLog rows are redacted; the rows stay."""

from __future__ import annotations

from collections.abc import Callable
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


@pytest.mark.parametrize(
    ("model", "make", "data_class", "days", "due_ages", "kept_ages", "more_ages"),
    [
        (
            AccessAttempt,
            _attempt,
            "security.axes_attempts",
            30,
            (31, 45, 90, 400),
            (1, 29),
            (30.5,),
        ),
        (AccessLog, _log, "security.axes_logs", 90, (91, 120, 365), (1, 60, 89), (90.5, 90.2)),
    ],
    ids=["access-attempts-after-30-days", "access-logs-after-90-days"],
)
def test_recipe_axes__rows_lose_ip_and_user_agent_after_their_period(
    row_registry: Any,
    make_policy: Any,
    approver: Any,
    now: datetime,
    model: Any,
    make: Callable[[int, float, datetime], int],
    data_class: str,
    days: int,
    due_ages: tuple[float, ...],
    kept_ages: tuple[float, ...],
    more_ages: tuple[float, ...],
):
    api.register_model(model, data_class=data_class, age_field="attempt_time", redact=REDACT)
    make_policy(data_class, timedelta(days=days), disposition="redact", batch_size=2)
    due = [make(i, age, now) for i, age in enumerate(due_ages, start=1)]
    for i, age in enumerate(kept_ages, start=10):
        make(i, age, now)

    exercise(
        model=model,
        data_class=data_class,
        now=now,
        due=due,
        redacted=_redacted,
        # Newer than the last row redacted, as rows dated by auto_now_add always are: a
        # redacting class walks forward from its mark (docs/model-rows.md).
        seed_more=lambda: [make(i, age, now) for i, age in enumerate(more_ages, start=20)],
        placed_by=approver,
    )
