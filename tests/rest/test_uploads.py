"""POST /api/v1/uploads/ and GET /api/v1/uploads/{id}/retention/ (SPEC §3.2)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from freezegun import freeze_time

from retention import api, services
from retention.models import RetentionRecord
from tests.helpers import add_s3_storage, enforce
from uploads.models import Upload

pytestmark = pytest.mark.django_db

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01" + b"\x00" * 200
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n" + b"x" * 200
ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 200
TEXT = "2026-03-14 ERP sync ok, 12 rows; café\n".encode() * 10


def stored_files() -> list[Path]:
    location = Path(storages["default"].location)
    return [p for p in location.rglob("*") if p.is_file()] if location.exists() else []


def post(client, headers, *, data_class="idv.photo", body=JPEG, name="passport.jpg", **extra):
    data = {"data_class": data_class, "file": ContentFile(body, name=name)}
    data.update(extra)
    return client.post("/api/v1/uploads/", data=data, headers=headers)


@pytest.fixture
def policies(make_policy):
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    make_policy("logs.integration", timedelta(days=7), enforce=False)


def test_upload__201_with_id_expiry_and_policy_and_the_type_read_from_the_bytes(
    client, acme, policies, now
):
    with freeze_time(now):
        # The client calls it a PNG; the bytes say JPEG.
        response = post(client, acme, body=JPEG, name="passport.png")

    assert response.status_code == 201, response.json()
    body = response.json()
    upload = Upload.objects.get()
    assert body == {
        "id": str(upload.pk),
        "record_id": upload.retention_record_id,
        "data_class": "idv.photo",
        "content_type": "image/jpeg",
        "size": len(JPEG),
        "created_at": "2026-03-14T12:00:00Z",
        "expires_at": "2026-04-13T12:00:00Z",
        "policy": {"key": "idv.photo", "version": 1},
    }
    assert upload.tenant_id == "acme"
    with storages["default"].open(upload.object_key) as stored:
        assert stored.read() == JPEG


def test_upload__plain_text_is_recognised_for_a_log_class(client, acme, policies):
    response = post(client, acme, data_class="logs.integration", body=TEXT, name="sync.log")

    assert response.status_code == 201, response.json()
    assert response.json()["content_type"] == "text/plain"


@pytest.mark.parametrize(
    ("data_class", "body", "code"),
    [
        ("idv.photo", PDF, "unsupported_file_type"),  # allowed elsewhere, not for photos
        ("idv.photo", ELF, "unsupported_file_type"),
        ("logs.integration", JPEG, "unsupported_file_type"),
        ("idv.photo", b"", "empty_file"),
        ("no.such", JPEG, "unknown_data_class"),
        ("pod.scan", PDF, "no_approved_policy"),
    ],
)
def test_upload__refusals_answer_400_with_a_code_and_write_nothing(
    client, acme, policies, author, now, data_class, body, code
):
    services.policy_version_propose(  # pod.scan: a draft, never approved
        data_class="pod.scan", retention_period=timedelta(days=90), author=author, now=now
    )

    response = post(client, acme, data_class=data_class, body=body, name="x.jpg")

    assert response.status_code == 400
    assert response.json()["code"] == code
    assert stored_files() == []
    assert not Upload.objects.exists()
    assert not RetentionRecord.objects.exists()


def test_upload__over_the_size_limit_is_refused_and_the_limit_itself_accepted(
    client, acme, policies, settings
):
    settings.UPLOADS_MAX_BYTES = len(JPEG)

    over = post(client, acme, body=JPEG + b"\x00")
    assert over.status_code == 400
    assert over.json()["code"] == "file_too_large"
    assert stored_files() == []
    assert not RetentionRecord.objects.exists()

    at_limit = post(client, acme, body=JPEG)
    assert at_limit.status_code == 201


def test_upload__oversize_is_not_spooled_to_disk(client, acme, policies, settings, monkeypatch):
    settings.UPLOADS_MAX_BYTES = 1024
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # every file would go to a temporary file
    written: list[int] = []
    from django.core.files.uploadhandler import TemporaryFileUploadHandler

    real = TemporaryFileUploadHandler.receive_data_chunk

    def spy(self, raw_data, start):
        written.append(len(raw_data))
        return real(self, raw_data, start)

    monkeypatch.setattr(TemporaryFileUploadHandler, "receive_data_chunk", spy)

    response = post(client, acme, body=JPEG + b"\x00" * 10 * 1024 * 1024)

    assert response.json()["code"] == "file_too_large"
    assert sum(written) == 0


def test_upload__missing_file_or_class_answers_400_invalid(client, acme, policies):
    response = client.post("/api/v1/uploads/", data={"data_class": "idv.photo"}, headers=acme)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert set(response.json()["field_errors"]) == {"file"}


def test_upload__json_body_answers_415(client, acme, policies):
    response = client.post(
        "/api/v1/uploads/",
        data={"data_class": "idv.photo"},
        content_type="application/json",
        headers=acme,
    )

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"


def test_upload__s3_refusals_write_nothing_to_the_bucket(
    client, acme, policies, settings, s3_server, s3_bucket, s3_client
):
    settings.UPLOADS_STORAGE = add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    settings.UPLOADS_MAX_BYTES = 4096

    def objects() -> list[str]:
        listed = s3_client.list_objects_v2(Bucket=s3_bucket)
        return [o["Key"] for o in listed.get("Contents", [])]

    refusals = [
        post(client, acme, body=PDF),
        post(client, acme, body=JPEG + b"\x00" * 8192),
        post(client, acme, data_class="no.such"),
    ]
    assert [r.json()["code"] for r in refusals] == [
        "unsupported_file_type",
        "file_too_large",
        "unknown_data_class",
    ]
    assert objects() == []
    assert not RetentionRecord.objects.exists()

    accepted = post(client, acme, body=PNG, name="selfie.png")
    assert accepted.status_code == 201
    upload = Upload.objects.get()
    assert (upload.storage, upload.content_type) == ("s3", "image/png")
    assert objects() == [upload.object_key]


# --------------------------------------------------------------------------
# Why is this upload still kept?


def retention_of(client, headers, upload_id):
    response = client.get(f"/api/v1/uploads/{upload_id}/retention/", headers=headers)
    assert response.status_code == 200, response.json()
    return response.json()


def test_retention__active_upload_explains_its_deadline(client, acme, policies, now):
    with freeze_time(now):
        upload_id = post(client, acme).json()["id"]
        body = retention_of(client, acme, upload_id)

    assert {k: body[k] for k in body if k != "explanation"} == {
        "upload_id": upload_id,
        "record_id": Upload.objects.get().retention_record_id,
        "data_class": "idv.photo",
        "state": "active",
        "created_at": "2026-03-14T12:00:00Z",
        "expires_at": "2026-04-13T12:00:00Z",
        "renewed_at": None,
        "deleted_at": None,
        "policy": {"key": "idv.photo", "version": 1},
        "retention_period_seconds": 30 * 86400,
        "hold_applies": False,
        "enforced": False,
    }
    text = body["explanation"]
    assert "idv.photo version 1" in text
    assert "30 days" in text
    assert "2026-04-13 12:00 UTC" in text
    assert "report-only" in text
    assert "\n" not in text


def test_retention__a_hold_is_reported_without_its_reason(client, acme, policies, approver, now):
    with freeze_time(now):
        upload_id = post(client, acme).json()["id"]
    api.place_hold(
        reason="Litigation 2026-114: globex v. acme", placed_by=approver, tenant_id="acme", now=now
    )

    with freeze_time(now):
        body = retention_of(client, acme, upload_id)

    assert body["hold_applies"] is True
    assert "legal hold" in body["explanation"]
    assert "Litigation" not in str(body)


def test_retention__deleted_upload_says_when(client, acme, make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    with freeze_time(now - timedelta(days=31)):
        upload_id = post(client, acme).json()["id"]
    enforce(now=now)

    with freeze_time(now):
        body = retention_of(client, acme, upload_id)

    assert body["state"] == "deleted"
    assert body["deleted_at"] == "2026-03-14T12:00:00Z"
    assert body["enforced"] is True
    assert "was deleted on 2026-03-14 12:00 UTC" in body["explanation"]


def test_retention__an_upload_already_absent_at_deletion_says_not_found_never_deleted(
    client, acme, make_policy, now
):
    from django.core.files.storage import storages

    from retention.models import RetentionRecord

    make_policy("idv.photo", timedelta(days=30))
    with freeze_time(now - timedelta(days=31)):
        upload_id = post(client, acme).json()["id"]
    record = RetentionRecord.objects.get(upload__pk=upload_id)
    storages[record.storage].delete(record.object_key)
    assert enforce(now=now).already_absent == 1

    with freeze_time(now):
        body = retention_of(client, acme, upload_id)

    assert body["state"] == "deleted"
    assert "It was not found at deletion time (2026-03-14 12:00 UTC)" in body["explanation"]
    assert "already absent" in body["explanation"]
    assert "was deleted" not in body["explanation"]


def test_retention__an_upload_found_missing_says_so_never_deleted(client, acme, make_policy, now):
    from django.core.files.storage import storages

    from retention import engine
    from retention.models import RetentionRecord

    make_policy("idv.photo", timedelta(days=30))
    with freeze_time(now - timedelta(days=31)):
        upload_id = post(client, acme).json()["id"]
    record = RetentionRecord.objects.get(upload__pk=upload_id)
    storages[record.storage].delete(record.object_key)
    engine.reconcile_run(now=now)

    with freeze_time(now):
        body = retention_of(client, acme, upload_id)

    assert body["state"] == "missing"
    assert body["deleted_at"] is None
    assert "It was not found at deletion time" in body["explanation"]
    assert "was deleted" not in body["explanation"]


def test_retention__expired_in_an_enforced_class_waits_for_the_next_run(
    client, acme, make_policy, now
):
    make_policy("idv.photo", timedelta(days=30))
    with freeze_time(now - timedelta(days=31)):
        upload_id = post(client, acme).json()["id"]

    with freeze_time(now):
        body = retention_of(client, acme, upload_id)

    assert body["state"] == "active"
    assert "has passed" in body["explanation"]
    assert "next deletion run" in body["explanation"]
