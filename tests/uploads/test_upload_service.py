"""Writing an upload and its retention record as one unit (SPEC §3.2 uploads)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, storages

from retention import api, services
from retention.exceptions import NoApprovedPolicy, UnknownDataClass
from retention.models import RecordState, RetentionRecord
from tests.helpers import add_s3_storage
from uploads.models import Upload
from uploads.services import upload_create

pytestmark = pytest.mark.django_db

KEY_PATTERN = re.compile(
    r"^(?P<tenant>[^/]+)/(?P<data_class>[^/]+)/(?P<gen>[0-9a-f]{32})/(?P<name>[^/]+)$"
)


class BrokenStorage(FileSystemStorage):
    """A store whose writes fail, as a full disk or a dropped mount does."""

    def _save(self, name: str, content: Any) -> str:
        raise OSError(28, "No space left on device")


def _upload(
    now: datetime,
    *,
    data_class: str = "idv.photo",
    name: str = "a.txt",
    body: bytes = b"x",
    **options: Any,
) -> Upload:
    """``upload_create`` of one file for tenant acme."""
    return upload_create(
        tenant_id="acme",
        data_class=data_class,
        file=ContentFile(body, name=name),
        now=now,
        **options,
    )


def stored_files() -> list[Path]:
    location = Path(storages["default"].location)
    return [path for path in location.rglob("*") if path.is_file()] if location.exists() else []


def assert_nothing_kept() -> None:
    """No file written, no upload, no record: a refused upload leaves nothing behind."""
    assert stored_files() == []
    assert not Upload.objects.exists()
    assert not RetentionRecord.objects.exists()


def test_upload_create__writes_object_under_a_generation_key_and_tracks_it(make_policy, now):
    version = make_policy("idv.photo", timedelta(days=30), enforce=False)

    upload = _upload(now, name="passport.jpg", body=b"jpeg bytes", content_type="image/jpeg")

    match = KEY_PATTERN.match(upload.object_key)
    assert match, upload.object_key
    assert match["tenant"] == "acme"
    assert match["data_class"] == "idv.photo"
    assert match["name"] == "passport.jpg"
    with storages["default"].open(upload.object_key) as stored:
        assert stored.read() == b"jpeg bytes"
    upload = Upload.objects.get(pk=upload.pk)
    assert (upload.tenant_id, upload.data_class, upload.storage) == ("acme", "idv.photo", "default")
    assert (upload.original_name, upload.size, upload.content_type) == (
        "passport.jpg",
        10,
        "image/jpeg",
    )
    record = upload.retention_record
    assert record.object_key == upload.object_key
    assert record.size_bytes == 10  # the host passes the size it just wrote
    assert (record.tenant_id, record.data_class, record.storage) == ("acme", "idv.photo", "default")
    assert record.policy_version == version
    assert record.state == RecordState.ACTIVE
    assert record.created_at == now == upload.created_at
    assert record.expires_at == now + timedelta(days=30)


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\ana\\scan.png", "scan.png"),
        ("Ünïcödé file (1).PDF", "Unicode-file-1-.PDF"),
        ("  .hidden  ", "hidden"),
        ("паспорт", "file"),
        ("", "file"),
    ],
)
def test_upload_create__unsafe_file_name_becomes_a_safe_name(make_policy, now, name, safe):
    make_policy("idv.photo", timedelta(days=30))

    upload = _upload(now, name=name)

    match = KEY_PATTERN.match(upload.object_key)
    assert match, upload.object_key
    assert match["name"] == safe
    assert re.fullmatch(r"[A-Za-z0-9._-]+", match["name"])
    assert storages["default"].exists(upload.object_key)
    assert [path.name for path in stored_files()] == [safe]


def test_upload_create__same_file_name_twice_gets_two_generations(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))

    first = _upload(now, name="scan.png", body=b"1")
    second = _upload(now, name="scan.png", body=b"2")

    assert first.object_key != second.object_key
    assert KEY_PATTERN.match(first.object_key)["gen"] != KEY_PATTERN.match(second.object_key)["gen"]
    with storages["default"].open(first.object_key) as stored:
        assert stored.read() == b"1"
    with storages["default"].open(second.object_key) as stored:
        assert stored.read() == b"2"
    assert RetentionRecord.objects.count() == 2


def test_upload_create__unknown_data_class_writes_nothing(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))

    with pytest.raises(UnknownDataClass):
        _upload(now, data_class="no.such")

    assert_nothing_kept()


def test_upload_create__no_approved_policy_writes_nothing(author, now):
    services.policy_version_propose(
        data_class="pod.scan", retention_period=timedelta(days=30), author=author, now=now
    )

    with pytest.raises(NoApprovedPolicy):
        _upload(now, data_class="pod.scan")

    assert_nothing_kept()


def test_upload_create__tracking_failure_removes_the_written_object(make_policy, now, monkeypatch):
    make_policy("idv.photo", timedelta(days=30))

    def track(**kwargs: Any) -> None:
        assert storages["default"].exists(kwargs["object_key"])  # written first
        raise RuntimeError("database went away")

    monkeypatch.setattr(api, "track", track)

    with pytest.raises(RuntimeError, match="database went away"):
        _upload(now)

    assert_nothing_kept()


def test_upload_create__upload_row_failure_rolls_back_the_record_and_the_object(
    make_policy, now, monkeypatch
):
    make_policy("idv.photo", timedelta(days=30))

    def create(**kwargs: Any) -> None:
        assert RetentionRecord.objects.filter(object_key=kwargs["object_key"]).exists()
        raise RuntimeError("constraint violated")

    monkeypatch.setattr(Upload.objects, "create", create)

    with pytest.raises(RuntimeError, match="constraint violated"):
        _upload(now)

    assert stored_files() == []
    assert not RetentionRecord.objects.exists()


def test_upload_create__storage_write_failure_leaves_no_record(make_policy, now, settings):
    make_policy("idv.photo", timedelta(days=30))
    settings.STORAGES = {
        **settings.STORAGES,
        "broken": {"BACKEND": f"{BrokenStorage.__module__}.BrokenStorage"},
    }

    with pytest.raises(OSError, match="No space left"):
        _upload(now, storage="broken")

    assert not Upload.objects.exists()
    assert not RetentionRecord.objects.exists()


def test_upload_create__writes_to_s3_and_tracks_the_exact_key(
    make_policy, now, settings, s3_server, s3_bucket, s3_client
):
    make_policy("idv.photo", timedelta(days=30))
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)

    upload = _upload(now, name="passport.jpg", body=b"jpeg bytes", storage="s3")

    match = KEY_PATTERN.match(upload.object_key)
    assert match, upload.object_key
    assert (match["tenant"], match["data_class"], match["name"]) == (
        "acme",
        "idv.photo",
        "passport.jpg",
    )
    body = s3_client.get_object(Bucket=s3_bucket, Key=upload.object_key)["Body"].read()
    assert body == b"jpeg bytes"
    record = upload.retention_record
    assert (record.storage, record.object_key) == ("s3", upload.object_key)
    assert record.expires_at == now + timedelta(days=30)
    assert stored_files() == []
