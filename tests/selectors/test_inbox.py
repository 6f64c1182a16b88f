"""The governance owner's inbox: each kind of item, read once (issue 30, point 2)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from retention import api, services
from retention.models import BreakerState, BreakerTrip, RecordState, RetentionRecord
from retention.selectors.inbox import governance_inbox
from tests.factories import UserFactory, user_with_perms
from tests.helpers import dry_run, put_tracked, submitted

pytestmark = pytest.mark.django_db


def _inbox(user: Any, now, *sections: str):
    return governance_inbox(user_id=user.pk, now=now, sections=sections or _ALL)


_ALL = ("waiting", "returned", "tripped", "failed", "stale_dry_runs", "drifted", "erasures")


def test_inbox__lists_a_version_waiting_for_another_approver(author, approver, now):
    theirs = submitted("idv.photo", timedelta(days=60), author=author, now=now)
    own = submitted("pod.scan", timedelta(days=30), author=approver, now=now)
    services.policy_version_propose(
        data_class="logs.api", retention_period=timedelta(days=7), author=author, now=now
    )  # a draft waits for nobody

    inbox = _inbox(approver, now, "waiting")

    assert inbox.waiting == (theirs,)
    assert own not in _inbox(approver, now, "waiting").waiting
    assert _inbox(author, now, "waiting").waiting == (own,)


def test_inbox__a_rejected_version_is_returned_to_its_author_only(author, approver, now):
    version = submitted("idv.photo", timedelta(days=60), author=author, now=now)
    services.policy_version_reject(version=version, by=approver, reason="90 days", now=now)

    returned = _inbox(author, now, "returned").returned

    assert [v.pk for v in returned] == [version.pk]
    assert returned[0].rejection_reason == "90 days"
    assert _inbox(approver, now, "returned").returned == ()
    assert _inbox(approver, now, "waiting").waiting == ()  # a draft again: nothing to approve


def test_inbox__a_resubmitted_version_leaves_its_authors_inbox(author, approver, now):
    version = submitted("idv.photo", timedelta(days=60), author=author, now=now)
    services.policy_version_reject(version=version, by=approver, reason="90 days", now=now)
    services.policy_version_submit(version=version, by=author, now=now)

    assert _inbox(author, now, "returned").returned == ()
    assert [v.pk for v in _inbox(approver, now, "waiting").waiting] == [version.pk]


def test_inbox__lists_open_breaker_trips_not_released_ones(make_policy, approver, now, settings):
    settings.RETENTION_BREAKER_MIN_COUNT = 1
    open_trip = BreakerTrip.objects.create(
        data_class="idv.photo", state=BreakerState.TRIPPED, limit="fraction", tripped_at=now
    )
    BreakerTrip.objects.create(
        data_class="pod.scan",
        state=BreakerState.RELEASED,
        limit="fraction",
        tripped_at=now - timedelta(days=1),
        released_by=approver,
        released_at=now,
        release_reason="first sweep",
    )

    assert _inbox(approver, now, "tripped").tripped == (open_trip,)


def test_inbox__counts_records_failed_for_review_per_class_not_those_retrying(
    make_policy, approver, now
):
    make_policy()
    make_policy("pod.scan")
    records = [put_tracked(now=now - timedelta(days=40)) for _ in range(3)]
    scan = put_tracked(data_class="pod.scan", now=now - timedelta(days=50))
    ids = [records[0].pk, records[1].pk, scan.pk]
    RetentionRecord.objects.filter(pk__in=ids).update(state=RecordState.FAILED, retryable=False)
    RetentionRecord.objects.filter(pk=records[2].pk).update(state=RecordState.FAILED)

    failed = _inbox(approver, now, "failed").failed

    assert [(f.data_class, f.count) for f in failed] == [("idv.photo", 2), ("pod.scan", 1)]
    assert failed[1].oldest_expiry == scan.expires_at


def test_inbox__report_only_classes_whose_dry_run_is_too_old_or_missing(make_policy, approver, now):
    make_policy("idv.photo", enforce=False)  # never a dry run
    make_policy("pod.scan", enforce=False)  # a dry run 8 days ago
    make_policy("logs.api", enforce=False)  # a fresh dry run
    make_policy("logs.audit", enforce=True)  # enforced: nothing to enable
    old = dry_run(now=now - timedelta(days=8), data_classes=["pod.scan"])
    dry_run(now=now - timedelta(hours=2), data_classes=["logs.api"])
    dry_run(now=now - timedelta(hours=1), data_classes=["pod.scan"], tenant_id="acme")

    stale = _inbox(approver, now, "stale_dry_runs").stale_dry_runs

    assert [s.policy.data_class for s in stale] == ["idv.photo", "pod.scan"]
    assert stale[0].last_dry_run is None
    # The newest finished dry run is shown, even a narrowed one that cannot be enabled from.
    assert stale[1].last_dry_run is not None and stale[1].last_dry_run.pk != old.pk
    assert stale[1].last_dry_run.tenant_id == "acme"


def test_inbox__a_class_with_no_version_in_force_is_not_stale(author, approver, now):
    submitted("idv.photo", timedelta(days=60), author=author, now=now)

    assert _inbox(approver, now, "stale_dry_runs").stale_dry_runs == ()


def test_inbox__lists_row_classes_whose_registration_drifted(
    register_logs, make_policy, approver, now
):
    register_logs(tenant_field=None, scope=lambda qs: qs.filter(status=200))
    version = make_policy("logs.request", timedelta(days=45))
    assert _inbox(approver, now, "drifted").drifted == ()

    register_logs(tenant_field=None, scope=lambda qs: qs.filter(status=500))

    drifted = _inbox(approver, now, "drifted").drifted
    assert [(d.data_class, d.version.pk) for d in drifted] == [("logs.request", version.pk)]


def test_inbox__open_erasure_requests_by_due_date_with_the_overdue_marked(
    make_policy, approver, now
):
    make_policy()
    alice = UserFactory(username="alice")
    late = api.request_erasure(
        requested_by=alice, reason="Art. 17", subject_id="ann", now=now - timedelta(days=31)
    )
    soon = api.request_erasure(
        requested_by=alice, reason="Art. 17", subject_id="bea", now=now - timedelta(days=2)
    )
    done = api.request_erasure(requested_by=alice, reason="Art. 17", subject_id="cy", now=now)
    judge = user_with_perms("judge", "approve_erasurerequest")
    api.reject_erasure(done, by=judge, reason="not our customer", now=now)

    erasures = _inbox(approver, now, "erasures").erasures

    assert [e.pk for e in erasures] == [late.pk, soon.pk]
    assert [e.is_overdue for e in erasures] == [True, False]  # type: ignore[attr-defined]


def test_inbox__reads_only_the_sections_asked_for(author, approver, now):
    submitted("idv.photo", timedelta(days=60), author=author, now=now)

    inbox = governance_inbox(user_id=approver.pk, now=now, sections={"erasures"})

    assert inbox.waiting == ()
    assert inbox.count == 0
    assert _inbox(approver, now).count == 1
    with pytest.raises(ValueError, match="Unknown inbox sections: nope"):
        governance_inbox(user_id=approver.pk, now=now, sections={"nope"})
