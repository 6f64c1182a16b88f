"""Enabling and disabling enforcement go through a confirmation page that says what
the next run will do, with the latest dry run's counts (issue 30, point 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from retention.models import DataClassMode, Policy
from tests.admin.conftest import messages_of
from tests.helpers import dry_run, put_tracked

pytestmark = pytest.mark.django_db


@pytest.fixture
def photos(make_policy, bob, now):
    make_policy(enforce=False)
    hold_tenant = "initech"
    from retention import api

    api.place_hold(reason="Litigation", placed_by=bob, tenant_id=hold_tenant, now=now)
    return [
        put_tracked(tenant_id="acme", now=now - timedelta(days=40)),
        put_tracked(tenant_id="acme", now=now - timedelta(days=35)),
        put_tracked(tenant_id="globex", now=now - timedelta(days=31)),
        put_tracked(tenant_id="globex", now=now - timedelta(days=2)),
        put_tracked(tenant_id=hold_tenant, now=now - timedelta(days=45)),
    ]


def _policy() -> Policy:
    return Policy.objects.get(data_class="idv.photo")


def _enable_url() -> str:
    return reverse("admin:retention_policy_enable", args=[_policy().pk])


def _disable_url() -> str:
    return reverse("admin:retention_policy_disable", args=[_policy().pk])


def test_enable_page__says_what_the_next_run_will_do_with_the_dry_runs_counts(
    photos, bob_client, now
):
    run = dry_run(now=now - timedelta(hours=1))

    response = bob_client.get(_enable_url())

    html = response.content.decode()
    assert response.status_code == 200
    assert "Enabling enforcement makes the next enforcing run" in html
    assert "delete the records of idv.photo whose deadline has passed" in html
    assert 'Delete: <strong data-outlook="eligible">3</strong> expired records' in html
    assert 'Keep under a legal hold: <strong data-outlook="held">1</strong>' in html
    assert '<th scope="row">acme</th><td>2</td>' in html
    assert '<th scope="row">globex</th><td>1</td>' in html
    assert f'name="run" value="{run.pk}"' in html
    assert "cannot be brought back" in html
    assert _policy().mode == DataClassMode.REPORT_ONLY  # a GET changes nothing


def test_enable_page__confirmed_enables_and_records_the_reviewer(photos, bob, bob_client, now):
    run = dry_run(now=now - timedelta(hours=1))

    response = bob_client.post(_enable_url(), {"run": run.pk, "post": "yes"}, follow=True)

    policy = _policy()
    assert policy.mode == DataClassMode.ENFORCE
    assert policy.reviewed_dry_run_id == run.pk
    run.refresh_from_db()
    assert run.reviewed_by == bob
    said = " ".join(messages_of(response))
    assert "Enforcement enabled for idv.photo" in said
    assert "the next enforcing run deletes its expired records" in said
    assert response.redirect_chain[-1][0] == reverse(
        "admin:retention_policy_change", args=[policy.pk]
    )


def test_enable_page__a_post_without_the_confirmation_changes_nothing(photos, bob_client, now):
    run = dry_run(now=now - timedelta(hours=1))

    response = bob_client.post(_enable_url(), {"run": run.pk})

    assert response.status_code == 200
    assert _policy().mode == DataClassMode.REPORT_ONLY


def test_enable_page__refused_when_a_newer_dry_run_appeared_after_the_page(photos, bob_client, now):
    shown = dry_run(now=now - timedelta(hours=2))
    dry_run(now=now - timedelta(hours=1))

    response = bob_client.post(_enable_url(), {"run": shown.pk, "post": "yes"}, follow=True)

    assert any("a newer dry run" in m for m in messages_of(response))
    assert _policy().mode == DataClassMode.REPORT_ONLY


def test_enable_page__without_a_recent_dry_run_says_how_to_get_one_and_offers_no_button(
    photos, bob_client, now
):
    dry_run(now=now - timedelta(days=8))

    html = bob_client.get(_enable_url()).content.decode()

    assert "finished within the last 7 days" in html
    assert "run_retention --dry-run --data-class idv.photo" in html
    assert "retention-confirm-enable" not in html


def test_enable_page__a_forged_run_id_is_a_404(photos, bob_client):
    assert bob_client.post(_enable_url(), {"run": "nope", "post": "yes"}).status_code == 404
    assert _policy().mode == DataClassMode.REPORT_ONLY


def test_enable_page__approvers_only(photos, alice_client, now):
    run = dry_run(now=now - timedelta(hours=1))

    assert alice_client.get(_enable_url()).status_code == 403
    assert alice_client.post(_enable_url(), {"run": run.pk, "post": "yes"}).status_code == 403
    assert _policy().mode == DataClassMode.REPORT_ONLY


def test_enable_page__the_report_and_the_policy_page_link_to_it(photos, bob_client, now):
    run = dry_run(now=now - timedelta(hours=1))

    report = bob_client.get(reverse("admin:retention_run_report", args=[run.pk]))
    policy_page = bob_client.get(reverse("admin:retention_policy_change", args=[_policy().pk]))

    assert f'href="{_enable_url()}"' in report.content.decode()
    assert f'href="{_enable_url()}"' in policy_page.content.decode()


def test_disable_page__says_what_stops_and_confirmed_returns_to_report_only(
    photos, bob_client, now
):
    run = dry_run(now=now - timedelta(hours=1))
    bob_client.post(_enable_url(), {"run": run.pk, "post": "yes"})
    assert _policy().mode == DataClassMode.ENFORCE

    page = bob_client.get(_disable_url())
    still = _policy().mode
    response = bob_client.post(_disable_url(), {"post": "yes"}, follow=True)

    html = page.content.decode()
    assert "no run deletes or redacts anything" in html
    assert "idv.photo: enforced now" in html
    assert 'Delete: <strong data-outlook="eligible">3</strong> expired records' in html
    assert still == DataClassMode.ENFORCE
    assert _policy().mode == DataClassMode.REPORT_ONLY
    assert any("report-only again" in m for m in messages_of(response))


def test_disable_page__needs_the_change_permission(photos, alice_client):
    assert alice_client.get(_disable_url()).status_code == 403
    assert alice_client.post(_disable_url(), {"post": "yes"}).status_code == 403
