"""The admin's data map: the same table as the command, links, JSON and CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tests.helpers import dry_run
from tests.rowhost.models import Subscriber

pytestmark = pytest.mark.django_db

URL = "admin:retention_policy_datamap"
SUBSCRIBERS = "marketing.subscribers"


@pytest.fixture
def governed(row_registry: Any, make_policy: Any, now: Any) -> Any:
    row_registry.register_model(Subscriber, data_class=SUBSCRIBERS, age_field="created_at")
    version = make_policy(SUBSCRIBERS, timedelta(days=60), enforce=False)
    Subscriber.objects.create(contact="a@example.com", created_at=now - timedelta(days=90))
    run = dry_run(now=now, data_classes=[SUBSCRIBERS])
    return version, run


def test_datamap_admin__a_governed_row_links_to_its_policy_and_its_last_run(governed, bob_client):
    version, run = governed

    page = bob_client.get(reverse(URL)).content.decode()

    policy_url = reverse("admin:retention_policy_change", args=[version.policy.pk])
    run_url = reverse("admin:retention_run_change", args=[run.pk])
    row = page[page.index(f'data-class="{SUBSCRIBERS}"') :]
    row = row[: row.index("</tr>")]
    assert f'href="{policy_url}"' in row
    assert f'href="{run_url}"' in row
    assert "version 1, 60 days" in row
    assert "contact" in page
    assert "UTC" in row


def test_datamap_admin__names_ungoverned_models_with_personal_looking_fields(bob_client):
    page = bob_client.get(reverse(URL)).content.decode()

    assert 'id="retention-datamap-ungoverned"' in page
    assert (
        '<strong data-model="rowhost.Subscriber">rowhost.Subscriber</strong> (contact, origin)'
        in (page)
    )


def test_datamap_admin__json_is_the_commands_object(governed, bob_client):
    found = bob_client.get(reverse(URL), {"format": "json"}).json()

    (subscriber,) = [m for m in found["models"] if m["model"] == "rowhost.Subscriber"]
    assert subscriber["status"] == "governed"
    assert subscriber["data_classes"][0]["last_run"]["id"] == str(governed[1].pk)


def test_datamap_admin__csv_has_a_line_per_model_and_data_class(governed, bob_client, settings):
    settings.RETENTION_EXEMPT_MODELS = {
        **getattr(settings, "RETENTION_EXEMPT_MODELS", {}),
        "rowhost.Account": "test accounts",
    }

    response = bob_client.get(reverse(URL), {"format": "csv"})
    lines = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))

    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    (subscriber,) = [line for line in lines if line["model"] == "rowhost.Subscriber"]
    assert subscriber["status"] == "governed"
    assert subscriber["data_class"] == SUBSCRIBERS
    assert subscriber["retention_period"] == "60 days"
    assert subscriber["personal_fields"].startswith("contact: email address")
    (account,) = [line for line in lines if line["model"] == "rowhost.Account"]
    assert (account["status"], account["reason"]) == ("exempt", "test accounts")
    assert any(line["kind"] == "store" and line["storage"] == "default" for line in lines)


def test_datamap_admin__an_exemption_without_a_reason_says_so(bob_client, settings):
    settings.RETENTION_EXEMPT_MODELS = {"rowhost.Subscriber": ""}

    page = bob_client.get(reverse(URL)).content.decode()

    assert "RETENTION_EXEMPT_MODELS[&#x27;rowhost.Subscriber&#x27;] has no reason" in page


def test_datamap_admin__needs_the_view_permission_on_policies(db):
    user = get_user_model().objects.create_user("eve", "eve@example.com", "pw", is_staff=True)
    client = Client()
    client.force_login(user)

    assert client.get(reverse(URL)).status_code == 403


def test_datamap_admin__linked_from_the_retention_index(bob_client):
    page = bob_client.get(reverse("admin:app_list", args=["retention"])).content.decode()

    assert f'<a href="{reverse(URL)}">Data map</a>' in page
