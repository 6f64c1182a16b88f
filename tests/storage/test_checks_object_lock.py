"""Checks of RETENTION_OBJECT_LOCK_HOLDS (E025, and the deploy checks E027, W007)."""

from __future__ import annotations

import socket

import pytest
from django.core.checks import run_checks

from retention.conf import settings as retention_settings
from retention.storage.checks import check_object_lock_buckets, check_object_lock_holds
from tests.helpers import add_s3_storage


def ids(messages: list) -> list[str]:
    return [message.id for message in messages]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ()),
        ("uploads, archive,,uploads", ("uploads", "archive")),
        (["uploads", " archive "], ("uploads", "archive")),
    ],
)
def test_object_lock_holds__reads_a_list_or_the_environment_form(settings, value, expected):
    settings.RETENTION_OBJECT_LOCK_HOLDS = value

    assert expected == retention_settings.OBJECT_LOCK_HOLDS


# --------------------------------------------------------------------------
# E025: the setting cannot be read, or names what cannot be mirrored


def test_check_e025__an_unreadable_setting(settings):
    settings.RETENTION_OBJECT_LOCK_HOLDS = 3

    messages = check_object_lock_holds()

    assert ids(messages) == ["retention.E025"]
    assert "cannot be read" in messages[0].msg


def test_check_e025__an_alias_not_in_storages(settings):
    settings.RETENTION_OBJECT_LOCK_HOLDS = "archive"

    messages = check_object_lock_holds()

    assert ids(messages) == ["retention.E025"]
    assert "'archive'" in messages[0].msg and "default" in messages[0].hint


def test_check_e025__a_storage_that_is_not_s3(settings):
    settings.RETENTION_OBJECT_LOCK_HOLDS = "default"  # the filesystem, in the tests

    messages = check_object_lock_holds()

    assert ids(messages) == ["retention.E025"]
    assert "not an S3 storage" in messages[0].msg


def test_check_e025__an_s3_storage_passes(settings):
    add_s3_storage(settings, "s3", "http://127.0.0.1:9", "bucket")
    settings.RETENTION_OBJECT_LOCK_HOLDS = "s3"

    assert check_object_lock_holds() == []


# --------------------------------------------------------------------------
# E027: the bucket of a mirrored storage has no Object Lock (deploy check)


def test_check_e027__a_bucket_without_object_lock(settings, s3_server, s3_bucket):
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    settings.RETENTION_OBJECT_LOCK_HOLDS = "s3"

    messages = check_object_lock_buckets()

    assert ids(messages) == ["retention.E027"]
    assert s3_bucket in messages[0].msg


def test_check_e027__a_bucket_with_object_lock_passes(settings, s3_server, s3_object_lock_bucket):
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_object_lock_bucket)
    settings.RETENTION_OBJECT_LOCK_HOLDS = "s3"

    assert check_object_lock_buckets() == []


def test_check_e027__asks_the_network_only_in_deploy_checks(settings, s3_server, s3_bucket):
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    settings.RETENTION_OBJECT_LOCK_HOLDS = "s3"

    assert "retention.E027" not in ids(run_checks(tags=["retention"]))
    assert "retention.E027" in ids(run_checks(tags=["retention"], include_deployment_checks=True))


# --------------------------------------------------------------------------
# W007: the store did not answer (fails softly)


def test_check_w007__an_unreachable_endpoint_is_a_warning(settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens there once the socket is closed: connection refused.
    add_s3_storage(settings, "s3", f"http://127.0.0.1:{port}", "bucket")
    settings.RETENTION_OBJECT_LOCK_HOLDS = "s3"

    messages = check_object_lock_buckets()

    assert ids(messages) == ["retention.W007"]
    assert "'s3'" in messages[0].msg and "unreachable" in messages[0].msg
