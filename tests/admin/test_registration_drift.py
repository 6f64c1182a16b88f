"""The admin shows a row class's registration, as approved against the code's, in words,
and offers the draft that adopts it (issue 25)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from retention.models import PolicyVersion, PolicyVersionStatus
from tests.helpers import submitted
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db

DATA_CLASS = "logs.request"
ADOPT = "Draft a version that adopts this registration"


def _register(register_logs: Any, status: int) -> None:
    register_logs(tenant_field=None, scope=lambda qs: qs.filter(status=status))


@pytest.fixture
def logs(register_logs: Any, make_policy: Any) -> PolicyVersion:
    _register(register_logs, 200)
    version: PolicyVersion = make_policy(DATA_CLASS, timedelta(days=45), batch_size=7)
    return version


def _policy_page(client: Any, version: PolicyVersion) -> str:
    url = reverse("admin:retention_policy_change", args=[version.policy_id])
    response = client.get(url)
    assert response.status_code == 200
    return str(response.content.decode())


def test_policy_page__says_nothing_while_the_code_matches(logs, alice_client):
    html = _policy_page(alice_client, logs)

    assert ADOPT not in html
    assert "no longer matches" not in html


def test_policy_page__shows_old_against_new_in_words_and_offers_to_adopt(
    logs, register_logs, alice_client
):
    _register(register_logs, 500)

    html = _policy_page(alice_client, logs)

    assert "The code's registration of logs.request no longer matches" in html
    assert "no run disposes of its rows" in html
    assert "Scope (the rows the class covers)" in html
    assert "rows where &quot;rowhost_requestlog&quot;.&quot;status&quot; = 200" in html
    assert "rows where &quot;rowhost_requestlog&quot;.&quot;status&quot; = 500" in html
    assert ADOPT in html
    assert f"?data_class={DATA_CLASS}" in html


def test_adopt__the_draft_starts_from_the_version_in_force(logs, register_logs, alice_client):
    _register(register_logs, 500)

    response = alice_client.get(
        reverse("admin:retention_policyversion_add") + f"?data_class={DATA_CLASS}"
    )

    initial = response.context["adminform"].form.initial
    assert initial["retention_period"] == timedelta(days=45)
    assert initial["batch_size"] == 7
    assert initial["disposition"] == "delete"


def test_review__the_adopting_version_shows_what_it_adopts_and_its_figures(
    logs, register_logs, alice, bob_client, now
):
    _register(register_logs, 500)
    draft = submitted(DATA_CLASS, timedelta(days=45), author=alice, now=now)
    RequestLog.objects.create(tenant_id="t1", path="/e", status=500, created_at=now - timedelta(90))
    RequestLog.objects.create(tenant_id="t1", path="/o", status=200, created_at=now - timedelta(90))

    response = bob_client.get(reverse("admin:retention_policyversion_review", args=[draft.pk]))

    html = response.content.decode()
    assert (
        "Approving version 2 adopts the registration in the code, which differs from version 1"
        in html
    )
    assert "&quot;status&quot; = 500" in html
    # The figures under the scope in the code now: the error row only.
    assert response.context["row_figures"].backlog == 1
    assert "1 row would be due at once" in html

    approved = bob_client.post(
        reverse("admin:retention_policyversion_approve", args=[draft.pk]), follow=True
    )
    draft.refresh_from_db()
    assert draft.status == PolicyVersionStatus.APPROVED
    assert ADOPT not in _policy_page(bob_client, draft)
    assert approved.status_code == 200


def test_version_page__the_version_in_force_says_its_rows_wait(logs, register_logs, bob_client):
    _register(register_logs, 500)

    response = bob_client.get(reverse("admin:retention_policyversion_change", args=[logs.pk]))

    html = response.content.decode()
    assert "The code no longer matches the registration approved with version 1" in html
    assert "As approved with version 1" in html and "In the code now" in html
