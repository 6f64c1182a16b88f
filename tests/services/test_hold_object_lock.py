"""Legal holds mirrored as S3 Object Lock legal holds, against a real S3 server (moto).

The holds commit for real (transactional tests): the mirror runs once the
hold has committed, and for a small scope before ``place_hold`` returns.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django_q.conf import Conf

from retention import api, engine, services, tasks
from retention.models import (
    DeletionEvent,
    EventOutcome,
    LegalHold,
    ObjectLockStatus,
    RecordState,
    RetentionRecord,
    RunMode,
)
from retention.selectors.run_audit import runs_audit
from retention.services import hold_mirror
from tests.helpers import add_s3_storage, enforce

pytestmark = pytest.mark.django_db(transaction=True)

ALIAS = "locked"


@pytest.fixture
def locked(settings: Any, s3_server: Any, s3_object_lock_bucket: str) -> str:
    """An S3 storage whose bucket has Object Lock, mirrored."""
    add_s3_storage(settings, ALIAS, s3_server.endpoint_url, s3_object_lock_bucket)
    settings.RETENTION_OBJECT_LOCK_HOLDS = ALIAS
    return s3_object_lock_bucket


@pytest.fixture
def published(monkeypatch: Any) -> list[dict[str, Any]]:
    """Scopes over 3 records mirror in batches of 2, each published into this list."""
    monkeypatch.setattr(hold_mirror, "SYNC_LIMIT", 3)
    monkeypatch.setattr(hold_mirror, "BATCH_SIZE", 2)
    steps: list[dict[str, Any]] = []
    monkeypatch.setattr(hold_mirror, "_publish", lambda step: steps.append(step_payload(step)))
    return steps


def track(
    client: Any, bucket: str, key: str, *, now: datetime, tenant: str = "acme"
) -> RetentionRecord:
    client.put_object(Bucket=bucket, Key=key, Body=b"scan")
    return services.record_track(
        tenant_id=tenant, data_class="idv.photo", object_key=key, storage=ALIAS, now=now
    )


def legal_hold(client: Any, bucket: str, key: str) -> str:
    """The legal hold of the key's current version: ON, OFF, or "" (never set)."""
    answer = client.get_object_legal_hold(Bucket=bucket, Key=key)
    return str((answer.get("LegalHold") or {}).get("Status", ""))


def versions(client: Any, bucket: str, key: str) -> list[str]:
    listed = client.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])
    return [v["VersionId"] for v in listed if v["Key"] == key]


def test_place_hold__locks_every_object_in_scope_before_it_returns(
    make_policy, now, approver, locked, s3_client
):
    make_policy()
    held = [track(s3_client, locked, f"acme/{n}.jpg", now=now) for n in range(3)]
    track(s3_client, locked, "globex/1.jpg", now=now, tenant="globex")
    # Another storage (the filesystem) is not mirrored: nothing to lock there.
    services.record_track(
        tenant_id="acme", data_class="idv.photo", object_key="acme/local.jpg", now=now
    )

    hold = api.place_hold(reason="Case 7", placed_by=approver, tenant_id="acme", now=now)

    assert [legal_hold(s3_client, locked, r.object_key) for r in held] == ["ON"] * 3
    assert legal_hold(s3_client, locked, "globex/1.jpg") == ""
    assert (hold.object_lock_status, hold.object_lock_done, hold.object_lock_total) == (
        ObjectLockStatus.APPLIED,
        3,
        3,
    )
    assert hold.object_lock_error == ""
    assert hold.in_flight == 0


def test_place_hold__a_larger_scope_goes_in_paced_batches_through_the_queue(
    make_policy, now, approver, locked, s3_client, published
):
    make_policy()
    keys = [track(s3_client, locked, f"acme/{n}.jpg", now=now).object_key for n in range(5)]

    hold = api.place_hold(reason="Case 8", placed_by=approver, tenant_id="acme", now=now)

    # Nothing locked yet: the first batch is in the queue.
    assert (hold.object_lock_status, hold.object_lock_done, hold.object_lock_total) == (
        ObjectLockStatus.APPLYING,
        0,
        5,
    )
    assert [legal_hold(s3_client, locked, key) for key in keys] == [""] * 5
    first = published.pop()
    assert first == {"hold_id": hold.pk, "release": False, "after": 0, "done": 0, "failed": 0}

    assert tasks.hold_mirror(first) == 2
    hold.refresh_from_db()
    assert (hold.object_lock_status, hold.object_lock_done) == (ObjectLockStatus.APPLYING, 2)
    assert [legal_hold(s3_client, locked, key) for key in keys] == ["ON", "ON", "", "", ""]
    # A second delivery of the same batch does nothing, and publishes nothing.
    assert tasks.hold_mirror(first) == 0
    assert len(published) == 1

    while published:
        tasks.hold_mirror(published.pop())
    hold.refresh_from_db()
    assert (hold.object_lock_status, hold.object_lock_done, hold.object_lock_total) == (
        ObjectLockStatus.APPLIED,
        5,
        5,
    )
    assert [legal_hold(s3_client, locked, key) for key in keys] == ["ON"] * 5


