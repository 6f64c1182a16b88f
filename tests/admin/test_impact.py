"""The impact preview and the hold filter it counts with."""

from __future__ import annotations

from datetime import timedelta

import pytest

from retention import services
from retention.models import RecordState, RetentionRecord
from retention.selectors.holds import held_q
from retention.selectors.impact import impact_preview
from tests.helpers import put_tracked

pytestmark = pytest.mark.django_db


def test_impact_preview__counts_eligible_now_in_7_and_30_days_with_held_and_tenants(
    make_policy, author, approver, now
):
    make_policy(period=timedelta(days=30))  # in force: 30 days
    days = timedelta(days=1)
    put_tracked(tenant_id="acme", now=now - 40 * days)  # expired already
    put_tracked(tenant_id="acme", now=now - 20 * days)  # v1: in 10 days; draft: now
    put_tracked(tenant_id="globex", now=now - 15 * days)  # held
    put_tracked(tenant_id="acme", now=now - 5 * days)  # draft: in 5 days
    put_tracked(tenant_id="acme", now=now - 1 * days)  # draft: in 9 days
    gone = put_tracked(tenant_id="acme", now=now - 50 * days)
    RetentionRecord.objects.filter(pk=gone.pk).update(state=RecordState.DELETED, deleted_at=now)
    services.legal_hold_place(reason="case", placed_by=approver, tenant_id="globex", now=now)
    draft = services.policy_version_propose(
        data_class="idv.photo", retention_period=timedelta(days=10), author=author, now=now
    )

    preview = impact_preview(draft, now=now)

    assert preview.pending == 5
    recorded = [(h.recorded_eligible, h.recorded_held) for h in preview.horizons]
    draft_counts = [(h.draft_eligible, h.draft_held) for h in preview.horizons]
    assert recorded == [(1, 0), (1, 0), (4, 1)]
    assert draft_counts == [(2, 1), (3, 1), (4, 1)]
    assert [(t.tenant_id, t.counts, t.held) for t in preview.tenants] == [
        ("acme", (2, 3, 4), 0),
        ("globex", (0, 0, 0), 1),
    ]


def test_impact_preview__a_renewed_record_is_re_evaluated_from_its_renewal(
    make_policy, author, now
):
    make_policy(period=timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=40))
    services.record_renew(record=record, now=now - timedelta(days=2))
    draft = services.policy_version_propose(
        data_class="idv.photo", retention_period=timedelta(days=5), author=author, now=now
    )

    preview = impact_preview(draft, now=now)

    assert [h.draft_eligible for h in preview.horizons] == [0, 1, 1]


def test_held_q__matches_exactly_the_records_the_engine_treats_as_held(make_policy, approver, now):
    make_policy()
    make_policy(data_class="pod.scan")
    records = [
        put_tracked(tenant_id=tenant, data_class=data_class, now=now - timedelta(days=n))
        for n, (tenant, data_class) in enumerate(
            [
                ("acme", "idv.photo"),
                ("acme", "idv.photo"),
                ("globex", "idv.photo"),
                ("initech", "idv.photo"),
                ("initech", "idv.photo"),
                ("umbrella", "idv.photo"),
                ("acme", "pod.scan"),
            ]
        )
    ]

    def hold(**scope):
        return services.legal_hold_place(reason="r", placed_by=approver, now=now, **scope)

    hold(tenant_id="globex")
    hold(record=records[3])
    hold(record=records[4], tenant_id="acme")  # contradictory scope: holds nothing
    hold(tenant_id="acme", data_class="pod.scan")  # another class
    released = hold(tenant_id="umbrella")
    services.legal_hold_release(hold=released, released_by=approver, reason="done", now=now)

    photos = RetentionRecord.objects.filter(data_class="idv.photo")
    expected = set(photos.held().values_list("id", flat=True))
    assert expected == {records[2].pk, records[3].pk}
    assert set(photos.filter(held_q("idv.photo")).values_list("id", flat=True)) == expected

    hold(data_class="idv.photo")
    assert set(photos.filter(held_q("idv.photo")).values_list("id", flat=True)) == set(
        photos.held().values_list("id", flat=True)
    )
    assert photos.filter(held_q("idv.photo")).count() == 6


def test_held_q__is_none_when_no_active_hold_touches_the_class(make_policy, approver, now):
    make_policy()
    services.legal_hold_place(reason="r", placed_by=approver, data_class="pod.scan", now=now)

    assert held_q("idv.photo") is None
