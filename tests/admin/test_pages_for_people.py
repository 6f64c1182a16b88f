"""Pages for people (issue 30, point 3): the run page leads with what happened per
class, the draft form explains its rules for the class's kind and folds the engine's
knobs, names and plurals read right."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from retention.models import EventBatch, Run, RunMode
from tests.admin.conftest import untimed
from tests.helpers import enforce, put_tracked

pytestmark = pytest.mark.django_db


def test_run_page__leads_with_the_outcome_per_class_links_events_and_report_folds_the_engine(
    make_policy, bob_client, now
):
    make_policy("idv.photo")
    make_policy("pod.scan")
    for _ in range(2):
        put_tracked(now=now - timedelta(days=40))
    put_tracked(data_class="pod.scan", now=now - timedelta(days=40))
    run = enforce(now=now)

    html = bob_client.get(reverse("admin:retention_run_change", args=[run.pk])).content.decode()

    table = html[html.index('class="retention-run-outcomes"') :]
    table = table[: table.index("</table>")]
    assert "<th scope='row'>idv.photo</th><td>2</td>" in table
    assert "<th scope='row'>pod.scan</th><td>1</td>" in table
    assert html.index("retention-run-outcomes") < html.index("Engine details")
    events = reverse("admin:retention_deletionevent_changelist") + f"?run={run.pk}"
    assert f'href="{events}"' in html
    assert f'href="{reverse("admin:retention_run_report", args=[run.pk])}"' in html
    assert '<fieldset class="module aligned collapse' in html or "<details" in html
    assert "idv.photo, pod.scan" in html

    report = untimed(
        bob_client.get(reverse("admin:retention_run_report", args=[run.pk])).content.decode()
    )
    assert "<th scope='row'>idv.photo</th><td>2</td>" in report
    assert f"Started {now:%Y-%m-%d %H:%M} UTC" in report


def test_runs_list__classes_as_words_and_every_run_has_a_report(make_policy, bob_client, now):
    make_policy("idv.photo")
    make_policy("pod.scan")
    run = enforce(now=now)
    assert run.mode == RunMode.ENFORCE

    html = bob_client.get(reverse("admin:retention_run_changelist")).content.decode()

    assert "idv.photo, pod.scan" in html
    assert reverse("admin:retention_run_report", args=[run.pk]) in html
    assert Run.objects.count() == 1


def test_draft_form__the_period_is_explained_per_kind_and_the_knobs_fold_under_advanced(
    make_policy, register_accounts, alice_client
):
    make_policy("idv.photo")
    register_accounts()
    make_policy("accounts.redact", timedelta(days=90), disposition="redact")
    add = reverse("admin:retention_policyversion_add")

    rows = alice_client.get(add, {"data_class": "accounts.redact"}).content.decode()
    tracked = alice_client.get(add, {"data_class": "idv.photo"}).content.decode()

    assert "kept after its 'closed_at'" in rows
    assert "uploaded" not in rows.split('id="id_retention_period_helptext"')[1][:400]
    assert "after it is uploaded" in tracked
    advanced = rows[rows.index("<h2") :]
    assert "Advanced" in advanced
    assert "collapse" in rows[rows.index("Advanced") - 400 : rows.index("Advanced")]
    assert "Empty: the project's default, 0.25 (setting RETENTION_BREAKER_MAX_FRACTION)." in rows


def test_names__plurals_and_versions_read_right(make_policy, superuser_client):
    version = make_policy("idv.photo")

    index = superuser_client.get(reverse("admin:index")).content.decode()

    assert "Run batches" in index and "Run batchs" not in index
    assert str(version) == "idv.photo version 1 (approved)"
    assert str(EventBatch(seq=1, size=1)) == "Batch 1 (1 event)"
    assert str(EventBatch(seq=2, size=3)) == "Batch 2 (3 events)"
