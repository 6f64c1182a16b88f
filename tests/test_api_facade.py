"""The stable Python API for host apps, exactly as SPEC §3.4 promises it."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from freezegun import freeze_time

from retention import api
from retention.exceptions import InvalidHold, NotAllowed, RetentionError
from retention.models import (
    DataClassMode,
    DeletionEvent,
    KillSwitch,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    RecordState,
    RetentionRecord,
    Run,
    RunMode,
)
from tests.factories import UserFactory, approver_user
from tests.helpers import dry_run, enforce, exists, kept, put_tracked

pytestmark = pytest.mark.django_db


def approved(data_class, period, *, author, approver, now, **kwargs):
    version = api.propose_policy_version(
        data_class=data_class, retention_period=period, author=author, now=now, **kwargs
    )
    api.submit_policy_version(version, by=author, now=now)
    return api.approve_policy_version(version, approver=approver, now=now)


def submitted(data_class, period, *, author, now, **kwargs):
    version = api.propose_policy_version(
        data_class=data_class, retention_period=period, author=author, now=now, **kwargs
    )
    return api.submit_policy_version(version, by=author, now=now)


# --------------------------------------------------------------------------
# Policy versions: propose → submit → approve, four-eyes, lock


def test_propose_submit_approve__moves_a_version_into_force(author, approver, now):
    version = api.propose_policy_version(
        data_class="pod.scan",
        retention_period=timedelta(days=90),
        author=author,
        now=now,
        safety_margin=timedelta(hours=1),
        owner="dpo@example.com",
    )
    assert (version.status, version.number, version.author) == ("draft", 1, author)
    assert version.policy.data_class == "pod.scan"
    assert version.safety_margin == timedelta(hours=1)

    version = api.submit_policy_version(version, by=author, now=now + timedelta(minutes=1))
    assert version.status == PolicyVersionStatus.SUBMITTED

    version = api.approve_policy_version(version, approver=approver, now=now + timedelta(minutes=2))
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.APPROVED
    assert version.approver == approver
    assert version.approved_at == now + timedelta(minutes=2)
    assert Policy.objects.get(data_class="pod.scan").mode == DataClassMode.REPORT_ONLY


def test_approve__by_the_author_is_a_four_eyes_violation(now):
    # The author may approve in general; only not their own version.
    author = approver_user("author-approver")
    version = submitted("pod.scan", timedelta(days=90), author=author, now=now)

    with pytest.raises(api.FourEyesViolation):
        api.approve_policy_version(version, approver=author, now=now)

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED
    assert version.approver is None


def test_approve__by_someone_without_the_permission_is_refused(author, now):
    version = submitted("pod.scan", timedelta(days=90), author=author, now=now)
    bystander = UserFactory(username="bystander")

    with pytest.raises(NotAllowed) as excinfo:
        api.approve_policy_version(version, approver=bystander, now=now)

    assert not isinstance(excinfo.value, api.FourEyesViolation)
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.SUBMITTED


def test_approve__a_draft_is_refused(author, approver, now):
    version = api.propose_policy_version(
        data_class="pod.scan", retention_period=timedelta(days=90), author=author, now=now
    )

    with pytest.raises(RetentionError):
        api.approve_policy_version(version, approver=approver, now=now)

    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.DRAFT


def test_approve__locked_policy_refuses_a_shorter_version(author, approver, now):
    current = approved(
        "pod.scan", timedelta(days=365), author=author, approver=approver, now=now, locked=True
    )
    shorter = submitted("pod.scan", timedelta(days=30), author=author, now=now, locked=True)

    with pytest.raises(api.LockedPolicyShortened):
        api.approve_policy_version(shorter, approver=approver, now=now)

    current.refresh_from_db()
    shorter.refresh_from_db()
    assert current.status == PolicyVersionStatus.APPROVED
    assert shorter.status == PolicyVersionStatus.SUBMITTED


def test_approve__lock_refusal_reads_durations_as_the_admin_does(author, approver, now):
    approved("lk.doc", timedelta(days=30), author=author, approver=approver, now=now, locked=True)
    shorter = submitted("lk.doc", timedelta(days=10), author=author, now=now, locked=True)

    with pytest.raises(api.LockedPolicyShortened) as refused:
        api.approve_policy_version(shorter, approver=approver, now=now)

    assert str(refused.value) == (
        "lk.doc is locked: its retention period can only be lengthened (10 days < 30 days)."
    )


def test_approve__locked_policy_accepts_a_longer_version(author, approver, now):
    current = approved(
        "pod.scan", timedelta(days=365), author=author, approver=approver, now=now, locked=True
    )
    longer = submitted("pod.scan", timedelta(days=730), author=author, now=now, locked=True)

    api.approve_policy_version(longer, approver=approver, now=now + timedelta(days=1))

    current.refresh_from_db()
    longer.refresh_from_db()
    assert current.status == PolicyVersionStatus.SUPERSEDED
    assert current.superseded_at == now + timedelta(days=1)
    assert longer.status == PolicyVersionStatus.APPROVED


def test_approve__unlocked_policy_may_be_shortened(author, approver, now):
    approved("pod.scan", timedelta(days=365), author=author, approver=approver, now=now)
    shorter = submitted("pod.scan", timedelta(days=30), author=author, now=now)

    api.approve_policy_version(shorter, approver=approver, now=now)

    shorter.refresh_from_db()
    assert shorter.status == PolicyVersionStatus.APPROVED


# --------------------------------------------------------------------------
# The same invariants in the database


def _raw_version(policy, number, *, author, approver, status, now):
    return PolicyVersion.objects.create(
        policy=policy,
        number=number,
        status=status,
        retention_period=timedelta(days=30),
        author=author,
        created_at=now,
        approver=approver,
        approved_at=now,
    )


def test_database__refuses_a_second_approved_version_of_one_policy(author, approver, now):
    first = approved("pod.scan", timedelta(days=30), author=author, approver=approver, now=now)

    second = partial(_raw_version, first.policy, 2, author=author, approver=approver, now=now)

    with pytest.raises(IntegrityError), transaction.atomic():
        second(status=PolicyVersionStatus.APPROVED)

    # The same row is fine once it is not a second approved one.
    second(status=PolicyVersionStatus.SUPERSEDED)


def test_database__refuses_an_approved_version_approved_by_its_author(author, approver, now):
    policy = Policy.objects.create(data_class="pod.scan")

    with pytest.raises(IntegrityError), transaction.atomic():
        _raw_version(
            policy, 1, author=author, approver=author, status=PolicyVersionStatus.APPROVED, now=now
        )

    _raw_version(
        policy, 1, author=author, approver=approver, status=PolicyVersionStatus.APPROVED, now=now
    )


# --------------------------------------------------------------------------
# track and renew


def test_track__computes_expiry_from_the_version_in_force(author, approver, now):
    version = approved(
        "pod.scan", timedelta(days=30), author=author, approver=approver, now=now - timedelta(1)
    )

    record = api.track(tenant_id="acme", data_class="pod.scan", object_key="acme/a.pdf", now=now)

    assert record.policy_version == version
    assert (record.created_at, record.expires_at) == (now, now + timedelta(days=30))
    assert (record.state, record.row_version, record.storage) == ("active", 1, "default")


def test_track__keeps_the_size_the_host_gives_and_asks_no_storage_without_one(
    make_policy, now, monkeypatch
):
    make_policy("pod.scan", timedelta(days=30))

    def no_round_trip(*args, **kwargs):
        raise AssertionError("track asked the storage")

    for name in ("size", "exists", "open"):
        monkeypatch.setattr(type(storages["default"]), name, no_round_trip)

    sized = api.track(
        tenant_id="acme", data_class="pod.scan", object_key="acme/a.pdf", size=2_400_000, now=now
    )
    empty = api.track(
        tenant_id="acme", data_class="pod.scan", object_key="acme/e.pdf", size=0, now=now
    )
    unknown = api.track(tenant_id="acme", data_class="pod.scan", object_key="acme/b.pdf", now=now)

    sizes = dict(RetentionRecord.objects.values_list("pk", "size_bytes"))
    assert (sizes[sized.pk], sizes[empty.pk], sizes[unknown.pk]) == (2_400_000, 0, None)


@pytest.mark.parametrize("bad", [-1, 2.5, "10", True])
def test_track__a_size_that_is_not_a_count_of_bytes_is_refused(make_policy, now, bad):
    make_policy("pod.scan", timedelta(days=30))

    with pytest.raises(RetentionError, match="number of bytes"):
        api.track(
            tenant_id="acme", data_class="pod.scan", object_key="acme/a.pdf", size=bad, now=now
        )

    assert not RetentionRecord.objects.exists()


def test_track__without_now_uses_the_current_utc_time(author, approver, now):
    approved("pod.scan", timedelta(days=30), author=author, approver=approver, now=now)

    with freeze_time(now + timedelta(hours=3)):
        record = api.track(tenant_id="acme", data_class="pod.scan", object_key="acme/a.pdf")

    assert record.created_at == now + timedelta(hours=3)


def test_track__draft_only_class_raises_no_approved_policy(author, now):
    api.propose_policy_version(
        data_class="pod.scan", retention_period=timedelta(days=30), author=author, now=now
    )

    with pytest.raises(api.NoApprovedPolicy):
        api.track(tenant_id="acme", data_class="pod.scan", object_key="acme/a.pdf", now=now)

    assert not RetentionRecord.objects.exists()


def test_track__unknown_class_raises_unknown_data_class(db, now):
    with pytest.raises(api.UnknownDataClass):
        api.track(tenant_id="acme", data_class="no.such", object_key="acme/a.pdf", now=now)

    assert not RetentionRecord.objects.exists()


def test_track__later_version_never_moves_an_existing_deadline(author, approver, now):
    approved("pod.scan", timedelta(days=30), author=author, approver=approver, now=now)
    record = api.track(tenant_id="acme", data_class="pod.scan", object_key="acme/a.pdf", now=now)

    approved("pod.scan", timedelta(days=5), author=author, approver=approver, now=now)

    record.refresh_from_db()
    assert record.expires_at == now + timedelta(days=30)


def test_track__zero_period_deletes_at_write_time(
    make_policy, now, django_capture_on_commit_callbacks
):
    make_policy("pod.scan", timedelta(0))
    key = storages["default"].save("acme/pod.scan/scan.png", ContentFile(b"x"))

    with django_capture_on_commit_callbacks(execute=True):
        record = api.track(tenant_id="acme", data_class="pod.scan", object_key=key, now=now)

    record.refresh_from_db()
    assert record.state == RecordState.DELETED
    assert not exists(record)
    assert DeletionEvent.objects.filter(record=record, outcome="deleted").exists()


def test_track__zero_period_in_a_report_only_class_keeps_the_object(
    make_policy, now, django_capture_on_commit_callbacks
):
    make_policy("pod.scan", timedelta(0), enforce=False)
    key = storages["default"].save("acme/pod.scan/scan.png", ContentFile(b"x"))

    with django_capture_on_commit_callbacks(execute=True):
        record = api.track(tenant_id="acme", data_class="pod.scan", object_key=key, now=now)

    record.refresh_from_db()
    assert record.state == RecordState.ACTIVE
    assert exists(record)
    assert not DeletionEvent.objects.exists()


def test_track__zero_period_deletes_nothing_when_the_host_rolls_back(
    make_policy, now, django_capture_on_commit_callbacks
):
    make_policy("pod.scan", timedelta(0))
    key = storages["default"].save("acme/pod.scan/scan.png", ContentFile(b"x"))

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        api.track(tenant_id="acme", data_class="pod.scan", object_key=key, now=now)
        raise RuntimeError("the host's own write failed")

    assert callbacks == []
    assert storages["default"].exists(key)
    assert not RetentionRecord.objects.exists()
    assert not DeletionEvent.objects.exists()


def test_renew__restarts_the_period_under_the_version_in_force(make_policy, author, approver, now):
    make_policy("idv.photo", timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=10))
    newer = approved(
        "idv.photo", timedelta(days=90), author=author, approver=approver, now=now - timedelta(5)
    )

    renewed = api.renew(record, now=now)

    assert renewed.row_version == record.row_version + 1
    assert renewed.policy_version == newer
    assert renewed.expires_at == now + timedelta(days=90)
    assert renewed.renewed_at == now
    assert renewed.created_at == record.created_at


def test_renew__of_a_deleted_record_is_refused(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=31))
    enforce(now=now)
    record.refresh_from_db()
    assert record.state == RecordState.DELETED

    with pytest.raises(api.RecordAlreadyDeleted):
        api.renew(record, now=now + timedelta(minutes=1))

    record.refresh_from_db()
    assert record.renewed_at is None


# --------------------------------------------------------------------------
# Enforcement mode


@pytest.mark.parametrize(
    "dry_run_days_ago", [None, 8], ids=["without-a-dry-run", "when-the-dry-run-is-too-old"]
)
def test_enable_enforcement__refused_without_a_recent_dry_run(
    make_policy, approver, now, settings, dry_run_days_ago
):
    settings.RETENTION_DRY_RUN_MAX_AGE = timedelta(days=7)
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    if dry_run_days_ago is not None:
        dry_run(now=now - timedelta(days=dry_run_days_ago))

    with pytest.raises(api.EnforcementNotAllowed):
        api.enable_enforcement("idv.photo", by=approver, now=now)

    assert Policy.objects.get(data_class="idv.photo").mode == DataClassMode.REPORT_ONLY


def test_enable_enforcement__refused_for_someone_who_may_not_approve(make_policy, author, now):
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    dry_run(now=now - timedelta(hours=1))

    with pytest.raises(NotAllowed):
        api.enable_enforcement("idv.photo", by=author, now=now)

    assert Policy.objects.get(data_class="idv.photo").mode == DataClassMode.REPORT_ONLY
    assert Run.objects.get().reviewed_by is None


def test_enable_enforcement__after_a_dry_run_records_the_reviewer(make_policy, approver, now):
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    put_tracked(now=now - timedelta(days=31))
    reviewed = dry_run(now=now - timedelta(hours=1))

    policy = api.enable_enforcement("idv.photo", by=approver, now=now)

    assert policy.mode == DataClassMode.ENFORCE
    assert Policy.objects.get(data_class="idv.photo").mode == DataClassMode.ENFORCE
    reviewed.refresh_from_db()
    assert reviewed.reviewed_by == approver
    assert reviewed.reviewed_at == now


def test_enable_enforcement__default_max_age_is_seven_days(make_policy, approver, now):
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    dry_run(now=now - timedelta(days=6))
    dry_run(now=now - timedelta(days=8))

    api.enable_enforcement("idv.photo", by=approver, now=now)
    assert Run.objects.get(reviewed_by=approver).finished_at == now - timedelta(days=6)

    api.disable_enforcement("idv.photo", by=approver, now=now)
    with pytest.raises(api.EnforcementNotAllowed):
        api.enable_enforcement("idv.photo", by=approver, now=now + timedelta(days=2))


def test_enable_enforcement__refused_when_the_dry_run_covered_another_class(
    make_policy, approver, now
):
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    make_policy("pod.scan", timedelta(days=30), enforce=False)
    dry_run(now=now - timedelta(hours=1), data_classes=["pod.scan"])

    with pytest.raises(api.EnforcementNotAllowed):
        api.enable_enforcement("idv.photo", by=approver, now=now)


def test_enable_enforcement__refused_when_the_dry_run_covered_only_one_tenant(
    make_policy, approver, now
):
    # The reviewer must have seen what enforcement would delete for the whole
    # class, not for one tenant of it.
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    put_tracked(tenant_id="globex", now=now - timedelta(days=31))
    dry_run(now=now - timedelta(hours=1), tenant_id="acme")

    with pytest.raises(api.EnforcementNotAllowed):
        api.enable_enforcement("idv.photo", by=approver, now=now)


def test_disable_enforcement__returns_the_class_to_report_only(make_policy, approver, now):
    make_policy("idv.photo", timedelta(days=30), enforce=True)

    policy = api.disable_enforcement("idv.photo", by=approver, now=now)

    assert policy.mode == DataClassMode.REPORT_ONLY
    assert Policy.objects.get(data_class="idv.photo").mode == DataClassMode.REPORT_ONLY
    record = put_tracked(now=now - timedelta(days=31))
    run = enforce(now=now)
    record.refresh_from_db()
    assert run.data_classes == []
    assert record.state == RecordState.ACTIVE and exists(record)


# --------------------------------------------------------------------------
# Legal holds


def test_place_hold__without_a_scope_is_refused(db, approver, now):
    with pytest.raises(InvalidHold):
        api.place_hold(reason="litigation 2026-17", placed_by=approver, now=now)


@pytest.mark.parametrize("reason", ["", "   "])
def test_place_hold__without_a_reason_is_refused(db, approver, now, reason):
    with pytest.raises(InvalidHold):
        api.place_hold(reason=reason, placed_by=approver, tenant_id="acme", now=now)


def test_place_hold__protects_its_scope_and_release_frees_it(make_policy, approver, now):
    make_policy("idv.photo", timedelta(days=30))
    held = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    free = put_tracked(tenant_id="globex", now=now - timedelta(days=31))

    hold = api.place_hold(
        reason="litigation 2026-17", placed_by=approver, tenant_id="acme", now=now
    )
    enforce(now=now)

    held.refresh_from_db()
    free.refresh_from_db()
    assert (hold.placed_by, hold.placed_at, hold.tenant_id) == (approver, now, "acme")
    assert held.state == RecordState.ACTIVE and exists(held)
    assert free.state == RecordState.DELETED

    released = api.release_hold(
        hold, released_by=approver, reason="case closed", now=now + timedelta(hours=1)
    )
    enforce(now=now + timedelta(hours=2))

    held.refresh_from_db()
    assert (released.released_by, released.release_reason) == (approver, "case closed")
    assert held.state == RecordState.DELETED and not exists(held)


# --------------------------------------------------------------------------
# Kill switch


def test_pause_and_resume__toggle_the_kill_switch(db, approver, now):
    switch = api.pause(by=approver, reason="incident 42", now=now)

    assert switch.paused is True
    stored = KillSwitch.load()
    assert (stored.paused, stored.paused_by, stored.paused_at, stored.reason) == (
        True,
        approver,
        now,
        "incident 42",
    )

    api.resume(by=approver, now=now + timedelta(hours=1))

    stored = KillSwitch.load()
    assert (stored.paused, stored.resumed_by, stored.resumed_at) == (
        False,
        approver,
        now + timedelta(hours=1),
    )


def test_pause__stops_an_enforce_run_from_claiming(make_policy, approver, now):
    make_policy("idv.photo", timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=31))
    api.pause(by=approver, reason="incident 42", now=now)

    with pytest.raises(RetentionError):
        enforce(now=now)

    assert kept(record)
    assert Run.objects.get(mode=RunMode.ENFORCE).status == "refused"


# --------------------------------------------------------------------------
# now must be aware


@pytest.mark.parametrize(
    "call",
    [
        lambda naive, users: api.track(
            tenant_id="acme", data_class="pod.scan", object_key="acme/a.pdf", now=naive
        ),
        lambda naive, users: api.propose_policy_version(
            data_class="pod.scan", retention_period=timedelta(days=1), author=users[0], now=naive
        ),
        lambda naive, users: api.pause(by=users[1], reason="incident", now=naive),
        lambda naive, users: api.place_hold(
            reason="litigation", placed_by=users[1], tenant_id="acme", now=naive
        ),
        lambda naive, users: api.enable_enforcement("pod.scan", by=users[1], now=naive),
    ],
    ids=["track", "propose_policy_version", "pause", "place_hold", "enable_enforcement"],
)
def test_now__naive_datetime_is_refused_with_value_error(author, approver, now, call):
    approved("pod.scan", timedelta(days=30), author=author, approver=approver, now=now)
    naive = now.replace(tzinfo=None)

    with pytest.raises(ValueError, match="aware"):
        call(naive, (author, approver))

    assert not RetentionRecord.objects.exists()
    assert not KillSwitch.objects.filter(paused=True).exists()
    assert PolicyVersion.objects.count() == 1
