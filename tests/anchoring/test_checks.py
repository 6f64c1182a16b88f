"""One test per system check id of anchoring (retention.E029-E031, W005, W006)."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from retention.anchoring.checks import (
    check_anchor_interval,
    check_anchoring_half_configured,
    check_anchoring_off_in_deployment,
    check_evidence_anchor,
    check_signing_key,
)
from tests.anchoring.helpers import new_key


def ids(messages: list) -> list[str]:
    return [message.id for message in messages]


# --------------------------------------------------------------------------
# E029: RETENTION_SIGNING_KEY is not the base64 of a 32-byte seed


@pytest.mark.parametrize(
    "value",
    ["not base64!", base64.b64encode(b"x" * 31).decode(), base64.b64encode(b"x" * 64).decode()],
)
def test_check_e029__unusable_signing_key(settings, value):
    settings.RETENTION_SIGNING_KEY = value

    (error,) = check_signing_key()

    assert error.id == "retention.E029"
    assert value not in error.msg  # never echo the key


def test_check_e029__a_32_byte_seed_or_none_passes(settings):
    settings.RETENTION_SIGNING_KEY = new_key()[0]
    assert check_signing_key() == []
    settings.RETENTION_SIGNING_KEY = ""
    assert check_signing_key() == []


# --------------------------------------------------------------------------
# E030: RETENTION_EVIDENCE_ANCHOR is malformed, or names something unusable


@pytest.mark.parametrize(
    "value",
    ["anchors", "gs://bucket/x", "s3://", {"url": "s3://b", "bucket": "b"}, 7],
)
def test_check_e030__malformed_evidence_anchor(settings, value):
    settings.RETENTION_EVIDENCE_ANCHOR = value

    assert ids(check_evidence_anchor()) == ["retention.E030"]


def test_check_e030__a_file_instead_of_a_directory(settings, tmp_path):
    (tmp_path / "file").write_text("")
    settings.RETENTION_EVIDENCE_ANCHOR = str(tmp_path / "file")

    (error,) = check_evidence_anchor()

    assert error.id == "retention.E030"
    assert "which is not a directory" in error.msg


@pytest.mark.parametrize(
    "value",
    ["", None, "/srv/lethe/anchors", "s3://evidence/lethe", {"url": "s3://e", "region_name": "x"}],
)
def test_check_e030__usable_evidence_anchor_passes(settings, value):
    settings.RETENTION_EVIDENCE_ANCHOR = value

    assert check_evidence_anchor() == []


# --------------------------------------------------------------------------
# E031: RETENTION_ANCHOR_INTERVAL is not a positive duration


@pytest.mark.parametrize("value", [timedelta(0), -60, "hourly"])
def test_check_e031__bad_anchor_interval(settings, value):
    settings.RETENTION_ANCHOR_INTERVAL = value

    assert ids(check_anchor_interval()) == ["retention.E031"]


@pytest.mark.parametrize("value", [timedelta(minutes=15), 3600])
def test_check_e031__positive_interval_passes(settings, value):
    settings.RETENTION_ANCHOR_INTERVAL = value

    assert check_anchor_interval() == []


# --------------------------------------------------------------------------
# W005: only one of the two settings; W006 (deploy): neither


@pytest.mark.parametrize(
    ("key", "anchor", "present"),
    [(True, False, "RETENTION_SIGNING_KEY"), (False, True, "RETENTION_EVIDENCE_ANCHOR")],
)
def test_check_w005__one_setting_without_the_other(settings, key, anchor, present):
    settings.RETENTION_SIGNING_KEY = new_key()[0] if key else ""
    settings.RETENTION_EVIDENCE_ANCHOR = "/srv/anchors" if anchor else ""

    (warning,) = check_anchoring_half_configured()

    assert warning.id == "retention.W005"
    assert warning.msg.startswith(f"{present} is set but")
    assert check_anchoring_off_in_deployment() == []


def test_check_w006__anchoring_off_is_a_deployment_warning(settings):
    settings.RETENTION_SIGNING_KEY = ""
    settings.RETENTION_EVIDENCE_ANCHOR = ""

    assert ids(check_anchoring_off_in_deployment()) == ["retention.W006"]
    assert check_anchoring_half_configured() == []


def test_check_w005_w006__both_set_pass(settings):
    settings.RETENTION_SIGNING_KEY = new_key()[0]
    settings.RETENTION_EVIDENCE_ANCHOR = "s3://evidence/lethe"

    assert check_anchoring_half_configured() == []
    assert check_anchoring_off_in_deployment() == []


def test_checks__anchoring_checks_are_registered(settings):
    settings.RETENTION_SIGNING_KEY = "short"

    with pytest.raises(SystemCheckError, match=r"retention\.E029"):
        call_command("check", "--tag", "retention")
