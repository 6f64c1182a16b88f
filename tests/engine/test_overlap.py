"""The inline engine deletes one page while it finalizes the one before.

On a thread-safe adapter (S3) with no rate to keep, a page's DeleteObjects
request runs in a thread while the engine's thread writes the previous
page's outcome. These tests hold that the overlap changes nothing in the
contract: pages are finalized in claim order with complete evidence, a
failure mid-flight leaves rows that the next run probes, the kill switch
still lets in-flight work finish, and paced or non-thread-safe stores are
never overlapped.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import api, engine
from retention.conf import settings as retention_settings
from retention.engine.disposal import ObjectDisposer, can_overlap
from retention.engine.pacing import UnlimitedGate
from retention.models import (
    DeletionEvent,
    EventBatch,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunStatus,
)
from retention.selectors.evidence import VerifyResult, chain_verify
from retention.storage import KeyResult, get_adapter
from retention.storage.s3 import S3Adapter
from tests.helpers import add_s3_storage, enforce

pytestmark = pytest.mark.django_db


@pytest.fixture
def s3_alias(settings: Any, s3_server: Any, s3_bucket: str) -> str:
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    return "s3"


def seed(
    make_policy: Any, now: datetime, alias: str, client: Any, bucket: str, count: int, batch: int
) -> list[RetentionRecord]:
    """``count`` expired records in S3, oldest first, pages of ``batch``."""
    version = make_policy(batch_size=batch)
    created = now - timedelta(days=40)
    records = []
    for i in range(count):
        key = f"acme/idv.photo/{i:05d}"
        client.put_object(Bucket=bucket, Key=key, Body=b"x")
        records.append(
            RetentionRecord(
                tenant_id="acme",
                data_class="idv.photo",
                storage=alias,
                object_key=key,
                key_digest=f"d{i}",
                policy_version=version,
                created_at=created,
                expires_at=created + timedelta(days=30, seconds=i),
            )
        )
    return RetentionRecord.objects.bulk_create(records)


def keys_left(client: Any, bucket: str) -> set[str]:
    listed = client.list_objects_v2(Bucket=bucket)
    return {entry["Key"] for entry in listed.get("Contents", ())}


class RecordingAdapter(S3Adapter):
    """The real S3 adapter, noting which thread sent each request."""

    def __init__(self, base: S3Adapter, fail_on_call: int | None = None) -> None:
        super().__init__(base.alias, base.client, base.bucket, prefix=base.prefix)
        self.threads: list[str] = []
        self.fail_on_call = fail_on_call

    def delete_many(
        self, keys: Sequence[str], *, erase_versions: bool = False, probe: Collection[str] = ()
    ) -> dict[str, KeyResult]:
        self.threads.append(threading.current_thread().name)
        results = super().delete_many(keys, erase_versions=erase_versions, probe=probe)
        if len(self.threads) == self.fail_on_call:
            # The network drops after the store deleted: the answer is lost.
            raise ConnectionResetError("connection reset after DeleteObjects")
        return results


def test_overlap__pages_finalized_in_claim_order_with_complete_evidence(
    make_policy, now, s3_alias, s3_client, s3_bucket
):
    records = seed(make_policy, now, s3_alias, s3_client, s3_bucket, count=25, batch=10)
    adapter = RecordingAdapter(get_adapter(s3_alias))

    run = enforce(now=now, disposer=ObjectDisposer(adapter_for=lambda alias: adapter))

    assert run.status == RunStatus.FINISHED
    assert (run.claimed, run.deleted, run.failed) == (25, 25, 0)
    assert keys_left(s3_client, s3_bucket) == set()
    # Every request left the engine's thread; the pages were finalized in
    # claim order: one batch each, oldest records first.
    assert len(adapter.threads) == 3
    assert all(name.startswith("retention-delete") for name in adapter.threads)
    batches = list(EventBatch.objects.filter(run_id=run.pk).order_by("seq"))
    assert [b.size for b in batches] == [10, 10, 5]
    by_batch = [
        list(
            DeletionEvent.objects.filter(batch=b)
            .order_by("leaf_index")
            .values_list("record_id", flat=True)
        )
        for b in batches
    ]
    assert [rid for page in by_batch for rid in page] == [r.pk for r in records]
    assert set(DeletionEvent.objects.filter(run_id=run.pk).values_list("outcome", flat=True)) == {
        EventOutcome.DELETED
    }
    assert RetentionRecord.objects.filter(state=RecordState.DELETED).count() == 25
    verdicts = [v for v in chain_verify() if isinstance(v, VerifyResult)]
    assert verdicts and verdicts[-1].ok


def test_overlap__delete_failing_in_flight_ends_the_run_and_next_run_probes(
    make_policy, now, s3_alias, s3_client, s3_bucket, settings
):
    seed(make_policy, now, s3_alias, s3_client, s3_bucket, count=30, batch=10)
    adapter = RecordingAdapter(get_adapter(s3_alias), fail_on_call=2)

    with pytest.raises(ConnectionResetError):
        enforce(now=now, disposer=ObjectDisposer(adapter_for=lambda alias: adapter))

    run = Run.objects.get()
    assert run.status == RunStatus.ERROR
    # Page 1 was finalized; page 2's objects are gone but unrecorded: its
    # rows keep their lease and their disposal mark.
    assert run.deleted == 10
    page_two = RetentionRecord.objects.filter(state=RecordState.DELETING)
    assert page_two.count() >= 10
    assert all(r.disposal_started_at is not None for r in page_two)
    assert RetentionRecord.objects.filter(state=RecordState.DELETED).count() == 10

    later = now + timedelta(seconds=retention_settings.LEASE_SECONDS + 1)
    second = enforce(now=later)

    assert second.status == RunStatus.FINISHED
    assert RetentionRecord.objects.exclude(state=RecordState.DELETED).count() == 0
    assert keys_left(s3_client, s3_bucket) == set()
    # The probed rows whose objects the failed run removed say so.
    assert second.already_absent >= 10
    assert second.deleted + second.already_absent == 20
    # One closing event per record, whichever run recorded it.
    closing = DeletionEvent.objects.filter(
        outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT]
    )
    assert closing.count() == 30
    assert closing.values("record_id").distinct().count() == 30


def test_overlap__kill_switch_lets_the_page_in_flight_finish(
    make_policy, now, s3_alias, s3_client, s3_bucket, approver
):
    seed(make_policy, now, s3_alias, s3_client, s3_bucket, count=50, batch=10)
    pages: list[int] = []

    def pause_after_first_page(run: Run) -> None:
        pages.append(run.deleted)
        if len(pages) == 1:
            api.pause(by=approver, reason="incident 9", now=now)

    run = engine.run_start(mode="enforce", now=now)
    run = engine.run_execute(run=run, clock=lambda: now, progress=pause_after_first_page)

    assert run.status == RunStatus.PAUSED
    # Page 2 was claimed and sent before the pause was seen: it finished
    # and was recorded; nothing after it was claimed.
    assert run.claimed == run.deleted == 20
    assert RetentionRecord.objects.filter(state=RecordState.DELETING).count() == 0
    assert len(keys_left(s3_client, s3_bucket)) == 30


def test_overlap__only_thread_safe_adapters_without_a_rate(s3_alias, settings):
    s3 = ObjectDisposer()
    assert can_overlap(s3, [s3_alias], UnlimitedGate())
    # A storage with a rate of its own waits for the shared gate: no overlap.
    settings.RETENTION_STORAGE_RATE_LIMITS = {s3_alias: 100.0}
    assert not can_overlap(s3, [s3_alias], UnlimitedGate())
    settings.RETENTION_STORAGE_RATE_LIMITS = {}
    # A Django storage may use the database itself; a disposer that does not
    # say it can overlap never does.
    assert not can_overlap(s3, ["default", s3_alias], UnlimitedGate())

    class Plain:
        def dispose(self, *args: Any, **kwargs: Any) -> dict[int, KeyResult]:
            return {}

    assert not can_overlap(Plain(), [s3_alias], UnlimitedGate())
