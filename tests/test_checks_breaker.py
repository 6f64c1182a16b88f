"""System check retention.E028: the volume breaker's settings; the example project's switch."""

from __future__ import annotations

import pytest

from retention.checks import check_breaker
from tests.subprocesses import example_setting


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RETENTION_BREAKER_ENABLED", "maybe"),
        ("RETENTION_BREAKER_MAX_FRACTION", 0),
        ("RETENTION_BREAKER_MAX_FRACTION", 1.5),
        ("RETENTION_BREAKER_MAX_FRACTION", "a quarter"),
        ("RETENTION_BREAKER_MAX_FRACTION", float("nan")),
        ("RETENTION_BREAKER_MAX_MULTIPLE", 0),
        ("RETENTION_BREAKER_MAX_MULTIPLE", "ten"),
        ("RETENTION_BREAKER_MIN_COUNT", -1),
        ("RETENTION_BREAKER_MIN_COUNT", "many"),
    ],
)
def test_check_e028__an_unusable_breaker_setting(settings, name, value):
    setattr(settings, name, value)

    errors = check_breaker()

    assert [e.id for e in errors] == ["retention.E028"]
    assert name in errors[0].msg


@pytest.mark.parametrize("enabled", [True, False, "0", "false", "1", "TRUE", " off "])
def test_check_e028__usable_breaker_settings_pass(settings, enabled):
    settings.RETENTION_BREAKER_ENABLED = enabled
    settings.RETENTION_BREAKER_MAX_FRACTION = 1
    settings.RETENTION_BREAKER_MAX_MULTIPLE = 0.5
    settings.RETENTION_BREAKER_MIN_COUNT = 0

    assert check_breaker() == []


def test_check_e028__the_defaults_pass():
    assert check_breaker() == []


@pytest.mark.parametrize(
    ("value", "enabled"),
    [(None, True), ("1", True), ("yes", True), ("0", False), ("false", False), ("FALSE", False)],
)
def test_example_project__reads_the_breaker_switch_from_the_environment(tmp_path, value, enabled):
    read = example_setting("RETENTION_BREAKER_ENABLED", tmp_path, RETENTION_BREAKER_ENABLED=value)

    assert read == str(enabled)
