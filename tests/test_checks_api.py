"""System checks of the REST API: its settings (retention.E005-E008) and its sub-app (E015)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retention.checks import check_hmac_keys, check_numbers, check_rest_api_installed
from retention.conf import settings as retention_settings
from retention.rest.checks import check_api_throttle_rate

GOOD = "k" * 32
REPO = Path(__file__).resolve().parents[1]


def ids(errors: list) -> list[str]:
    return [error.id for error in errors]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", {}),
        (f"ops-a:{GOOD}", {"ops-a": GOOD}),
        (f" ops-a : {GOOD} , ops-b:{GOOD}x ,", {"ops-a": GOOD, "ops-b": GOOD + "x"}),
        (f"ops-a:{GOOD}:with-colon", {"ops-a": f"{GOOD}:with-colon"}),
        ({"ops-a": GOOD}, {"ops-a": GOOD}),
    ],
)
def test_hmac_keys__parsed_from_the_environment_form(settings, value, expected):
    settings.RETENTION_HMAC_KEYS = value

    keys = retention_settings.HMAC_KEYS

    assert keys == expected
    assert check_hmac_keys() == []


@pytest.mark.parametrize(
    "value", [f"ops-a{GOOD}", f"ops-a:{GOOD},ops-a:{GOOD}", f":{GOOD}", "ops-a:"]
)
def test_check_e006__malformed_hmac_keys(settings, value):
    settings.RETENTION_HMAC_KEYS = value

    errors = check_hmac_keys()

    assert ids(errors) == ["retention.E006"]
    assert GOOD not in errors[0].msg  # a secret is never echoed


def test_check_e007__short_hmac_secret(settings):
    settings.RETENTION_HMAC_KEYS = f"ops-a:{GOOD},ops-b:short"

    errors = check_hmac_keys()

    assert ids(errors) == ["retention.E007"]
    assert "'ops-b'" in errors[0].msg
    assert ":short" not in errors[0].msg and "'short'" not in errors[0].msg


@pytest.mark.parametrize("rate", ["lots", "10/fortnight", "0/min", "x/min"])
def test_check_e008__unusable_throttle_rate(settings, rate):
    settings.RETENTION_API_THROTTLE_RATE = rate

    assert ids(check_api_throttle_rate()) == ["retention.E008"]


@pytest.mark.parametrize("rate", ["120/min", "10/s", "5000/hour", "100000/day"])
def test_check_e008__usable_throttle_rates_pass(settings, rate):
    settings.RETENTION_API_THROTTLE_RATE = rate

    assert check_api_throttle_rate() == []


def test_check_e005__signature_window_must_be_positive(settings):
    settings.RETENTION_SIGNATURE_WINDOW_SECONDS = 0

    errors = check_numbers()

    assert ids(errors) == ["retention.E005"]
    assert "RETENTION_SIGNATURE_WINDOW_SECONDS" in errors[0].msg


def _manage_check(host_settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": host_settings},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_e015__api_mounted_without_its_sub_app_names_what_to_add():
    result = _manage_check("tests.hosts.api_without_app")

    assert result.returncode == 1
    assert "(retention.E015) The URLconf includes 'retention.rest.urls'" in result.stderr
    assert (
        "HINT: Add 'rest_framework', 'rest_framework_api_key', 'retention.rest' to INSTALLED_APPS"
        in result.stderr
    )
    assert "Traceback" not in result.stderr  # the URLconf loaded, with no endpoint


def test_check_e015__a_host_without_the_api_passes():
    result = _manage_check("tests.hosts.nodrf")

    assert (result.returncode, result.stderr) == (0, "")
    assert "System check identified no issues" in result.stdout


def test_check_e015__the_sub_app_installed_and_mounted_passes():
    assert check_rest_api_installed() == []
