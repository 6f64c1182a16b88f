"""The volume breaker in admin: review a trip against normal, release it for the next run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from retention.models import BreakerState, BreakerTrip, RecordState, RetentionRecord
from tests.admin.conftest import messages_of
from tests.helpers import dry_run, enforce, put_tracked

pytestmark = pytest.mark.django_db


@pytest.fixture
def trip(make_policy, now, settings) -> BreakerTrip:
    """A first sweep of all of a class: 3 of 3 records, over a minimum count of 1."""
    settings.RETENTION_BREAKER_MIN_COUNT = 1
    make_policy()
    for _ in range(3):
        put_tracked(now=now - timedelta(days=40))
    run = enforce(now=now)
    assert run.tripped == 3
    return BreakerTrip.objects.get()


@pytest.fixture
def viewer_client(groups) -> Client:
    """May look at the trips, may not approve anything."""
    user = get_user_model().objects.create_user("vic", "vic@example.com", "pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="retention", codename="view_breakertrip")
    )
    client = Client()
    client.force_login(user)
    return client


def _change(pk: int) -> str:
    return reverse("admin:retention_breakertrip_change", args=[pk])


def _release(pk: int) -> str:
    return reverse("admin:retention_breakertrip_release", args=[pk])


def test_breaker_admin__lists_trips_filterable_by_state_and_class(trip, bob_client):
    changelist = reverse("admin:retention_breakertrip_changelist")

    listed = bob_client.get(changelist).content.decode()
    tripped = bob_client.get(changelist, {"state__exact": "tripped"}).content.decode()
    used = bob_client.get(changelist, {"state__exact": "used"}).content.decode()
    other = bob_client.get(changelist, {"data_class": "pod.scan"}).content.decode()

    assert str(trip) in listed and str(trip) in tripped
    assert str(trip) not in used and str(trip) not in other


def test_breaker_admin__the_trip_shows_its_figures_against_normal_and_a_sample(trip, bob_client):
    page = bob_client.get(_change(trip.pk)).content.decode()

    assert "Against what is normal for idv.photo" in page
    assert "about to dispose of 3 of its 3 not-yet-deleted records (100.0%)" in page
    assert "at most 25%" in page and "no history: a first sweep" in page
    record = RetentionRecord.objects.order_by("expires_at", "id").first()
    assert f"record {record.pk}" in page
    assert record.object_key not in page
    assert 'id="retention-breaker-release"' in page


def test_breaker_admin__release_asks_a_reason_then_the_next_run_deletes(trip, bob, bob_client, now):
    form = bob_client.get(_release(trip.pk))
    assert form.status_code == 200 and "Release for the next run" in form.content.decode()

    refused = bob_client.post(_release(trip.pk), {"reason": ""})
    assert refused.status_code == 200 and "This field is required" in refused.content.decode()
    assert BreakerTrip.objects.get().state == BreakerState.TRIPPED

    done = bob_client.post(
        _release(trip.pk), {"reason": "first sweep, sample checked"}, follow=True
    )

    trip.refresh_from_db()
    assert (trip.state, trip.released_by, trip.release_reason) == (
        BreakerState.RELEASED,
        bob,
        "first sweep, sample checked",
    )
    assert any("idv.photo released" in m for m in messages_of(done))
    run = enforce(now=now + timedelta(minutes=1))
    assert run.already_absent + run.deleted == 3
    assert not RetentionRecord.objects.exclude(state=RecordState.DELETED).exists()


def test_breaker_admin__release_needs_the_approve_permission(trip, viewer_client):
    page = viewer_client.get(_change(trip.pk))
    assert page.status_code == 200
    assert 'id="retention-breaker-release"' not in page.content.decode()

    assert viewer_client.get(_release(trip.pk)).status_code == 403
    assert viewer_client.post(_release(trip.pk), {"reason": "trust me"}).status_code == 403
    assert BreakerTrip.objects.get().state == BreakerState.TRIPPED


def test_breaker_admin__release_is_a_csrf_protected_post(trip, bob):
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)

    response = client.post(_release(trip.pk), {"reason": "no token"})

    assert response.status_code == 403
    assert BreakerTrip.objects.get().state == BreakerState.TRIPPED


def test_breaker_admin__the_action_takes_one_trip_to_its_release_page(
    trip, bob_client, viewer_client
):
    changelist = reverse("admin:retention_breakertrip_changelist")
    data = {"action": "release_for_next_run", "_selected_action": [trip.pk]}

    response = bob_client.post(changelist, data)
    offered = viewer_client.get(changelist).content.decode()

    assert response.status_code == 302 and response["Location"] == _release(trip.pk)
    assert "release_for_next_run" not in offered


def test_breaker_admin__the_dashboard_and_the_dry_run_report_show_it(trip, bob_client, now):
    dashboard = bob_client.get(reverse("admin:retention_policy_dashboard")).content.decode()
    run = dry_run(now=now)
    report = bob_client.get(reverse("admin:retention_run_report", args=[run.pk])).content.decode()

    assert 'data-tripped="idv.photo"' in dashboard and "breaker tripped" in dashboard
    assert _change(trip.pk) in dashboard
    assert "an enforcing run deletes none of idv.photo" in report


def test_breaker_admin__a_dry_run_report_says_the_breaker_would_trip(
    make_policy, now, settings, bob_client
):
    settings.RETENTION_BREAKER_MIN_COUNT = 1
    make_policy()
    put_tracked(now=now - timedelta(days=40))

    run = dry_run(now=now)
    report = bob_client.get(reverse("admin:retention_run_report", args=[run.pk])).content.decode()

    assert 'data-would-trip="idv.photo"' in report
    assert "would trip on the fraction limit" in report
    assert not BreakerTrip.objects.exists()
