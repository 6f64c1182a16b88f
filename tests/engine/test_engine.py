"""The deletion contract, proved on the inline path (SPEC §2)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.files.storage import storages

from retention import api, engine, services
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.engine.pacing import RateGate, UnlimitedGate
from retention.exceptions import RecordBeingDisposed
from retention.models import DeletionEvent, EventOutcome, RecordState, RetentionRecord, Run, RunMode
from retention.storage import KeyResult, Outcome, get_adapter
from tests.fakes import DiesAfterDelete
from tests.helpers import add_s3_storage, dry_run, enforce, exists, outcomes, put_tracked

pytestmark = pytest.mark.django_db


def start(now: datetime, **kwargs: Any) -> Run:
    return engine.run_start(mode=RunMode.ENFORCE, now=now, **kwargs)


# --------------------------------------------------------------------------
# Deadlines


def test_expiry__active_one_second_before_and_claimable_at_expires_at(make_policy, now):
    make_policy(period=timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=30))
    assert record.expires_at == now

    early = start(now - timedelta(seconds=1))
    assert engine.records_claim(run=early, data_class="idv.photo", limit=10, now=now).items == ()
    engine.run_execute(run=early, clock=lambda: now - timedelta(seconds=1))
    record.refresh_from_db()
    assert record.state == RecordState.ACTIVE

    on_time = start(now)
    claim = engine.records_claim(run=on_time, data_class="idv.photo", limit=10, now=now)
    assert [item.record_id for item in claim.items] == [record.pk]


def test_expiry__unchanged_when_a_new_policy_version_is_approved(
    make_policy, now, author, approver
):
    make_policy(period=timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=10))
    deadline = record.expires_at

    longer = api.propose_policy_version(
        data_class="idv.photo", retention_period=timedelta(days=365), author=author, now=now
    )
    api.submit_policy_version(longer, by=author, now=now)
    api.approve_policy_version(longer, approver=approver, now=now)

    record.refresh_from_db()
    assert record.expires_at == deadline
    assert record.policy_version.number == 1
    run = enforce(now=deadline)
    record.refresh_from_db()
    assert run.deleted == 1 and record.state == RecordState.DELETED


def test_expiry__period_arithmetic_is_in_utc_without_dst_shifts(make_policy):
    make_policy(period=timedelta(days=1))
    # 2026-03-29 01:00 UTC is the EU spring-forward instant; a day is still 24h.
    created = datetime(2026, 3, 28, 1, 30, tzinfo=UTC)
    record = put_tracked(now=created)
    assert record.expires_at == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert (record.expires_at - record.created_at).total_seconds() == 86400


# --------------------------------------------------------------------------
# Renewal, duplicates, crashes, leases


@pytest.fixture
def claimed(make_policy: Any, now: datetime) -> tuple[RetentionRecord, Run, Any]:
    """One expired photo, claimed by an enforcing run: (record, run, claim)."""
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))
    run = start(now)
    return record, run, engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)


def test_renewed_after_claim__not_deleted_and_event_says_skipped_renewed(claimed, now):
    record, run, claim = claimed
    assert len(claim) == 1

    api.renew(record, now=now)
    result = engine.claim_dispose(claim=claim, clock=lambda: now)

    record.refresh_from_db()
    assert result["skipped_renewed"] == 1 and result["deleted"] == 0
    assert exists(record)
    assert record.state == RecordState.ACTIVE
    assert record.expires_at == now + timedelta(days=30)
    assert outcomes(record) == [EventOutcome.SKIPPED_RENEWED]


def test_renew__refused_once_disposal_has_started(claimed, now):
    record, run, claim = claimed

    class RenewingDuringDelete(ObjectDisposer):
        refused: Exception | None = None

        def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
            try:
                api.renew(record, now=now)
            except RecordBeingDisposed as exc:
                RenewingDuringDelete.refused = exc
            return super().dispose(items, **kwargs)

    engine.claim_dispose(claim=claim, clock=lambda: now, disposer=RenewingDuringDelete())
    record.refresh_from_db()
    assert isinstance(RenewingDuringDelete.refused, RecordBeingDisposed)
    assert record.state == RecordState.DELETED
    assert outcomes(record) == [EventOutcome.DELETED]


def test_duplicate_disposal_of_one_claim__one_tombstone_one_deleted_event(claimed, now):
    record, run, claim = claimed

    first = engine.claim_dispose(claim=claim, clock=lambda: now)
    second = engine.claim_dispose(claim=claim, clock=lambda: now)

    record.refresh_from_db()
    assert first["deleted"] == 1 and second["deleted"] == 0
    assert record.state == RecordState.DELETED
    assert outcomes(record) == [EventOutcome.DELETED]
    run.refresh_from_db()
    assert run.deleted == 1


def test_crash_after_delete_before_tombstone__next_run_records_already_absent(make_policy, now):
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))

    run = start(now)
    with pytest.raises(SystemExit):
        engine.run_execute(run=run, clock=lambda: now, disposer=DiesAfterDelete())
    record.refresh_from_db()
    assert not exists(record)
    assert record.state == RecordState.DELETING
    assert outcomes(record) == []
    run.refresh_from_db()
    assert run.status == "error"

    later = now + timedelta(minutes=10)  # the dead claimer's lease has expired
    second = enforce(now=later)
    record.refresh_from_db()
    assert second.already_absent == 1 and second.deleted == 0
    assert record.state == RecordState.DELETED
    assert outcomes(record) == [EventOutcome.ALREADY_ABSENT]
    assert record.attempts == 2


def test_lease_expiry__reclaimed_by_b_while_a_stalls__one_tombstone_two_attempts(make_policy, now):
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))
    run = start(now)
    claim_a = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)

    later = now + timedelta(minutes=6)  # LEASE_SECONDS defaults to 300
    claim_b = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=later)
    assert [i.record_id for i in claim_b.items] == [record.pk]
    result_b = engine.claim_dispose(claim=claim_b, clock=lambda: later)
    result_a = engine.claim_dispose(claim=claim_a, clock=lambda: later)

    record.refresh_from_db()
    assert result_b["deleted"] == 1
    assert result_a["deleted"] == 0
    assert record.state == RecordState.DELETED
    assert record.attempts == 2
    assert outcomes(record) == [EventOutcome.DELETED]


def test_lease_expiry__a_resumes_before_b_finishes__b_still_records_once(make_policy, now):
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))
    run = start(now)
    claim_a = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)
    later = now + timedelta(minutes=6)
    claim_b = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=later)

    result_a = engine.claim_dispose(claim=claim_a, clock=lambda: later)
    result_b = engine.claim_dispose(claim=claim_b, clock=lambda: later)

    record.refresh_from_db()
    assert result_a["deleted"] == 0  # no longer A's lease: A touches nothing
    assert result_b["deleted"] == 1
    assert outcomes(record) == [EventOutcome.DELETED]


# --------------------------------------------------------------------------
# Generations and holds


def test_same_file_name_two_generations__only_the_expired_generation_is_deleted(make_policy, now):
    from django.core.files.base import ContentFile

    from uploads.services import upload_create

    make_policy()
    old = upload_create(
        tenant_id="acme",
        data_class="idv.photo",
        file=ContentFile(b"old", name="passport.jpg"),
        now=now - timedelta(days=40),
    )
    new = upload_create(
        tenant_id="acme",
        data_class="idv.photo",
        file=ContentFile(b"new", name="passport.jpg"),
        now=now - timedelta(days=2),
    )
    assert old.object_key != new.object_key
    assert old.object_key.endswith("/passport.jpg") and new.object_key.endswith("/passport.jpg")

    run = enforce(now=now)

    assert run.deleted == 1
    assert not storages["default"].exists(old.object_key)
    assert storages["default"].exists(new.object_key)
    with storages["default"].open(new.object_key) as handle:
        assert handle.read() == b"new"


@pytest.mark.parametrize("scope", ["tenant", "data_class", "record", "tenant+data_class"])
def test_legal_hold__each_scope_skips_with_reason_and_release_deletes_next_run(
    make_policy, now, approver, scope
):
    make_policy()
    held = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    hold_args: dict[str, Any] = {
        "tenant": {"tenant_id": "acme"},
        "data_class": {"data_class": "idv.photo"},
        "record": {"record": held},
        "tenant+data_class": {"tenant_id": "acme", "data_class": "idv.photo"},
    }[scope]
    hold = api.place_hold(reason="Litigation 42", placed_by=approver, now=now, **hold_args)

    run = enforce(now=now)
    held.refresh_from_db()
    assert run.skipped_held == 1 and run.deleted == 0 and run.eligible == 0
    assert exists(held) and held.state == RecordState.ACTIVE
    event = DeletionEvent.objects.get(record=held)
    assert event.outcome == EventOutcome.SKIPPED_HELD and event.reason == "legal hold applies"

    again = enforce(now=now + timedelta(hours=1))
    assert again.skipped_held == 1
    # Each run that skips the record leaves its own evidence, once.
    skips = DeletionEvent.objects.filter(record=held, outcome=EventOutcome.SKIPPED_HELD)
    assert sorted(skips.values_list("run", flat=True)) == sorted([run.pk, again.pk])

    api.release_hold(hold, released_by=approver, reason="settled", now=now + timedelta(days=1))
    after = enforce(now=now + timedelta(days=1))
    held.refresh_from_db()
    assert after.deleted == 1 and held.state == RecordState.DELETED and not exists(held)


def test_legal_hold__scope_does_not_protect_other_tenants(make_policy, now, approver):
    make_policy()
    held = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    other = put_tracked(tenant_id="globex", now=now - timedelta(days=31))
    api.place_hold(reason="Litigation 42", placed_by=approver, now=now, tenant_id="acme")
    run = enforce(now=now)
    assert run.deleted == 1
    assert exists(held) and not exists(other)


def test_legal_hold__placed_after_claim_is_honoured_at_recheck(make_policy, now, approver):
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))
    run = start(now)
    claim = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)
    api.place_hold(reason="Regulator request", placed_by=approver, now=now, record=record)

    result = engine.claim_dispose(claim=claim, clock=lambda: now)
    record.refresh_from_db()
    assert result["skipped_held"] == 1 and result["deleted"] == 0
    assert exists(record) and record.state == RecordState.ACTIVE
    assert outcomes(record) == [EventOutcome.SKIPPED_HELD]


# --------------------------------------------------------------------------
# Failures


class FlakyDisposer(ObjectDisposer):
    """Answers SlowDown for the first ``failures`` calls, then deletes."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
        self.calls += 1
        if self.calls <= self.failures:
            return {
                i.record_id: KeyResult(i.object_key, Outcome.TRANSIENT, "SlowDown: Reduce rate")
                for i in items
            }
        return super().dispose(items, **kwargs)


