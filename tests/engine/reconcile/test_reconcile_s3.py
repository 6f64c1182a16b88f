"""Reconciliation against a real S3 server (moto in server mode), plain and versioned buckets."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from retention import engine, services
from retention.exceptions import RunRefused
from retention.models import DeletionEvent, EventOutcome, RecordState, RetentionRecord, RunStatus
from retention.storage import get_adapter, listing
from tests.helpers import add_s3_storage, chain_ok, enforce

pytestmark = pytest.mark.django_db


def _track(key: str, *, storage: str, now: datetime, data_class: str = "idv.photo") -> Any:
    return services.record_track(
        tenant_id="acme", data_class=data_class, object_key=key, storage=storage, now=now
    )


def _keys_left(client: Any, bucket: str) -> list[str]:
    versions = client.list_object_versions(Bucket=bucket)
    return sorted(
        v["Key"] for v in versions.get("Versions", []) + versions.get("DeleteMarkers", [])
    )


@pytest.fixture
def photos_on_s3(settings: Any, s3_server: Any, s3_bucket: str, make_policy: Any) -> None:
    """Storage alias "s3" on the test bucket; photos kept 30 days."""
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    make_policy("idv.photo", timedelta(days=30))


def test_s3_reconcile__each_finding_across_listing_pages(
    photos_on_s3: None,
    now: datetime,
    s3_bucket: str,
    s3_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listing, "LIST_PAGE_SIZE", 2)
    for key in ("acme/a", "acme/b", "acme/c", "acme/gone", "acme/back", "zz/loose"):
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"12345")
    kept = [_track(k, storage="s3", now=now) for k in ("acme/a", "acme/b", "acme/c")]
    gone = _track("acme/gone", storage="s3", now=now)
    back = _track("acme/back", storage="s3", now=now - timedelta(days=60))
    assert enforce(now=now).deleted == 1
    s3_client.delete_object(Bucket=s3_bucket, Key="acme/gone")
    s3_client.put_object(Bucket=s3_bucket, Key="acme/back", Body=b"restored")

    run = engine.reconcile_run(storages=["s3"], now=now)

    assert run.status == RunStatus.FINISHED
    counts = run.report["storages"]["s3"]
    assert counts == {
        "orphans": 1,
        "missing": 1,
        "reappeared": 1,
        "leftover_versions": 0,
        "listed": 5,
        "tracked": 5,
        "adopted": 0,
    }
    assert run.report["samples"]["s3"]["orphans"][0]["size"] == 5
    assert RetentionRecord.objects.get(pk=gone.pk).state == RecordState.MISSING
    assert all(RetentionRecord.objects.get(pk=r.pk).state == RecordState.ACTIVE for r in kept)

    rerun = enforce(now=now + timedelta(minutes=1))
    assert rerun.deleted == 1
    assert RetentionRecord.objects.get(pk=back.pk).state == RecordState.DELETED
    assert _keys_left(s3_client, s3_bucket) == ["acme/a", "acme/b", "acme/c", "zz/loose"]
    chain_ok()


def test_s3_reconcile__versioned_bucket_leftover_versions_are_erased_by_the_next_run(
    make_policy: Any,
    now: datetime,
    settings: Any,
    s3_server: Any,
    s3_versioned_bucket: str,
    s3_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listing, "LIST_PAGE_SIZE", 1)
    bucket = s3_versioned_bucket
    add_s3_storage(settings, "s3v", s3_server.endpoint_url, bucket)
    make_policy("idv.photo", timedelta(days=30), erase_all_versions=True)
    for key in ("acme/doc", "acme/back", "acme/live"):
        s3_client.put_object(Bucket=bucket, Key=key, Body=b"v1")
    doc = _track("acme/doc", storage="s3v", now=now - timedelta(days=60))
    back = _track("acme/back", storage="s3v", now=now - timedelta(days=60))
    live = _track("acme/live", storage="s3v", now=now)
    assert enforce(now=now).deleted == 2
    assert _keys_left(s3_client, bucket) == ["acme/live"]
    # A writer outside Lethe: a version and a delete marker left behind the erasure.
    s3_client.put_object(Bucket=bucket, Key="acme/doc", Body=b"v2")
    s3_client.delete_object(Bucket=bucket, Key="acme/doc")
    # A restore: the object is current again.
    s3_client.put_object(Bucket=bucket, Key="acme/back", Body=b"v2")
    # A live record whose object was deleted (a delete marker is current).
    s3_client.delete_object(Bucket=bucket, Key="acme/live")

    run = engine.reconcile_run(storages=["s3v"], now=now)

    counts = run.report["counts"]
    assert (counts["leftover_versions"], counts["reappeared"], counts["missing"]) == (1, 1, 1)
    assert counts["orphans"] == 0
    requeued = RetentionRecord.objects.get(pk=doc.pk)
    assert requeued.state == RecordState.FAILED and requeued.reappearances == 1
    assert DeletionEvent.objects.filter(record=doc, outcome=EventOutcome.REAPPEARED).exists()
    assert RetentionRecord.objects.get(pk=live.pk).state == RecordState.MISSING

    rerun = enforce(now=now + timedelta(minutes=1))

    assert rerun.deleted == 2
    # The missing record's version and marker stay: its record is closed, not erased.
    assert _keys_left(s3_client, bucket) == ["acme/live", "acme/live"]
    for record in (doc, back):
        assert RetentionRecord.objects.get(pk=record.pk).state == RecordState.DELETED
    again = engine.reconcile_run(storages=["s3v"], now=now + timedelta(minutes=2))
    assert again.report["counts"]["leftover_versions"] == 0
    assert again.report["counts"]["reappeared"] == 0
    chain_ok()


def test_s3_reconcile__a_missing_bucket_is_refused_and_nothing_changes(
    make_policy: Any, now: datetime, settings: Any, s3_server: Any
) -> None:
    add_s3_storage(settings, "s3", s3_server.endpoint_url, "lethe-no-such-bucket")
    make_policy("idv.photo", timedelta(days=30))
    record = _track("acme/a", storage="s3", now=now)

    with pytest.raises(RunRefused) as refused:
        engine.reconcile_run(storages=["s3"], now=now)

    assert refused.value.reason == "storage_unavailable"
    assert "bucket does not exist" in str(refused.value)
    assert RetentionRecord.objects.get(pk=record.pk).state == RecordState.ACTIVE


def test_s3_reconcile__a_listing_that_fails_on_its_second_page_acts_on_nothing(
    photos_on_s3: None,
    now: datetime,
    s3_bucket: str,
    s3_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listing, "LIST_PAGE_SIZE", 1)
    s3_client.put_object(Bucket=s3_bucket, Key="acme/a", Body=b"x")
    s3_client.put_object(Bucket=s3_bucket, Key="acme/c", Body=b"x")
    missing = _track("acme/b", storage="s3", now=now)
    adapter = get_adapter("s3")
    real = adapter.client.get_paginator  # type: ignore[attr-defined]

    class SecondPageFails:
        def __init__(self, name: str) -> None:
            self.paginator = real(name)

        def paginate(self, **kwargs: Any) -> Any:
            for number, page in enumerate(self.paginator.paginate(**kwargs)):
                if number == 1:
                    raise ClientError(
                        {"Error": {"Code": "InternalError", "Message": "acme/c"}},
                        "ListObjectsV2",
                    )
                yield page

    monkeypatch.setattr(adapter.client, "get_paginator", SecondPageFails)  # type: ignore[attr-defined]

    run = engine.reconcile_run(storages=["s3"], now=now)

    assert run.status == RunStatus.ERROR
    assert "acme" not in run.status_reason
    assert RetentionRecord.objects.get(pk=missing.pk).state == RecordState.ACTIVE
    assert not DeletionEvent.objects.exists()


def test_s3_reconcile__adopts_old_orphans_by_their_last_modified_time(
    make_policy: Any,
    settings: Any,
    s3_server: Any,
    s3_bucket: str,
    s3_client: Any,
) -> None:
    from django.utils import timezone

    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    make_policy("idv.photo", timedelta(days=30), at=timezone.now() - timedelta(days=400))
    s3_client.put_object(Bucket=s3_bucket, Key="t1/old.bin", Body=b"x")
    modified = s3_client.head_object(Bucket=s3_bucket, Key="t1/old.bin")["LastModified"]
    later = timezone.now() + timedelta(days=40)

    run = engine.reconcile_run(
        storages=["s3"], adopt="idv.photo", tenant_pattern="{tenant}/{rest}", now=later
    )

    assert run.report["counts"]["adopted"] == 1
    record = RetentionRecord.objects.get()
    assert (record.tenant_id, record.storage) == ("t1", "s3")
    assert abs((record.created_at - modified).total_seconds()) < 1
    assert enforce(now=later).deleted == 1
    assert _keys_left(s3_client, s3_bucket) == []
