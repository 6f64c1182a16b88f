"""The filesystem adapter removes the folders a deletion leaves empty (issue 30, point 4).

Never the storage's root or anything above it, never a folder something
else still holds, and a folder another process removed first is no error.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, InMemoryStorage, storages

from retention.storage import KeyResult, Outcome
from retention.storage.django import DjangoStorageAdapter, empty_folders_remove
from tests.helpers import enforce, put_tracked


def folders(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


def test_delete__the_last_file_of_a_folder_takes_its_empty_folders_up_to_the_root(
    tmp_path: Path,
) -> None:
    root = tmp_path / "media"
    storage = FileSystemStorage(location=root)
    key = storage.save("acme/2026/11/scan.jpg", ContentFile(b"x"))

    results = DjangoStorageAdapter("default", storage).delete_many([key])

    assert results == {key: KeyResult(key, Outcome.DELETED)}
    assert root.is_dir()
    assert folders(root) == set()


def test_delete__a_folder_still_holding_something_stays_with_its_parents(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    gone = storage.save("acme/2026/11/scan.jpg", ContentFile(b"x"))
    storage.save("acme/2026/other.jpg", ContentFile(b"x"))
    (tmp_path / "acme" / "2026" / "11" / "sub").mkdir()

    DjangoStorageAdapter("default", storage).delete_many([gone])

    assert folders(tmp_path) == {"acme", "acme/2026", "acme/2026/11", "acme/2026/11/sub"}

    os.rmdir(tmp_path / "acme" / "2026" / "11" / "sub")
    second = storage.save("acme/2026/11/again.jpg", ContentFile(b"x"))
    DjangoStorageAdapter("default", storage).delete_many([second])

    # other.jpg keeps acme/2026; 11 was emptied and goes.
    assert folders(tmp_path) == {"acme", "acme/2026"}


def test_delete__a_file_at_the_root_leaves_the_root(tmp_path: Path) -> None:
    root = tmp_path / "media"
    storage = FileSystemStorage(location=root)
    key = storage.save("scan.jpg", ContentFile(b"x"))

    DjangoStorageAdapter("default", storage).delete_many([key])

    assert root.is_dir() and list(root.iterdir()) == []


def test_delete__an_absent_file_removes_no_folder(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    (tmp_path / "acme" / "empty").mkdir(parents=True)

    results = DjangoStorageAdapter("default", storage).delete_many(["acme/empty/gone.jpg"])

    assert results["acme/empty/gone.jpg"].outcome == Outcome.ABSENT
    assert folders(tmp_path) == {"acme", "acme/empty"}


def test_empty_folders_remove__a_folder_removed_meanwhile_is_passed_over(tmp_path: Path) -> None:
    storage = FileSystemStorage(location=tmp_path)
    key = storage.save("a/b/c/file.jpg", ContentFile(b"x"))
    storage.delete(key)
    os.rmdir(tmp_path / "a" / "b" / "c")  # another worker got there first

    empty_folders_remove(storage, key)

    assert folders(tmp_path) == set()


def test_empty_folders_remove__a_folder_that_is_a_symlink_stays(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "media", tmp_path / "elsewhere"
    (elsewhere / "inner").mkdir(parents=True)
    root.mkdir()
    (root / "linked").symlink_to(elsewhere / "inner", target_is_directory=True)
    storage = FileSystemStorage(location=root)
    key = storage.save("linked/file.jpg", ContentFile(b"x"))

    DjangoStorageAdapter("default", storage).delete_many([key])

    assert (root / "linked").is_symlink()
    assert (elsewhere / "inner").is_dir()


def test_delete__a_storage_other_than_the_filesystem_is_only_asked_to_delete() -> None:
    storage = InMemoryStorage()
    key = storage.save("acme/2026/scan.jpg", ContentFile(b"x"))

    results = DjangoStorageAdapter("memory", storage).delete_many([key])

    assert results == {key: KeyResult(key, Outcome.DELETED)}
    assert not storage.exists(key)


@pytest.mark.django_db
def test_enforce__a_run_leaves_no_empty_tenant_folder_behind(
    make_policy: Any, now: datetime
) -> None:
    make_policy("idv.photo", timedelta(days=30))
    put_tracked(tenant_id="acme", key="acme/idv/a.jpg", now=now - timedelta(days=31))
    put_tracked(tenant_id="globex", key="globex/idv/b.jpg", now=now - timedelta(days=31))
    put_tracked(tenant_id="globex", key="globex/idv/c.jpg", now=now)
    root = Path(storages["default"].location)

    assert enforce(now=now).deleted == 2

    assert folders(root) == {"globex", "globex/idv"}
    assert sorted(p.name for p in root.rglob("*.jpg")) == ["c.jpg"]