def test_throttling_then_success__retried_with_backoff_within_the_run(make_policy, now):
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))
    flaky = FlakyDisposer(failures=2)
    waits: list[float] = []
    clock_now = [now]

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock_now[0] += timedelta(seconds=seconds)

    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    run = engine.run_execute(run=run, clock=lambda: clock_now[0], disposer=flaky, sleep=sleep)

    record.refresh_from_db()
    assert run.status == "finished"
    assert (run.deleted, run.failed, run.retried) == (1, 0, 2)
    assert record.state == RecordState.DELETED and record.attempts == 3
    assert outcomes(record) == [
        EventOutcome.RETRY_SCHEDULED,
        EventOutcome.RETRY_SCHEDULED,
        EventOutcome.DELETED,
    ]
    # Backoff grows (base 0.05 s in tests, doubled, with equal jitter).
    assert len(waits) == 2 and 0.025 <= waits[0] <= 0.07 and 0.05 <= waits[1] <= 0.12


def test_throttling__gives_up_after_max_attempts_as_failed_with_reason(make_policy, now):
    make_policy(max_attempts=2)
    record = put_tracked(now=now - timedelta(days=31))
    clock_now = [now]

    def sleep(seconds: float) -> None:
        clock_now[0] += timedelta(seconds=seconds)

    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    run = engine.run_execute(
        run=run, clock=lambda: clock_now[0], disposer=FlakyDisposer(failures=99), sleep=sleep
    )
    record.refresh_from_db()
    assert run.failed == 1 and run.deleted == 0
    assert record.state == RecordState.FAILED and not record.retryable
    assert "gave up after 2 attempts: SlowDown" in record.last_error
    assert outcomes(record)[-1] == EventOutcome.FAILED
    assert exists(record)


