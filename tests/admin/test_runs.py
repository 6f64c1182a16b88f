"""Dry-run reports and enabling enforcement from them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from retention.models import DataClassMode, Policy, Run
from tests.admin.conftest import messages_of
from tests.helpers import dry_run, put_tracked

pytestmark = pytest.mark.django_db


@pytest.fixture
def photos(make_policy, now):
    make_policy(enforce=False)
    return [
        put_tracked(tenant_id="acme", now=now - timedelta(days=40)),
        put_tracked(tenant_id="acme", now=now - timedelta(days=35)),
        put_tracked(tenant_id="globex", now=now - timedelta(days=31)),
        put_tracked(tenant_id="globex", now=now - timedelta(days=2)),
    ]


def _report(run: Run) -> str:
    return reverse("admin:retention_run_report", args=[run.pk])


def _enforcement(client, run: Run, mode: str = "enforce", data_class: str = "idv.photo"):
    """Confirm on the class's enable (or disable) page, with the dry run it showed."""
    policy = Policy.objects.get(data_class=data_class)
    page = "enable" if mode == "enforce" else "disable"
    return client.post(
        reverse(f"admin:retention_policy_{page}", args=[policy.pk]),
        {"run": run.pk, "post": "yes"},
        follow=True,
    )


def test_report__shows_counts_tenants_and_a_sample_of_digests_never_keys(photos, bob_client, now):
    run = dry_run(now=now)

    response = bob_client.get(_report(run))

    html = response.content.decode()
    assert response.status_code == 200
    assert "Would delete <strong>3</strong>; held <strong>0</strong>" in html
    assert "<td>acme</td><td>2</td>" in html
    assert "<td>globex</td><td>1</td>" in html
    for record in photos[:3]:
        assert record.key_digest in html
    for record in photos:
        assert record.object_key not in html
    assert 'data-enable="idv.photo"' in html


def test_report__the_sample_shows_each_records_size_or_that_none_was_recorded(
    make_policy, bob_client, now
):
    make_policy(enforce=False)
    sized = put_tracked(now=now - timedelta(days=40), size=2_400_000)
    unsized = put_tracked(now=now - timedelta(days=35))
    run = dry_run(now=now)

    html = bob_client.get(_report(run)).content.decode()

    sample = run.report["sample"]["idv.photo"]
    assert [(s["record_id"], s["size_bytes"]) for s in sample] == [
        (sized.pk, 2_400_000),
        (unsized.pk, None),
    ]
    assert '<td class="retention-size"><span title="2,400,000 bytes">2.4 MB</span></td>' in html
    assert '<td class="retention-size"><span title="not recorded">—</span></td>' in html


def test_report__a_report_stored_before_sizes_were_sampled_still_renders(photos, bob_client, now):
    run = dry_run(now=now)
    for item in run.report["sample"]["idv.photo"]:
        del item["size_bytes"]
    Run.objects.filter(pk=run.pk).update(report=run.report)

    response = bob_client.get(_report(run))

    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('<span title="not recorded">—</span>') == 3
    assert photos[0].key_digest in html


def test_report__dry_runs_are_listed_with_their_counts(photos, bob_client, now):
    run = dry_run(now=now)

    response = bob_client.get(reverse("admin:retention_run_changelist") + "?mode__exact=dry_run")

    assert list(response.context["cl"].result_list) == [run]
    assert _report(run) in response.content.decode()


def test_enable_enforcement__from_a_fresh_dry_run_records_the_reviewer(
    photos, bob, bob_client, now
):
    run = dry_run(now=now - timedelta(hours=1))

    response = _enforcement(bob_client, run)

    policy = Policy.objects.get()
    assert policy.mode == DataClassMode.ENFORCE
    assert policy.reviewed_dry_run_id == run.pk
    run.refresh_from_db()
    assert run.reviewed_by == bob
    assert any("Enforcement enabled for idv.photo" in m for m in messages_of(response))


def test_enable_enforcement__refused_without_a_fresh_dry_run(photos, bob_client, now):
    stale = dry_run(now=now - timedelta(days=8))

    page = bob_client.get(_report(stale))
    response = _enforcement(bob_client, stale)

    assert "older than 7 days" in page.content.decode()
    assert 'data-enable="idv.photo"' not in page.content.decode()
    assert response.status_code == 200
    assert any("older than 7 days" in m for m in messages_of(response))
    assert Policy.objects.get().mode == DataClassMode.REPORT_ONLY


def test_enable_enforcement__refused_from_an_older_report_when_a_newer_one_exists(
    photos, bob_client, now
):
    older = dry_run(now=now - timedelta(days=2))
    newer = dry_run(now=now - timedelta(days=1))

    page = bob_client.get(_report(older))
    response = _enforcement(bob_client, older)

    assert _report(newer) in page.content.decode()
    assert any("a newer dry run" in m for m in messages_of(response))
    assert Policy.objects.get().mode == DataClassMode.REPORT_ONLY


def test_enable_enforcement__approvers_only(photos, alice_client, now):
    run = dry_run(now=now)

    page = alice_client.get(_report(run))
    response = _enforcement(alice_client, run)

    assert page.status_code == 200
    assert 'data-enable="idv.photo"' not in page.content.decode()
    assert response.status_code == 403
    assert Policy.objects.get().mode == DataClassMode.REPORT_ONLY


def test_back_to_report_only__from_the_report(photos, bob_client, now):
    run = dry_run(now=now)
    _enforcement(bob_client, run)

    page = bob_client.get(_report(run))
    response = _enforcement(bob_client, run, mode="report_only")

    assert 'data-report-only="idv.photo"' in page.content.decode()
    assert any("report-only again" in m for m in messages_of(response))
    assert Policy.objects.get().mode == DataClassMode.REPORT_ONLY


def test_run_batches__read_only_and_filterable_by_run_and_state(make_policy, bob_client, now):
    from retention import engine
    from retention.models import BatchState, RunBatch, RunMode, RunTrigger

    make_policy(batch_size=2)
    for _ in range(3):
        put_tracked(now=now - timedelta(days=40))
    published: list[str] = []

    def publish(func: str, payload: dict, name: str) -> None:
        published.append(func)

    run = engine.run_enqueue(
        mode=RunMode.ENFORCE, trigger=RunTrigger.COMMAND, now=now, publish=publish
    )
    engine.run_arm(run_id=run.pk, clock=lambda: now, publish=publish, guard=_quiet)
    other = RunBatch.objects.order_by("published_at", "token").last()
    RunBatch.objects.filter(pk=other.pk).update(state=BatchState.DONE)
    changelist = reverse("admin:retention_runbatch_changelist")

    queued = bob_client.get(f"{changelist}?run={run.pk}&state__exact=queued")
    done = bob_client.get(f"{changelist}?run={run.pk}&state__exact=done")
    elsewhere = bob_client.get(f"{changelist}?run=00000000-0000-0000-0000-000000000000")

    assert queued.status_code == 200
    assert queued.context["cl"].result_count == 1 and done.context["cl"].result_count == 1
    assert elsewhere.context["cl"].result_count == 0
    assert str(other.token)[:8] in done.content.decode()
    change = reverse("admin:retention_runbatch_change", args=[other.pk])
    page = bob_client.get(change)
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert bob_client.get(reverse("admin:retention_runbatch_add")).status_code == 403


def _quiet(*, now):
    from retention.engine.guard import GuardReading

    return GuardReading(over_budget=False, value=0.0, budget=30.0, detail="")