def test_watchdog__publishes_a_stalled_mirror_again_from_where_it_stopped(
    make_policy, now, approver, locked, s3_client, published
):
    from django.utils import timezone

    make_policy()
    keys = [track(s3_client, locked, f"acme/{n}.jpg", now=now).object_key for n in range(5)]
    hold = api.place_hold(reason="Case 9", placed_by=approver, tenant_id="acme", now=now)
    tasks.hold_mirror(published.pop())
    lost = published.pop()  # the broker (Redis) lost the second batch
    moved = timezone.now()

    # Not stalled yet: nothing is published again.
    assert hold_mirror.hold_mirrors_resume(now=moved + timedelta(minutes=1)) == 0
    later = moved + hold_mirror.STALLED_AFTER + timedelta(seconds=1)
    assert hold_mirror.hold_mirrors_resume(now=later) == 1
    assert hold_mirror.hold_mirrors_resume(now=later) == 0  # once, however many watchdogs
    resumed = published.pop()
    assert resumed == lost

    while published or resumed:
        tasks.hold_mirror(resumed or published.pop())
        resumed = None
    hold.refresh_from_db()
    assert (hold.object_lock_status, hold.object_lock_done) == (ObjectLockStatus.APPLIED, 5)
    assert [legal_hold(s3_client, locked, key) for key in keys] == ["ON"] * 5
    # The lost delivery, should it come after all, does nothing.
    assert tasks.hold_mirror(lost) == lost["done"]
    assert LegalHold.objects.get(pk=hold.pk).object_lock_done == 5


def step_payload(step: hold_mirror.MirrorStep) -> dict[str, Any]:
    return {
        "hold_id": step.hold_id,
        "release": step.release,
        "after": step.after,
        "done": step.done,
        "failed": step.failed,
    }


def test_place_hold__large_scope_through_django_q_by_the_task_path(
    make_policy, now, approver, locked, s3_client, monkeypatch
):
    # django-q2 runs each published task in this process (sync), by its dotted path.
    monkeypatch.setattr(Conf, "SYNC", True)
    monkeypatch.setattr(hold_mirror, "SYNC_LIMIT", 1)
    monkeypatch.setattr(hold_mirror, "BATCH_SIZE", 2)
    make_policy()
    keys = [track(s3_client, locked, f"acme/{n}.jpg", now=now).object_key for n in range(3)]

    hold = api.place_hold(reason="Case 9", placed_by=approver, tenant_id="acme", now=now)

    hold.refresh_from_db()
    assert (hold.object_lock_status, hold.object_lock_done) == (ObjectLockStatus.APPLIED, 3)
    assert [legal_hold(s3_client, locked, key) for key in keys] == ["ON"] * 3


def test_release_hold__unlocks_only_objects_no_other_hold_covers(
    make_policy, now, approver, locked, s3_client
):
    make_policy()
    one, two, three = (track(s3_client, locked, f"acme/{n}.jpg", now=now) for n in range(3))
    tenant_hold = api.place_hold(reason="Case 1", placed_by=approver, tenant_id="acme", now=now)
    api.place_hold(reason="DSAR 2", placed_by=approver, record=two, now=now)

    released = api.release_hold(
        tenant_hold, released_by=approver, reason="closed", now=now + timedelta(hours=1)
    )

    assert legal_hold(s3_client, locked, one.object_key) == "OFF"
    assert legal_hold(s3_client, locked, two.object_key) == "ON"
    assert legal_hold(s3_client, locked, three.object_key) == "OFF"
    assert (released.object_lock_status, released.object_lock_done) == (
        ObjectLockStatus.RELEASED,
        3,
    )


def test_track__under_an_active_hold_locks_the_object_when_tracked(
    make_policy, now, approver, locked, s3_client
):
    make_policy()
    api.place_hold(reason="Case 3", placed_by=approver, tenant_id="acme", now=now)

    later = track(s3_client, locked, "acme/later.jpg", now=now + timedelta(minutes=5))
    other = track(s3_client, locked, "globex/later.jpg", now=now, tenant="globex")

    assert legal_hold(s3_client, locked, later.object_key) == "ON"
    assert legal_hold(s3_client, locked, other.object_key) == ""