def test_permanent_error__failed_at_once_with_reason(make_policy, now):
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))

    class Denied(ObjectDisposer):
        def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
            return {
                i.record_id: KeyResult(i.object_key, Outcome.PERMANENT, "AccessDenied: no")
                for i in items
            }

    run = enforce(now=now, disposer=Denied())
    record.refresh_from_db()
    assert (run.failed, run.retried, run.deleted) == (1, 0, 0)
    assert record.state == RecordState.FAILED and not record.retryable
    assert record.attempts == 1
    assert record.last_error == "AccessDenied: no"
    event = DeletionEvent.objects.get(record=record)
    assert event.outcome == EventOutcome.FAILED and event.reason == "AccessDenied: no"


def test_malformed_key__fails_fast_without_touching_storage(make_policy, now):
    make_policy()
    record = put_tracked(now=now - timedelta(days=31))
    # A key corrupted in the database after tracking.
    RetentionRecord.objects.filter(pk=record.pk).update(object_key="../../etc/passwd")
    run = enforce(now=now)
    record.refresh_from_db()
    assert run.failed == 1 and record.state == RecordState.FAILED and not record.retryable
    assert "key" in record.last_error.lower()


# --------------------------------------------------------------------------
# Cutoff


def test_cutoff__fixed_across_pages_and_across_utc_midnight(make_policy):
    make_policy(period=timedelta(days=1), batch_size=2, safety_margin=timedelta(minutes=5))
    start_at = datetime(2026, 6, 30, 23, 59, 50, tzinfo=UTC)
    expired = [put_tracked(now=start_at - timedelta(days=2, seconds=i)) for i in range(5)]
    # Expires after the cutoff (start - 5 min) but before the clock passes midnight.
    late = put_tracked(now=start_at - timedelta(days=1) - timedelta(minutes=1))

    ticks = iter(start_at + timedelta(seconds=5 * i) for i in range(1000))
    run = engine.run_start(mode=RunMode.ENFORCE, now=start_at)
    run = engine.run_execute(run=run, clock=lambda: next(ticks))

    late.refresh_from_db()
    assert run.cutoff == start_at - timedelta(minutes=5)
    assert run.finished_at.date() > run.started_at.date()  # the run crossed midnight
    assert run.deleted == 5 and run.claimed == 5
    assert all(not exists(r) for r in expired)
    assert late.state == RecordState.ACTIVE and exists(late)


