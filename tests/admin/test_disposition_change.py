"""The admin never turns a redacting class into a deleting one unasked (issue 25, broken item 2).

"Draft a new version" of a redacting class offered only "Delete"; the
approver approved a longer period, the diff showed "redact → delete" like
any other change, and the next run deleted the accounts that had been
redacted. A draft starts from the version in force's disposition, and a
version that changes it needs the approver's explicit confirmation.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from retention import services
from retention.engine import run_execute, run_start
from retention.exceptions import RetentionError
from retention.models import Policy, PolicyVersion, PolicyVersionStatus
from retention.selectors.policies import version_in_force
from tests.admin.conftest import messages_of
from tests.rowhost.models import Account

pytestmark = pytest.mark.django_db

DATA_CLASS = "crm.closed"
WARNING = "This version changes what happens to expired rows: redact → delete"


@pytest.fixture
def closed(register_accounts: Any, make_policy: Any) -> PolicyVersion:
    register_accounts(data_class=DATA_CLASS)
    version: PolicyVersion = make_policy(DATA_CLASS, timedelta(days=90), disposition="redact")
    return version


def _accounts(now: Any, n: int) -> None:
    for i in range(n):
        Account.objects.create(
            tenant_id="t1",
            name=f"Customer {i}",
            email=f"c{i}@example.com",
            closed_at=now - timedelta(days=400 + i),
        )


def _draft_form(initial: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """The add form as the author leaves it: every field as offered, some changed."""
    data: dict[str, Any] = {
        "data_class": DATA_CLASS,
        "description": "",
        "retention_period": "120 days",
        "safety_margin": "0 days",
        "locked": "",
        "disposition": initial["disposition"],
        "batch_size": str(initial["batch_size"]),
        "rate_limit": "",
        "max_attempts": "",
        "owner": "",
        "notes": "",
        "_continue": "1",
    }
    data.update(overrides)
    return data


def _submitted_delete(author: Any, now: Any) -> PolicyVersion:
    """A version of the class that deletes instead of redacting, submitted for review."""
    deleting = services.policy_version_propose(
        data_class=DATA_CLASS,
        retention_period=timedelta(days=120),
        author=author,
        now=now,
        disposition="delete",
    )
    return services.policy_version_submit(version=deleting, by=author, now=now)


def _add(data_class: str = DATA_CLASS) -> str:
    return reverse("admin:retention_policyversion_add") + f"?data_class={data_class}"


def _review(version: PolicyVersion) -> str:
    return reverse("admin:retention_policyversion_review", args=[version.pk])


def _approve(version: PolicyVersion) -> str:
    return reverse("admin:retention_policyversion_approve", args=[version.pk])


def test_draft__of_a_redacting_row_class_offers_redact_and_starts_from_it(closed, alice_client):
    response = alice_client.get(_add())

    form = response.context["adminform"].form
    assert form.initial["disposition"] == "redact"
    offered = [value for value, _ in form.fields["disposition"].choices]
    assert offered == ["delete", "redact"]
    assert "Redacting database records is not available yet." not in response.content.decode()


def test_draft__of_a_class_without_strategies_offers_delete_only(alice_client, make_policy):
    make_policy("idv.photo", timedelta(days=30))

    response = alice_client.get(_add("idv.photo"))

    form = response.context["adminform"].form
    assert [value for value, _ in form.fields["disposition"].choices] == ["delete"]


def test_admin__a_longer_period_drafted_in_admin_keeps_redacting_the_rows(
    closed, alice, alice_client, bob_client, now
):
    """The issue's run: after a version drafted and approved in the admin, rows are redacted."""
    _accounts(now, 7)
    add = alice_client.get(_add())
    initial = add.context["adminform"].form.initial

    drafted = alice_client.post(reverse("admin:retention_policyversion_add"), _draft_form(initial))

    assert drafted.status_code == 302
    draft = PolicyVersion.objects.get(policy__data_class=DATA_CLASS, number=2)
    assert draft.disposition == "redact"
    services.policy_version_submit(version=draft, by=alice, now=now)
    approved = bob_client.post(_approve(draft), follow=True)
    assert any("approved and in force" in m for m in messages_of(approved))

    run = run_start(mode="enforce", data_classes=[DATA_CLASS], now=now)
    run = run_execute(run=run, clock=lambda: now)

    assert (run.redacted, run.deleted) == (7, 0)
    assert Account.objects.count() == 7
    assert set(Account.objects.values_list("name", flat=True)) == {"[redacted]"}


def test_review__a_version_changing_redact_to_delete_is_its_own_warning(
    closed, alice, bob_client, now
):
    deleting = _submitted_delete(alice, now)

    response = bob_client.get(_review(deleting))

    html = response.content.decode()
    assert WARNING in html
    assert 'class="errornote retention-disposition-change"' in html
    assert 'name="confirm_disposition_change"' in html


def test_approve__a_version_changing_redact_to_delete_is_refused_without_confirmation(
    closed, alice, bob_client, now
):
    _accounts(now, 3)
    deleting = _submitted_delete(alice, now)

    refused = bob_client.post(_approve(deleting), follow=True)

    deleting.refresh_from_db()
    assert deleting.status == PolicyVersionStatus.SUBMITTED
    assert version_in_force(data_class=DATA_CLASS) == closed
    assert any("redact → delete" in m and "confirm" in m for m in messages_of(refused))
    Policy.objects.filter(data_class=DATA_CLASS).update(mode="enforce")
    run = run_execute(run=run_start(mode="enforce", data_classes=[DATA_CLASS], now=now))
    assert (run.redacted, run.deleted) == (3, 0)


def test_approve__the_approver_confirms_a_disposition_change_explicitly(
    closed, alice, bob_client, now
):
    deleting = _submitted_delete(alice, now)

    bob_client.post(_approve(deleting), {"confirm_disposition_change": "on"}, follow=True)

    deleting.refresh_from_db()
    assert deleting.status == PolicyVersionStatus.APPROVED


def test_approve_service__refuses_a_disposition_change_without_confirmation(
    closed, alice, bob, now
):
    deleting = _submitted_delete(alice, now)

    with pytest.raises(RetentionError, match="redact → delete"):
        services.policy_version_approve(version=deleting, approver=bob, now=now)
    approved = services.policy_version_approve(
        version=deleting, approver=bob, now=now, confirm_disposition_change=True
    )

    assert approved.status == PolicyVersionStatus.APPROVED