def test_enforce__a_lock_refusal_is_skipped_held_not_failed_and_the_object_stays(
    make_policy, now, locked, s3_client
):
    make_policy(erase_all_versions=True)
    record = track(s3_client, locked, "acme/old.jpg", now=now - timedelta(days=31))
    (version,) = versions(s3_client, locked, record.object_key)
    # A lock that no hold of Lethe explains (set outside it).
    s3_client.put_object_legal_hold(
        Bucket=locked, Key=record.object_key, LegalHold={"Status": "ON"}
    )

    run = enforce(now=now)

    assert (run.skipped_held, run.failed, run.deleted) == (1, 0, 0)
    assert versions(s3_client, locked, record.object_key) == [version]
    event = DeletionEvent.objects.get(record=record)
    assert event.outcome == EventOutcome.SKIPPED_HELD
    assert event.reason == (
        "the store's Object Lock refused the delete "
        "(AccessDenied: Access Denied because object protected by object lock.)"
    )
    record.refresh_from_db()
    # Tried again later, not in this run's retry wait; the object is there.
    assert (record.state, record.retryable) == (RecordState.FAILED, True)
    assert record.next_attempt_at == now + timedelta(hours=1)
    assert record.disposal_started_at is None

    # The next run tries again, is refused again, and evidences it again.
    again = enforce(now=now + timedelta(hours=2))
    assert (again.skipped_held, again.failed) == (1, 0)
    assert DeletionEvent.objects.filter(record=record).count() == 2
    assert runs_audit().ok


def test_place_hold__while_a_page_is_past_its_recheck_is_counted_and_the_lock_keeps_it(
    make_policy, now, approver, locked, s3_client
):
    make_policy(erase_all_versions=True)
    record = track(s3_client, locked, "acme/flight.jpg", now=now - timedelta(days=31))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    # The claim is the re-check: the row is past it, being disposed of.
    claim = engine.records_claim(
        run=run, data_class="idv.photo", limit=10, now=now, start_disposal=True
    )

    hold = api.place_hold(
        reason="Case 5", placed_by=approver, tenant_id="acme", now=now + timedelta(seconds=1)
    )
    outcome = engine.claim_dispose(claim=claim, clock=lambda: now + timedelta(seconds=2))

    assert hold.in_flight == 1
    assert (outcome["skipped_held"], outcome["deleted"]) == (1, 0)
    assert len(versions(s3_client, locked, record.object_key)) == 1
    event = DeletionEvent.objects.get(record=record)
    assert event.outcome == EventOutcome.SKIPPED_HELD
    assert event.reason.startswith(
        f"hold #{hold.pk} placed after the re-check; the store's Object Lock refused the delete"
    )
    record.refresh_from_db()
    # The hold keeps claims off it now.
    assert (record.state, record.lease_owner, record.disposal_started_at) == (
        RecordState.ACTIVE,
        None,
        None,
    )
    assert LegalHold.objects.get().object_lock_status == ObjectLockStatus.APPLIED


def test_place_hold__a_bucket_without_object_lock_leaves_the_hold_failed_with_the_reason(
    make_policy, now, approver, settings, s3_server, s3_bucket, s3_client
):
    add_s3_storage(settings, ALIAS, s3_server.endpoint_url, s3_bucket)
    settings.RETENTION_OBJECT_LOCK_HOLDS = ALIAS
    make_policy()
    track(s3_client, s3_bucket, "acme/1.jpg", now=now)

    hold = api.place_hold(reason="Case 6", placed_by=approver, tenant_id="acme", now=now)

    # The hold itself stands; its page says why the store does not enforce it.
    assert LegalHold.objects.active().filter(pk=hold.pk).exists()
    assert (hold.object_lock_status, hold.object_lock_done) == (ObjectLockStatus.FAILED, 1)
    assert hold.object_lock_error == (
        "1 object(s) could not be locked; the last error: "
        "InvalidRequest: Bucket is missing ObjectLockConfiguration"
    )


def test_place_hold__a_mirrored_alias_that_is_not_s3_fails_the_mirror_not_the_hold(
    make_policy, now, approver, settings
):
    settings.RETENTION_OBJECT_LOCK_HOLDS = "default"  # the filesystem, in the tests
    make_policy()
    services.record_track(tenant_id="acme", data_class="idv.photo", object_key="acme/a", now=now)

    hold = api.place_hold(reason="Case 10", placed_by=approver, tenant_id="acme", now=now)

    assert hold.object_lock_status == ObjectLockStatus.FAILED
    assert hold.object_lock_error.startswith("NotLockable: storage 'default' is not an S3 storage")


def test_place_hold__an_unexpected_mirror_error_keeps_only_its_type(
    make_policy, now, approver, locked, s3_client, monkeypatch, caplog
):
    def quoting_a_key(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("Invalid value for parameter Key: acme/secret.jpg")

    monkeypatch.setattr(hold_mirror, "_mirror", quoting_a_key)
    make_policy()
    track(s3_client, locked, "acme/secret.jpg", now=now)

    hold = api.place_hold(reason="Case 11", placed_by=approver, tenant_id="acme", now=now)

    assert (hold.object_lock_status, hold.object_lock_error) == (
        ObjectLockStatus.FAILED,
        "ValueError",
    )
    assert f"the Object Lock mirror of hold {hold.pk} stopped: ValueError" in caplog.text
    assert "secret" not in caplog.text
