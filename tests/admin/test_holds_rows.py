"""Legal holds over database rows in admin: what they protect, a hold on one row (issue 25)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from freezegun import freeze_time

from retention import api
from retention.models import LegalHold
from retention.selectors.holds import held_rows
from tests.admin.conftest import messages_of
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db

ADD = "admin:retention_legalhold_add"
LIST = "admin:retention_legalhold_changelist"


@pytest.fixture
def logs(register_logs: Any, make_policy: Any, now: Any) -> dict[str, list[RequestLog]]:
    register_logs()
    make_policy("logs.request", timedelta(days=30))

    def make(tenant: str, days: int, n: int) -> list[RequestLog]:
        return [
            RequestLog.objects.create(
                tenant_id=tenant, path="/x", created_at=now - timedelta(days=days)
            )
            for _ in range(n)
        ]

    return {
        "acme_old": make("acme", 40, 3),
        "acme_new": make("acme", 2, 2),
        "globex": make("globex", 40, 4),
    }


def _place(client: Any, **data: str) -> Any:
    form = {
        "tenant_id": "",
        "data_class": "",
        "record_id": "",
        "row_model": "",
        "row_pk": "",
        "reason": "",
    }
    form.update(data)
    return client.post(reverse(ADD), form, follow=True)


def test_place__a_hold_on_one_row_by_model_and_primary_key(logs, bob_client, now):
    row = logs["globex"][0]

    with freeze_time(now):
        response = _place(
            bob_client, row_model="rowhost.RequestLog", row_pk=str(row.pk), reason="DSAR 12"
        )

    hold = LegalHold.objects.get()
    # Stored as api.place_hold(subject=row) stores it.
    assert (hold.subject_type, hold.subject_pk) == ("rowhost.RequestLog", str(row.pk))
    assert (hold.tenant_id, hold.data_class, hold.record_id) == (None, None, None)
    holds = held_rows("logs.request", label="rowhost.RequestLog", tenant_field="tenant_id")
    assert holds.covers(row.pk, row.tenant_id)
    assert "It protects 1 row now (past its deadline)." in " ".join(messages_of(response))


def test_place__a_row_that_does_not_exist_is_refused(logs, bob_client):
    missing = _place(bob_client, row_model="rowhost.RequestLog", row_pk="999999", reason="x")
    not_a_pk = _place(bob_client, row_model="rowhost.RequestLog", row_pk="abc", reason="x")
    no_model = _place(bob_client, row_pk="1", reason="x")
    with_scope = _place(
        bob_client,
        row_model="rowhost.RequestLog",
        row_pk=str(logs["globex"][0].pk),
        tenant_id="acme",
        reason="x",
    )

    assert not LegalHold.objects.exists()
    assert "No row of rowhost.RequestLog has this primary key." in missing.content.decode()
    assert "No row of rowhost.RequestLog has this primary key." in not_a_pk.content.decode()
    assert "Choose the row&#x27;s model." in no_model.content.decode()
    assert "A hold on one row takes no other scope" in with_scope.content.decode()


def test_place__the_row_model_offers_the_registered_models(logs, bob_client):
    page = bob_client.get(reverse(ADD)).content.decode()

    assert '<option value="rowhost.RequestLog">rowhost.RequestLog</option>' in page


def test_holds_list__shows_the_rows_each_hold_protects(logs, approver, bob_client, now):
    row = api.place_hold(reason="DSAR", placed_by=approver, subject=logs["acme_new"][0], now=now)
    tenant = api.place_hold(reason="case", placed_by=approver, tenant_id="acme", now=now)
    whole = api.place_hold(reason="audit", placed_by=approver, data_class="logs.request", now=now)

    with freeze_time(now):
        page = bob_client.get(reverse(LIST)).content.decode()
        row_page = bob_client.get(
            reverse("admin:retention_legalhold_change", args=[row.pk])
        ).content.decode()

    assert "1 row now (not yet past its deadline)" in page
    assert "0 records now (0 past their deadline); 5 rows (3 past their deadline)" in page
    assert "0 records now (0 past their deadline); 9 rows (7 past their deadline)" in page
    assert "0 records now" not in row_page
    assert "1 row now" in row_page
    assert tenant.pk and whole.pk


def test_release__the_confirmation_counts_the_rows_it_protects(logs, approver, bob_client, now):
    tenant = api.place_hold(reason="case", placed_by=approver, tenant_id="acme", now=now)
    row = api.place_hold(reason="DSAR", placed_by=approver, subject=logs["globex"][0], now=now)

    with freeze_time(now):
        tenant_page = bob_client.get(
            reverse("admin:retention_legalhold_release", args=[tenant.pk])
        ).content.decode()
        row_page = bob_client.get(
            reverse("admin:retention_legalhold_release", args=[row.pk])
        ).content.decode()

    assert "and <strong>5</strong> rows of database rows, <strong>3</strong> of them past" in (
        tenant_page
    )
    assert "It protects <strong>1</strong> row now, past its deadline." in row_page


def test_hold_row_reach__reads_a_row_hold_as_the_primary_key_field_does(logs, approver, now):
    from retention.models import Policy
    from retention.selectors.policies import version_governing
    from retention.selectors.rows import hold_row_reach

    row = logs["globex"][0]
    policy = Policy.objects.get(data_class="logs.request")
    versions = {"logs.request": version_governing(policy)}
    spelled = LegalHold.objects.create(
        reason="zero-padded",
        placed_by=approver,
        placed_at=now,
        subject_type="rowhost.RequestLog",
        subject_pk=f"00{row.pk}",
    )
    garbage = LegalHold.objects.create(
        reason="not a key",
        placed_by=approver,
        placed_at=now,
        subject_type="rowhost.RequestLog",
        subject_pk="not-a-number",
    )

    assert hold_row_reach(spelled, now=now, versions=versions).rows == 1
    # A value the key cannot take names no row, as the engine reads it; no crash.
    assert hold_row_reach(garbage, now=now, versions=versions).rows == 0
