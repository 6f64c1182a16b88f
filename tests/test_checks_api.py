"""System checks of the REST API settings (retention.E005-E008)."""

from __future__ import annotations

import pytest

from retention.checks import check_api_throttle_rate, check_hmac_keys, check_numbers
from retention.conf import settings as retention_settings

GOOD = "k" * 32


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