# --------------------------------------------------------------------------
# Dry run


def test_dry_run__touches_nothing_and_reports_what_would_be_deleted(make_policy, now, approver):
    make_policy(enforce=False)
    expired = [put_tracked(tenant_id=t, now=now - timedelta(days=40)) for t in "aab"]
    held = put_tracked(tenant_id="c", now=now - timedelta(days=50))
    api.place_hold(reason="audit", placed_by=approver, now=now, tenant_id="c")
    young = put_tracked(now=now)
    before = {
        r["id"]: r for r in RetentionRecord.objects.values("id", "row_version", "state", "attempts")
    }

    run = dry_run(now=now)

    assert run.mode == RunMode.DRY_RUN and run.status == "finished"
    assert (run.eligible, run.skipped_held, run.claimed, run.deleted) == (3, 1, 0, 0)
    assert run.oldest_eligible_at == now - timedelta(days=10)
    report = run.report["per_data_class"]["idv.photo"]
    assert report["eligible"] == 3 and report["held"] == 1
    tenants = {t["tenant_id"]: t["eligible"] for t in run.report["per_tenant"]["idv.photo"]}
    assert tenants == {"a": 2, "b": 1}
    after = {
        r["id"]: r for r in RetentionRecord.objects.values("id", "row_version", "state", "attempts")
    }
    assert after == before
    assert all(exists(record) for record in [*expired, held, young])
    assert DeletionEvent.objects.count() == 0


# --------------------------------------------------------------------------
# S3


@pytest.fixture
def s3_alias(settings, s3_server, s3_bucket) -> str:
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    return "s3"


