"""System check retention.E028: the volume breaker's settings; the example project's switch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retention.checks import check_breaker

REPO = Path(__file__).resolve().parents[1]


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
    env = {k: v for k, v in os.environ.items() if k != "RETENTION_BREAKER_ENABLED"}
    env["LETHE_VAR_DIR"] = str(tmp_path)
    if value is not None:
        env["RETENTION_BREAKER_ENABLED"] = value

    result = subprocess.run(
        [sys.executable, "-c", "import config.settings as s; print(s.RETENTION_BREAKER_ENABLED)"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(enabled)
