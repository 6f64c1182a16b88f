from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, InvalidStorageError, Storage

from retention.storage import KeyResult, Outcome, StorageUnavailable, get_adapter
from retention.storage.django import DjangoStorageAdapter
from retention.storage.s3 import S3Adapter


class FailingStorage(FileSystemStorage):
    """A filesystem whose delete() fails the way a flaky backend would."""

    def __init__(self, error: OSError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def delete(self, name: str) -> None:
        raise self.error


def test_check__existing_location_passes(tmp_path: Path) -> None:
    DjangoStorageAdapter("default", FileSystemStorage(location=tmp_path)).check()


def test_check__location_that_can_be_created_passes(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path / "not" / "yet")

    DjangoStorageAdapter("default", storage).check()

    assert not (tmp_path / "not").exists()


def test_check__location_below_a_file_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    storage = FileSystemStorage(location=tmp_path / "file" / "media")

    with pytest.raises(StorageUnavailable, match="'default'.*not a directory"):
        DjangoStorageAdapter("default", storage).check()


def test_check__other_storages_are_not_probed() -> None:
    # Every method of the base Storage raises NotImplementedError.
    DjangoStorageAdapter("remote", Storage()).check()


def test_delete_many__deletes_existing_file(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    name = storage.save("tenant-1/scan.jpg", ContentFile(b"data"))
    storage.save("tenant-1/other.jpg", ContentFile(b"data"))

    results = DjangoStorageAdapter("default", storage).delete_many([name])

    assert results == {name: KeyResult(name, Outcome.DELETED)}
    assert not storage.exists(name)
    assert storage.exists("tenant-1/other.jpg")


def test_delete_many__missing_file_is_absent(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)

    results = DjangoStorageAdapter("default", storage).delete_many(["never/written.jpg"])

    assert results == {"never/written.jpg": KeyResult("never/written.jpg", Outcome.ABSENT)}


def test_delete_many__malformed_key_is_permanent_and_touches_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(b"data")
    storage = FileSystemStorage(location=tmp_path / "media")

    results = DjangoStorageAdapter("default", storage).delete_many(
        ["../outside.jpg", "/etc/hosts", "a\\b"]
    )

    assert {result.outcome for result in results.values()} == {Outcome.PERMANENT}
    assert results["../outside.jpg"].reason.startswith("MalformedKey: ")
    assert outside.exists()


def test_delete_many__every_key_gets_exactly_one_result(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    storage.save("a.txt", ContentFile(b"data"))

    results = DjangoStorageAdapter("default", storage).delete_many(["a.txt", "b.txt", "a.txt"])

    assert results == {
        "a.txt": KeyResult("a.txt", Outcome.DELETED),
        "b.txt": KeyResult("b.txt", Outcome.ABSENT),
    }


def test_delete_many__ignores_erase_versions_and_probe(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    storage.save("a.txt", ContentFile(b"data"))

    results = DjangoStorageAdapter("default", storage).delete_many(
        ["a.txt"], erase_versions=True, probe={"a.txt"}
    )

    assert results == {"a.txt": KeyResult("a.txt", Outcome.DELETED)}


@pytest.mark.parametrize(
    ("error", "outcome", "reason"),
    [
        (
            PermissionError(13, "Permission denied", "/media/jane.doe/a.jpg"),
            Outcome.PERMANENT,
            "PermissionError: Permission denied",
        ),
        (TimeoutError("timed out"), Outcome.TRANSIENT, "TimeoutError: timed out"),
        (
            ConnectionResetError(104, "Connection reset by peer"),
            Outcome.TRANSIENT,
            "ConnectionResetError: Connection reset by peer",
        ),
        (
            OSError(5, "Input/output error", "/media/jane.doe/a.jpg"),
            Outcome.TRANSIENT,
            "OSError: Input/output error",
        ),
        (
            OSError("could not remove jane.doe/a.jpg"),
            Outcome.TRANSIENT,
            "OSError: could not remove <key>",
        ),
    ],
    ids=["permission", "timeout", "connection-reset", "io-error", "message-with-key"],
)
def test_delete_many__storage_errors_map_to_outcomes(
    tmp_path: Path, error: OSError, outcome: Outcome, reason: str
) -> None:
    storage = FailingStorage(error, location=tmp_path)
    storage.save("jane.doe/a.jpg", ContentFile(b"data"))

    results = DjangoStorageAdapter("default", storage).delete_many(["jane.doe/a.jpg"])

    assert results == {"jane.doe/a.jpg": KeyResult("jane.doe/a.jpg", outcome, reason)}


def with_storage(settings: Any, alias: str, backend: str, **options: Any) -> None:
    settings.STORAGES = {
        **settings.STORAGES,
        alias: {"BACKEND": backend, "OPTIONS": options},
    }


def s3_options() -> dict[str, str]:
    # Building the adapter sends no request, so no server is needed here.
    return {
        "bucket_name": "lethe-uploads",
        "endpoint_url": "http://127.0.0.1:9",
        "access_key": "testing",
        "secret_key": "testing",
        "region_name": "us-east-1",
        "location": "media",
    }


def test_get_adapter__filesystem_storage_gets_django_adapter(settings: Any, tmp_path: Path) -> None:
    with_storage(
        settings,
        "uploads",
        "django.core.files.storage.FileSystemStorage",
        location=str(tmp_path),
    )

    adapter = get_adapter("uploads")

    assert isinstance(adapter, DjangoStorageAdapter)
    assert adapter.alias == "uploads"
    assert isinstance(adapter.storage, FileSystemStorage)
    assert adapter.storage.location == str(tmp_path)


def test_get_adapter__s3_storage_gets_s3_adapter(settings: Any) -> None:
    with_storage(settings, "uploads", "storages.backends.s3.S3Storage", **s3_options())

    adapter = get_adapter("uploads")

    assert isinstance(adapter, S3Adapter)
    assert (adapter.alias, adapter.bucket, adapter.prefix) == ("uploads", "lethe-uploads", "media")
    assert adapter.client.meta.endpoint_url == "http://127.0.0.1:9"


def test_get_adapter__configured_factory_wins(settings: Any) -> None:
    with_storage(settings, "uploads", "storages.backends.s3.S3Storage", **s3_options())
    settings.RETENTION_STORAGE_ADAPTERS = {
        "uploads": "retention.storage.django.DjangoStorageAdapter"
    }

    adapter = get_adapter("uploads")

    assert isinstance(adapter, DjangoStorageAdapter)
    assert adapter.alias == "uploads"


def test_get_adapter__reads_settings_at_each_call(settings: Any, tmp_path: Path) -> None:
    with_storage(
        settings, "uploads", "django.core.files.storage.FileSystemStorage", location=str(tmp_path)
    )
    assert isinstance(get_adapter("uploads"), DjangoStorageAdapter)

    with_storage(settings, "uploads", "storages.backends.s3.S3Storage", **s3_options())

    assert isinstance(get_adapter("uploads"), S3Adapter)


def test_get_adapter__unknown_alias_is_an_error() -> None:
    with pytest.raises(InvalidStorageError, match="no-such-alias"):
        get_adapter("no-such-alias")