def test_s3__more_than_1000_keys_in_one_disposal_uses_several_delete_objects(
    make_policy, now, s3_alias, s3_client, s3_bucket
):
    # A first sweep of all of the class: the volume breaker is told it is expected.
    make_policy(batch_size=2500, breaker_max_fraction=1.0)
    created = now - timedelta(days=31)
    keys = [f"acme/idv.photo/{i:05d}" for i in range(2100)]
    for key in keys[:50]:
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"x")
    RetentionRecord.objects.bulk_create(
        RetentionRecord(
            tenant_id="acme",
            data_class="idv.photo",
            storage=s3_alias,
            object_key=key,
            key_digest=f"d{i}",
            policy_version=services.policy_version_in_force(data_class="idv.photo"),
            created_at=created,
            expires_at=created + timedelta(days=30),
        )
        for i, key in enumerate(keys)
    )
    adapter = get_adapter(s3_alias)
    calls: list[int] = []
    adapter.client.meta.events.register(
        "before-call.s3.DeleteObjects",
        lambda **_: calls.append(1),
    )
    sizes: list[int] = []
    adapter.client.meta.events.register(
        "provide-client-params.s3.DeleteObjects",
        lambda params, **_: sizes.append(len(params["Delete"]["Objects"])),
    )

    run = enforce(now=now, disposer=ObjectDisposer(adapter_for=lambda alias: adapter))

    assert run.deleted == 2100
    assert len(calls) == 3 and sorted(sizes) == [100, 1000, 1000]
    listed = s3_client.list_objects_v2(Bucket=s3_bucket)
    assert listed.get("KeyCount", 0) == 0


def test_s3__versioned_bucket_with_erasure_leaves_no_version_and_no_marker(
    make_policy, now, settings, s3_server, s3_versioned_bucket, s3_client
):
    add_s3_storage(settings, "s3v", s3_server.endpoint_url, s3_versioned_bucket)
    make_policy(erase_all_versions=True)
    bucket = s3_versioned_bucket
    s3_client.put_object(Bucket=bucket, Key="acme/doc", Body=b"v1")
    s3_client.put_object(Bucket=bucket, Key="acme/doc", Body=b"v2")
    s3_client.delete_object(Bucket=bucket, Key="acme/doc")  # a delete marker
    s3_client.put_object(Bucket=bucket, Key="acme/doc", Body=b"v3")
    s3_client.put_object(Bucket=bucket, Key="acme/doc2", Body=b"neighbour")
    record = services.record_track(
        tenant_id="acme",
        data_class="idv.photo",
        object_key="acme/doc",
        storage="s3v",
        now=now - timedelta(days=31),
    )

    run = enforce(now=now)

    record.refresh_from_db()
    assert run.deleted == 1 and record.state == RecordState.DELETED
    versions = s3_client.list_object_versions(Bucket=bucket, Prefix="acme/doc")
    left = [v["Key"] for v in versions.get("Versions", []) + versions.get("DeleteMarkers", [])]
    assert left == ["acme/doc2"]


def test_s3__missing_bucket_refuses_the_run_before_any_claim(make_policy, now, s3_alias, settings):
    make_policy()
    record = services.record_track(
        tenant_id="acme",
        data_class="idv.photo",
        object_key="acme/x",
        storage=s3_alias,
        now=now - timedelta(days=31),
    )
    settings.STORAGES["s3"]["OPTIONS"]["bucket_name"] = "lethe-no-such-bucket"
    settings.STORAGES = {**settings.STORAGES}
    from retention.exceptions import RunRefused

    with pytest.raises(RunRefused) as refused:
        engine.run_start(mode=RunMode.ENFORCE, now=now)
    assert refused.value.reason == "storage_unavailable"
    record.refresh_from_db()
    assert record.state == RecordState.ACTIVE and record.attempts == 0
    assert Run.objects.get(pk=refused.value.run_id).status == "refused"


# --------------------------------------------------------------------------
# Pacing and kill switch on the inline path


def test_rate_limit__inline_run_waits_for_the_gate(make_policy, now):
    make_policy(rate_limit=1000.0, batch_size=10)
    for _ in range(3):
        put_tracked(now=now - timedelta(days=31))
    acquired: list[int] = []

    class CountingGate(UnlimitedGate):
        def acquire(self, n: int) -> None:
            acquired.append(n)

    gate: RateGate = CountingGate()
    run = start(now)
    claim = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)
    engine.claim_dispose(claim=claim, clock=lambda: now, gate=gate)
    assert acquired == [3]


