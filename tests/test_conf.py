"""retention.conf: one declaration a setting, read at access, with shared parsers (issue 27)."""

from __future__ import annotations

import ipaddress
from datetime import timedelta

import pytest

from retention.conf import RetentionSettings, Setting
from retention.conf import settings as retention_settings


def test_settings__read_at_each_access_so_override_settings_applies(settings):
    assert retention_settings.MAX_ATTEMPTS == 5  # the declared default
    settings.RETENTION_MAX_ATTEMPTS = "7"

    assert retention_settings.MAX_ATTEMPTS == 7


def test_settings__are_read_only_like_properties():
    with pytest.raises(AttributeError, match="RETENTION_LEASE_SECONDS"):
        retention_settings.LEASE_SECONDS = 1.0


def test_settings__on_the_class_each_is_its_declaration():
    declared = RetentionSettings.LAG_PROMISE

    assert isinstance(declared, Setting)
    assert declared.name == "LAG_PROMISE"
    assert declared.default == timedelta(hours=24)


@pytest.mark.parametrize("name", ["DRY_RUN_MAX_AGE", "LAG_PROMISE", "ANCHOR_INTERVAL"])
def test_durations__take_a_timedelta_or_seconds(settings, name):
    setattr(settings, f"RETENTION_{name}", timedelta(minutes=2))
    assert getattr(retention_settings, name) == timedelta(minutes=2)

    setattr(settings, f"RETENTION_{name}", "90")
    assert getattr(retention_settings, name) == timedelta(seconds=90)


@pytest.mark.parametrize("name", ["OBJECT_LOCK_HOLDS", "PERSONAL_FIELD_NAMES"])
def test_name_lists__take_a_list_or_a_comma_string_each_name_once(settings, name):
    setattr(settings, f"RETENTION_{name}", " b, a ,,b ")
    assert getattr(retention_settings, name) == ("b", "a")

    setattr(settings, f"RETENTION_{name}", ["b", " a", ""])
    assert getattr(retention_settings, name) == ("b", "a")

    setattr(settings, f"RETENTION_{name}", {"b", "a"})
    assert getattr(retention_settings, name) == ("a", "b")  # a set, sorted


def test_object_lock_holds__refuses_a_value_that_is_not_a_list_or_a_string(settings):
    settings.RETENTION_OBJECT_LOCK_HOLDS = 5
    with pytest.raises(ValueError, match="expected a list or a comma-separated string, not 5"):
        getattr(retention_settings, "OBJECT_LOCK_HOLDS")  # noqa: B009


def test_personal_field_names__take_any_iterable_of_words_as_before(settings):
    settings.RETENTION_PERSONAL_FIELD_NAMES = {"tax id": "why", "ssn": "why"}
    assert retention_settings.PERSONAL_FIELD_NAMES == ("tax id", "ssn")

    settings.RETENTION_PERSONAL_FIELD_NAMES = (word for word in ["iban", " iban"])
    assert retention_settings.PERSONAL_FIELD_NAMES == ("iban",)


def test_metrics_allowed_ips__take_the_same_list_or_comma_string(settings):
    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1, 10.0.0.0/8"
    expected = (ipaddress.ip_network("127.0.0.1"), ipaddress.ip_network("10.0.0.0/8"))
    assert expected == retention_settings.METRICS_ALLOWED_IPS

    settings.RETENTION_METRICS_ALLOWED_IPS = ["127.0.0.1", "10.0.0.0/8"]
    assert expected == retention_settings.METRICS_ALLOWED_IPS

    settings.RETENTION_METRICS_ALLOWED_IPS = {"127.0.0.1": True}
    with pytest.raises(ValueError, match="expected a list or a comma-separated string"):
        _ = retention_settings.METRICS_ALLOWED_IPS
