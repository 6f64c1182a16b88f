"""One test per system check id (SPEC §4: stable ids, retention.E001...)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django_q.conf import Conf

from retention.checks import (
    check_digest_key,
    check_foreground_guard,
    check_metrics_allowed_ips,
    check_numbers,
    check_rate_gate_feedback,
    check_s3_storages,
    check_storage_aliases,
    check_storage_rate_limits,
)

ADAPTER = "retention.storage.django.DjangoStorageAdapter"
S3_BACKEND = "storages.backends.s3.S3Storage"


def ids(errors: list) -> list[str]:
    return [error.id for error in errors]


def with_s3_storage(settings, **options: str) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {"BACKEND": S3_BACKEND, "OPTIONS": options},
    }


# --------------------------------------------------------------------------
# E001: RETENTION_STORAGE_ADAPTERS names an alias STORAGES does not have


def test_check_e001__adapter_for_an_unknown_storage_alias(settings):
    settings.RETENTION_STORAGE_ADAPTERS = {"archive": ADAPTER}

    errors = check_storage_aliases()

    assert ids(errors) == ["retention.E001"]
    assert "archive" in errors[0].msg
    assert "default" in errors[0].hint


def test_check_e001__adapter_for_a_known_alias_passes(settings):
    settings.RETENTION_STORAGE_ADAPTERS = {"default": ADAPTER}

    assert check_storage_aliases() == []


# --------------------------------------------------------------------------
# E002: no digest key


@pytest.mark.parametrize("value", ["", None])
def test_check_e002__empty_digest_key(settings, value):
    settings.RETENTION_DIGEST_KEY = value

    assert ids(check_digest_key()) == ["retention.E002"]


def test_check_e002__missing_digest_key(settings):
    del settings.RETENTION_DIGEST_KEY

    assert ids(check_digest_key()) == ["retention.E002"]


def test_check_e002__digest_key_set_passes(settings):
    settings.RETENTION_DIGEST_KEY = "a-long-random-secret"

    assert check_digest_key() == []


# --------------------------------------------------------------------------
# E003: an S3 storage that cannot work


def test_check_e003__s3_storage_without_a_bucket(settings):
    with_s3_storage(settings, access_key="AK", secret_key="SK")

    errors = check_s3_storages()

    assert ids(errors) == ["retention.E003"]
    assert "archive" in errors[0].msg and "bucket" in errors[0].msg


@pytest.mark.parametrize(
    "credentials",
    [{"access_key": "AK"}, {"secret_key": "SK"}],
    ids=["key-without-secret", "secret-without-key"],
)
def test_check_e003__s3_key_and_secret_must_come_together(settings, credentials):
    with_s3_storage(settings, bucket_name="lethe", **credentials)

    errors = check_s3_storages()

    assert ids(errors) == ["retention.E003"]
    assert "archive" in errors[0].msg


@pytest.mark.parametrize(
    "credentials",
    [{"access_key": "AK", "secret_key": "SK"}, {}],
    ids=["key-and-secret", "instance-role"],
)
def test_check_e003__s3_storage_with_bucket_passes(settings, credentials):
    with_s3_storage(settings, bucket_name="lethe", **credentials)

    assert check_s3_storages() == []


def test_check_e003__bucket_from_aws_storage_bucket_name_passes(settings):
    settings.AWS_STORAGE_BUCKET_NAME = "lethe"
    with_s3_storage(settings)

    assert check_s3_storages() == []


# --------------------------------------------------------------------------
# E004: an adapter factory that cannot be imported


@pytest.mark.parametrize(
    "path",
    [
        "no_such_module.Adapter",
        "retention.storage.django.NoSuchAdapter",
        "not-a-dotted-path",
        42,
    ],
    ids=["missing-module", "missing-attribute", "no-dots", "not-a-string"],
)
def test_check_e004__unimportable_adapter_path(settings, path):
    settings.RETENTION_STORAGE_ADAPTERS = {"default": path}

    errors = check_storage_aliases()

    assert ids(errors) == ["retention.E004"]
    assert "default" in errors[0].msg


def test_check_e004__importable_adapter_path_passes(settings):
    settings.RETENTION_STORAGE_ADAPTERS = {"default": ADAPTER}

    assert "retention.E004" not in ids(check_storage_aliases())


# --------------------------------------------------------------------------
# E005: numbers that are out of range or cannot be parsed


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RETENTION_LEASE_SECONDS", 0),
        ("RETENTION_LEASE_SECONDS", "five minutes"),
        ("RETENTION_RUN_LEASE_SECONDS", -1),
        ("RETENTION_MAX_ATTEMPTS", 0),
        ("RETENTION_MAX_ATTEMPTS", "many"),
        ("RETENTION_RETRY_BASE_SECONDS", -0.5),
        ("RETENTION_RETRY_MAX_SECONDS", -1),
        ("RETENTION_DRY_RUN_MAX_AGE", "a week"),
        ("RETENTION_RETRY_WAIT_IN_RUN_SECONDS", "half a minute"),
        ("RETENTION_REPORT_TOP_TENANTS", "fifty"),
    ],
)
def test_check_e005__bad_number(settings, name, value):
    setattr(settings, name, value)

    errors = check_numbers()

    assert "retention.E005" in ids(errors)


def test_check_e005__good_numbers_pass(settings):
    settings.RETENTION_LEASE_SECONDS = 60
    settings.RETENTION_RUN_LEASE_SECONDS = 120
    settings.RETENTION_MAX_ATTEMPTS = 3
    settings.RETENTION_RETRY_BASE_SECONDS = 0
    settings.RETENTION_RETRY_MAX_SECONDS = 30
    settings.RETENTION_DRY_RUN_MAX_AGE = timedelta(days=3)
    settings.RETENTION_RETRY_WAIT_IN_RUN_SECONDS = 10
    settings.RETENTION_REPORT_TOP_TENANTS = 20

    assert check_numbers() == []


def test_check_e005__dry_run_max_age_in_seconds_passes(settings):
    settings.RETENTION_DRY_RUN_MAX_AGE = 86400

    assert check_numbers() == []


# --------------------------------------------------------------------------
# E009: RETENTION_METRICS_ALLOWED_IPS is not a list of addresses or networks


@pytest.mark.parametrize(
    "value",
    ["10.0.0.0/33", "localhost", "10.0.0.1/8", "127.0.0.1,,fe80::zz", 8080, {"net": "10.0.0.0/8"}],
)
def test_check_e009__malformed_metrics_allow_list(settings, value):
    settings.RETENTION_METRICS_ALLOWED_IPS = value

    errors = check_metrics_allowed_ips()

    assert ids(errors) == ["retention.E009"]


@pytest.mark.parametrize(
    "value", ["", "127.0.0.1", " 10.0.0.0/8 , ::1 ,", ["192.168.0.0/16", "fd00::/8"], ()]
)
def test_check_e009__addresses_and_networks_pass(settings, value):
    settings.RETENTION_METRICS_ALLOWED_IPS = value

    assert check_metrics_allowed_ips() == []


# --------------------------------------------------------------------------
# E010: RETENTION_FOREGROUND_GUARD is not the path of a callable


@pytest.mark.parametrize(
    "path",
    [
        "no_such_module.signal",
        "retention.engine.guard.no_such_signal",
        "retention.engine.guard.DEFAULT_SIGNAL",
        "not-a-dotted-path",
        42,
    ],
    ids=["missing-module", "missing-attribute", "not-callable", "no-dots", "not-a-string"],
)
def test_check_e010__unusable_foreground_guard(settings, path):
    settings.RETENTION_FOREGROUND_GUARD = path

    errors = check_foreground_guard()

    assert ids(errors) == ["retention.E010"]
    assert "fails closed" in errors[0].msg


@pytest.mark.parametrize(
    "path",
    [
        "retention.engine.guard.oldest_queued_task_age",
        "retention.guard.oldest_queued_task_age",
        "tests.engine.test_guard.quiet_foreground",
        None,
        "",
    ],
)
def test_check_e010__callable_or_empty_foreground_guard_passes(settings, path):
    settings.RETENTION_FOREGROUND_GUARD = path

    assert check_foreground_guard() == []


# --------------------------------------------------------------------------
# E011: RETENTION_FOREGROUND_BUDGET_SECONDS is not a positive number


@pytest.mark.parametrize("value", [0, -5, "thirty", None, float("nan")])
def test_check_e011__bad_foreground_budget(settings, value):
    settings.RETENTION_FOREGROUND_BUDGET_SECONDS = value

    assert ids(check_foreground_guard()) == ["retention.E011"]


@pytest.mark.parametrize("value", [30, 0.5, "12"])
def test_check_e011__positive_foreground_budget_passes(settings, value):
    settings.RETENTION_FOREGROUND_BUDGET_SECONDS = value

    assert check_foreground_guard() == []


# --------------------------------------------------------------------------
# W002: the foreground queue is on a broker the guard cannot read


def on_sqs(monkeypatch) -> None:
    for name in ("BROKER_CLASS", "IRON_MQ", "ORM", "MONGO"):
        monkeypatch.setattr(Conf, name, None)
    monkeypatch.setattr(Conf, "SQS", {"aws_region": "eu-west-1"})


def test_check_w002__foreground_queue_on_an_unsupported_broker(settings, monkeypatch):
    on_sqs(monkeypatch)
    settings.RETENTION_FOREGROUND_QUEUE = "shipments"

    warnings = check_foreground_guard()

    assert ids(warnings) == ["retention.W002"]
    assert "'shipments'" in warnings[0].msg and "SQS" in warnings[0].msg


def test_check_w002__the_default_signals_old_path_is_checked_as_the_default(settings, monkeypatch):
    on_sqs(monkeypatch)
    settings.RETENTION_FOREGROUND_QUEUE = "shipments"
    settings.RETENTION_FOREGROUND_GUARD = "retention.guard.oldest_queued_task_age"

    assert ids(check_foreground_guard()) == ["retention.W002"]


def test_check_w002__foreground_queue_on_the_orm_broker_passes(settings, monkeypatch):
    monkeypatch.setattr(Conf, "BROKER_CLASS", None)
    monkeypatch.setattr(Conf, "ORM", "default")
    settings.RETENTION_FOREGROUND_QUEUE = "shipments"

    assert check_foreground_guard() == []


def test_check_w002__no_warning_without_a_queue_or_with_a_signal_of_ones_own(settings, monkeypatch):
    on_sqs(monkeypatch)
    settings.RETENTION_FOREGROUND_QUEUE = None
    assert check_foreground_guard() == []

    settings.RETENTION_FOREGROUND_QUEUE = "shipments"
    settings.RETENTION_FOREGROUND_GUARD = "tests.engine.test_guard.quiet_foreground"

    assert check_foreground_guard() == []


# --------------------------------------------------------------------------
# E012: RETENTION_STORAGE_RATE_LIMITS is malformed or names an unknown alias


@pytest.mark.parametrize(
    "value",
    [
        {"default": 0},
        {"default": -5},
        {"default": "fast"},
        {"default": True},
        {"default": float("inf")},
        {"default": float("nan")},
        [("default", 100)],
        "default=100",
    ],
    ids=["zero", "negative", "word", "boolean", "infinite", "nan", "list", "string"],
)
def test_check_e012__malformed_storage_rate_limits(settings, value):
    settings.RETENTION_STORAGE_RATE_LIMITS = value

    errors = check_storage_rate_limits()

    assert ids(errors) == ["retention.E012"]
    assert "cannot be read" in errors[0].msg


def test_check_e012__rate_limit_for_an_unknown_storage_alias(settings):
    settings.RETENTION_STORAGE_RATE_LIMITS = {"archive": 100}

    errors = check_storage_rate_limits()

    assert ids(errors) == ["retention.E012"]
    assert "archive" in errors[0].msg
    assert "default" in errors[0].hint


@pytest.mark.parametrize(
    "value", [{}, None, {"default": 250}, {"default": "12.5"}, {"default": None}]
)
def test_check_e012__storage_rate_limits_pass(settings, value):
    settings.RETENTION_STORAGE_RATE_LIMITS = value

    assert check_storage_rate_limits() == []


# --------------------------------------------------------------------------
# E013: the rate gate's throttling feedback is out of range


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RETENTION_GATE_MIN_FACTOR", 0),
        ("RETENTION_GATE_MIN_FACTOR", 1.5),
        ("RETENTION_GATE_MIN_FACTOR", "a little"),
        ("RETENTION_GATE_MIN_FACTOR", float("nan")),
        ("RETENTION_GATE_RECOVERY_SECONDS", 0),
        ("RETENTION_GATE_RECOVERY_SECONDS", -60),
        ("RETENTION_GATE_RECOVERY_SECONDS", "a minute"),
        ("RETENTION_GATE_RECOVERY_SECONDS", float("inf")),
    ],
)
def test_check_e013__bad_rate_gate_feedback(settings, name, value):
    setattr(settings, name, value)

    errors = check_rate_gate_feedback()

    assert ids(errors) == ["retention.E013"]
    assert name in errors[0].msg


def test_check_e013__rate_gate_feedback_in_range_passes(settings):
    settings.RETENTION_GATE_MIN_FACTOR = 1
    settings.RETENTION_GATE_RECOVERY_SECONDS = 0.5

    assert check_rate_gate_feedback() == []


# --------------------------------------------------------------------------
# Registration


def test_checks__the_project_as_configured_passes():
    call_command("check", "--tag", "retention")


def test_checks__are_registered_so_manage_py_check_reports_them(settings):
    settings.RETENTION_DIGEST_KEY = ""

    with pytest.raises(SystemCheckError, match=r"retention\.E002"):
        call_command("check", "--tag", "retention")