def test_kill_switch__paused_mid_run_stops_claiming(make_policy, now, approver):
    make_policy(batch_size=1)
    records = [put_tracked(now=now - timedelta(days=31, seconds=i)) for i in range(3)]

    def pause_after_first_page(run: Run) -> None:
        api.pause(by=approver, reason="incident 7", now=now)

    run = start(now)
    run = engine.run_execute(run=run, clock=lambda: now, progress=pause_after_first_page)
    assert run.status == "paused"
    assert run.deleted == 1
    assert sum(1 for r in records if exists(r)) == 2


def test_claim_cursor__a_row_the_walk_went_past_is_taken_by_the_final_pass(
    make_policy, now, approver
):
    # Oldest first: the held row is the first the walk meets, and goes past.
    make_policy(batch_size=1)
    held = put_tracked(now=now - timedelta(days=33))
    others = [put_tracked(now=now - timedelta(days=32, seconds=-i)) for i in range(2)]
    hold = api.place_hold(reason="audit", placed_by=approver, record=held, now=now)
    pages: list[int] = []

    def release_after_first_page(run: Run) -> None:
        pages.append(run.deleted)
        if len(pages) == 1:
            api.release_hold(hold, released_by=approver, reason="audit over", now=now)

    run = start(now)
    run = engine.run_execute(run=run, clock=lambda: now, progress=release_after_first_page)

    # Pages 1 and 2 took the two others, each after the last one's cursor;
    # the walk then found nothing after the cursor and went once more from
    # the start, where the released row now is.
    assert run.status == "finished"
    assert run.deleted == 3
    assert not any(exists(r) for r in [held, *others])
    assert outcomes(held) == [EventOutcome.SKIPPED_HELD, EventOutcome.DELETED]


def test_zero_period__deleted_at_write_time_when_enforced(
    make_policy, now, django_capture_on_commit_callbacks
):
    make_policy(period=timedelta(0))
    with django_capture_on_commit_callbacks(execute=True):
        # As retention.api.track does: tracked, then swept by the engine.
        record = put_tracked(now=now)
        engine.record_dispose_at_write(record=record, now=now)
    record.refresh_from_db()
    assert record.state == RecordState.DELETED and not exists(record)
    assert outcomes(record) == [EventOutcome.DELETED]


def test_zero_period__report_only_class_keeps_the_object_until_enforced(
    make_policy, now, django_capture_on_commit_callbacks
):
    make_policy(period=timedelta(0), enforce=False)
    with django_capture_on_commit_callbacks(execute=True):
        record = put_tracked(now=now)
        engine.record_dispose_at_write(record=record, now=now)
    record.refresh_from_db()
    assert record.state == RecordState.ACTIVE and exists(record)
    assert record.expires_at == record.created_at


def test_cutoff__each_data_class_uses_its_own_safety_margin(make_policy, now):
    make_policy("idv.photo", timedelta(days=1))
    make_policy("pod.scan", timedelta(days=1), safety_margin=timedelta(hours=1))
    photo = put_tracked(data_class="idv.photo", now=now - timedelta(days=1, minutes=10))
    scan = put_tracked(data_class="pod.scan", now=now - timedelta(days=1, minutes=10))
    run = enforce(now=now)
    assert run.cutoff == now - timedelta(hours=1)  # the earliest, shown for the run
    assert run.deleted == 1
    assert not exists(photo) and exists(scan)


def test_lease__a_paced_page_gets_a_lease_long_enough_for_its_gate_wait(make_policy, now):
    # 0.5 deletes/s: a one-record page may wait 2 s at the gate on top of the base lease.
    make_policy(rate_limit=0.5, batch_size=1)
    put_tracked(now=now - timedelta(days=31))
    seen: list[tuple[datetime, datetime]] = []

    class Inspecting(ObjectDisposer):
        def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
            record = RetentionRecord.objects.get(pk=items[0].record_id)
            run_lease = Run.objects.get(status="running").lease_expires_at
            seen.append((record.lease_expires_at, run_lease))
            return super().dispose(items, **kwargs)

    run = enforce(now=now, disposer=Inspecting())
    assert run.deleted == 1
    assert seen == [(now + timedelta(seconds=302), now + timedelta(seconds=302))]
