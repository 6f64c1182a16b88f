"""Checks of the queued-run settings: retention.E014 and retention.W003."""

from __future__ import annotations

import pytest
from django_q.conf import Conf

from retention.checks import check_queued_runs


def ids(messages: list) -> list[str]:
    return [message.id for message in messages]


def test_check_queued_runs__the_defaults_pass():
    assert check_queued_runs() == []


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("RETENTION_SCHEDULE_CRON", "every night", "not a valid cron"),
        ("RETENTION_SCHEDULE_CRON", "61 2 * * *", "not a valid cron"),
        ("RETENTION_MAX_BATCHES_IN_FLIGHT", 0, "at least 1"),
        ("RETENTION_DISPATCHER_LEASE_SECONDS", 0, "at least 1"),
        ("RETENTION_DISPATCHER_LEASE_SECONDS", "soon", "cannot be read"),
    ],
)
def test_check_e014__unusable_queued_run_settings(settings, name, value, expected):
    setattr(settings, name, value)

    messages = check_queued_runs()

    assert ids(messages) == ["retention.E014"]
    assert expected in messages[0].msg and name in messages[0].msg


def test_check_w003__django_q2_cron_in_another_time_zone(monkeypatch):
    monkeypatch.setattr(Conf, "TIME_ZONE", "Europe/Paris")

    messages = check_queued_runs()

    assert ids(messages) == ["retention.W003"]
    assert "Europe/Paris" in messages[0].msg
