"""retention_erasure list|show ID|certificate ID (SPEC §3.1; issue 29, point 5)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from freezegun import freeze_time

from retention import api
from retention.models import ErasureRequest, ErasureState, Run, RunMode, RunStatus, RunTrigger
from retention.reporting import human
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NOW = "2026-12-03 08:02:00"
AT = datetime(2026, 12, 3, 8, 2, tzinfo=UTC)


def run(*args: str) -> str:
    out = StringIO()
    call_command("retention_erasure", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def requests(make_policy):
    """Ann's request, received 31 days before NOW (overdue), and globex's offboarding."""
    make_policy("idv.photo")
    storages["default"].save("acme/ann.jpg", ContentFile(b"x"))
    api.track(tenant_id="acme", data_class="idv.photo", object_key="acme/ann.jpg", subject_id="ann")
    dpo = UserFactory(username="dpo")
    received = AT - timedelta(hours=1)
    late = api.request_erasure(
        requested_by=dpo,
        reason="Art. 17 #1",
        subject_id="ann",
        tenant_id="acme",
        data_classes=["idv.photo"],
        now=received - timedelta(days=31),
    )
    offboarding = api.request_erasure(
        requested_by=dpo, reason="Contract ended", tenant_id="globex", now=received
    )
    return {"late": late, "offboarding": offboarding}


@pytest.fixture
def decider(db):
    user = UserFactory(username="decider")
    user.user_permissions.add(
        Permission.objects.get(
            content_type__app_label="retention", codename="approve_erasurerequest"
        )
    )
    return type(user).objects.get(pk=user.pk)


@freeze_time(NOW)
def test_list__by_due_date_the_overdue_one_marked_by_the_databases_clock(requests):
    output = run("list")

    lines = output.splitlines()
    late, offboarding = requests["late"], requests["offboarding"]
    assert lines[0] == "Erasure requests by due date (2026-12-03 08:02 UTC): 2"
    assert lines[1].startswith(f"{late.pk}  received")
    assert f"subject {late.subject_digest[:12]}… in tenant acme" in lines[1]
    assert lines[1].endswith(f"due {human(late.due_at)}  OVERDUE")
    assert lines[2].startswith(f"{offboarding.pk}  received")
    assert "tenant globex" in lines[2]
    assert "OVERDUE" not in lines[2]
    assert "ann" not in output  # the subject only by its digest


@freeze_time(NOW)
def test_list__an_ended_request_past_its_due_date_is_not_overdue(requests, decider):
    api.reject_erasure(requests["late"], by=decider, reason="Not our customer")

    output = run("list")

    assert "OVERDUE" not in output
    assert f"{requests['late'].pk}  rejected" in output


@freeze_time(NOW)
def test_list__json_one_object_with_every_request(requests):
    data = json.loads(run("list", "--json"))

    assert data["now"] == "2026-12-03T08:02:00Z"
    assert [r["id"] for r in data["requests"]] == [
        str(requests["late"].pk),
        str(requests["offboarding"].pk),
    ]
    late = data["requests"][0]
    assert (late["state"], late["overdue"], late["tenant_id"]) == ("received", True, "acme")
    assert late["due_at"] == "2026-12-02T07:02:00Z"
    assert late["requested_by"] == "dpo"
    assert "subject_id" not in late
    assert data["requests"][1]["overdue"] is False


def test_list__none():
    assert run("list") == "No erasure requests.\n"


@freeze_time(NOW)
def test_show__the_request_its_scope_per_class_and_its_outcome(requests, decider):
    late = requests["late"]
    api.approve_erasure(late, approver=decider)
    erase = Run.objects.create(
        trigger=RunTrigger.COMMAND,
        mode=RunMode.ERASE,
        status=RunStatus.FINISHED,
        erasure=late,
        started_at=timezone.now(),
        cutoff=timezone.now(),
        deleted=1,
    )
    ErasureRequest.objects.filter(pk=late.pk).update(
        state=ErasureState.COMPLETED,
        outcome={
            "classes": {
                "idv.photo": {
                    "on_erasure": "delete",
                    "erased": 1,
                    "redacted": 0,
                    "kept": [],
                    "basis": "",
                    "left": 0,
                    "verified": True,
                }
            },
            "settled_at": "2026-12-03T08:01:00Z",
        },
    )

    lines = run("show", str(late.pk)).splitlines()

    assert lines[0] == f"Erasure request {late.pk}: completed"
    assert f"  whom: subject {late.subject_digest} in tenant acme" in lines
    assert "  classes asked for: idv.photo" in lines
    assert f"  received {human(late.received_at)} from dpo" in lines
    assert "  approved 2026-12-03 08:02 UTC by decider" in lines
    assert "  idv.photo (tracked): 1 item; on erasure delete; holds covering some: none" in lines
    assert "Outcome (settled 2026-12-03 08:01 UTC):" in lines
    assert "  idv.photo: erased 1, redacted 0, kept 0, left 0, verified yes" in lines
    assert "Runs: 1" in lines
    assert any(line.startswith(f"  {erase.pk} finished") for line in lines)
    assert lines[-1] == "Certificate: not issued"


@freeze_time(NOW)
def test_show__json_has_the_scope_outcome_and_runs_never_the_subject_id(requests):
    late = requests["late"]

    data = json.loads(run("show", str(late.pk), "--json"))

    assert data["id"] == str(late.pk)
    assert data["overdue"] is True
    assert data["scope"] == late.scope
    assert data["outcome"] == {}
    assert data["runs"] == []
    assert data["certificate_issued"] is False
    assert "subject_id" not in data
    assert '"ann"' not in json.dumps(data)


@freeze_time(NOW)
def test_show__an_offboarding_names_no_subject(requests):
    output = run("show", str(requests["offboarding"].pk))

    assert "  whom: tenant globex" in output.splitlines()
    assert "Outcome:" in output
    assert "  idv.photo: not settled yet" in output


def test_certificate__prints_it_as_issued(requests):
    late = requests["late"]
    certificate = {"request_id": str(late.pk), "classes": {"idv.photo": {"erased": 1}}}
    ErasureRequest.objects.filter(pk=late.pk).update(
        state=ErasureState.COMPLETED, certificate=certificate
    )

    assert json.loads(run("certificate", str(late.pk))) == certificate


def test_certificate__not_issued_yet_exits_1_with_the_reason(requests):
    late = requests["late"]

    with pytest.raises(CommandError) as refused:
        run("certificate", str(late.pk))

    assert str(refused.value) == (
        f"Erasure request {late.pk} is received: its certificate is issued when it "
        "completes or partially completes."
    )
    assert refused.value.returncode == 1


@pytest.mark.parametrize("action", ["show", "certificate"])
@pytest.mark.parametrize("erasure_id", [str(uuid.UUID(int=7)), "not-an-id"])
def test_unknown_or_malformed_id__exits_1_naming_it(action, erasure_id):
    with pytest.raises(CommandError, match=f"^No erasure request {erasure_id}.$"):
        run(action, erasure_id)


def test_no_subcommand__is_a_usage_error():
    with pytest.raises(CommandError, match="ACTION"):
        run()
