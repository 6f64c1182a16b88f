"""A tenant's erasure requests over REST: file one for its own subject, follow it,
fetch its certificate (SPEC §3.2; issue 29, point 5)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from freezegun import freeze_time

from retention import api
from retention.digest import subject_digest
from retention.models import ErasureRequest, ErasureState
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/erasures/"


@pytest.fixture
def photos(make_policy):
    make_policy("idv.photo")
    for i, (tenant, subject) in enumerate(
        [("acme", "ann"), ("acme", "ann"), ("acme", "bob"), ("globex", "ann")]
    ):
        key = f"{tenant}/{i}.jpg"
        storages["default"].save(key, ContentFile(b"x"))
        api.track(tenant_id=tenant, data_class="idv.photo", object_key=key, subject_id=subject)


@pytest.fixture
def dpo(db):
    return UserFactory(username="dpo")


def filed(dpo, *, tenant_id: str = "acme", subject_id: str = "ann", **kwargs) -> ErasureRequest:
    """A request filed by the provider (the tenant's own POST is tested through the API)."""
    return api.request_erasure(
        requested_by=dpo,
        reason="Art. 17",
        subject_id=subject_id,
        tenant_id=tenant_id,
        data_classes=["idv.photo"],
        **kwargs,
    )


def post(client, headers, body):
    return client.post(URL, data=body, content_type="application/json", headers=headers)


# -------------------------------------------------------------------- filing


@freeze_time("2026-12-03 08:02:30")
def test_create__202_a_received_request_for_the_subject_within_the_keys_tenant(
    client, acme, photos
):
    response = post(client, acme, {"subject_id": "ann", "reason": "Ticket 881"})

    assert response.status_code == 202
    body = response.json()
    assert body == {"id": body["id"], "state": "received", "due_at": "2027-01-02T08:02:30Z"}
    request = ErasureRequest.objects.get(pk=body["id"])
    assert (request.tenant_id, request.requested_by_tenant) == ("acme", "acme")
    assert request.requested_by is None
    assert request.subject_digest == subject_digest("ann")
    # Only acme's two photos of ann: not bob's, not globex's.
    assert request.scope["total"] == 2


def test_create__an_integer_subject_id_names_the_same_subject_as_its_text(client, acme, photos):
    response = post(client, acme, {"subject_id": 42, "reason": "Ticket 882"})

    assert response.status_code == 202
    assert ErasureRequest.objects.get().subject_digest == subject_digest("42")


def test_create__a_second_open_request_is_refused_naming_the_open_one(client, acme, photos):
    first = post(client, acme, {"subject_id": "ann", "reason": "Ticket 881"}).json()

    response = post(client, acme, {"subject_id": "ann", "reason": "Again"})

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_erasure_request"
    assert first["id"] in body["detail"]
    assert ErasureRequest.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"reason": "x"}, "subject_id"),
        ({"subject_id": "ann"}, "reason"),
        ({"subject_id": "ann", "reason": ""}, "reason"),
        ({"subject_id": True, "reason": "x"}, "subject_id"),
        ({"subject_id": 1.5, "reason": "x"}, "subject_id"),
        ({"subject_id": "", "reason": "x"}, "subject_id"),
        ({"subject_id": ["ann"], "reason": "x"}, "subject_id"),
        ({"subject_id": "ann", "reason": 17}, "reason"),
        # No way for a tenant to ask for its own offboarding, or to reach another tenant.
        ({"subject_id": "ann", "reason": "x", "tenant_id": "globex"}, "tenant_id"),
        ({"subject_id": "ann", "reason": "x", "data_classes": ["idv.photo"]}, "data_classes"),
    ],
)
def test_create__bad_input_is_400_invalid_naming_the_field(client, acme, body, field):
    response = post(client, acme, body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert list(response.json()["field_errors"]) == [field]
    assert not ErasureRequest.objects.exists()


def test_create__a_space_only_subject_id_is_the_services_refusal(client, acme):
    response = post(client, acme, {"subject_id": "   ", "reason": "x"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_erasure_request"
    assert not ErasureRequest.objects.exists()


def test_create__without_a_key_is_401(client):
    response = post(client, {}, {"subject_id": "ann", "reason": "x"})

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


# ------------------------------------------------------------------ following


def test_detail__the_request_its_times_and_per_class_progress_never_the_subject_id(
    client, acme, photos, dpo, now
):
    request = filed(dpo, now=now)

    response = client.get(f"{URL}{request.pk}/", headers=acme)

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(request.pk)
    assert body["state"] == "received"
    assert body["subject_digest"] == subject_digest("ann")
    assert body["received_at"] == "2026-03-14T12:00:00Z"
    assert body["due_at"] == "2026-04-13T12:00:00Z"
    assert body["approved_at"] is None and body["completed_at"] is None
    assert body["classes"] == [
        {
            "data_class": "idv.photo",
            "reachable": True,
            "not_reachable_because": "",
            "on_erasure": "delete",
            "erasure_basis": "",
            "items": 2,
            "settled": False,
            "erased": 0,
            "redacted": 0,
            "kept": 0,
            "left": None,
            "verified": None,
        }
    ]
    assert "subject_id" not in body
    assert '"ann"' not in response.content.decode()


def test_detail__the_outcome_its_runs_settled(client, acme, photos, dpo, now):
    request = filed(dpo, now=now)
    ErasureRequest.objects.filter(pk=request.pk).update(
        state=ErasureState.PARTIALLY_COMPLETED,
        completed_at=now + timedelta(days=2),
        outcome={
            "classes": {
                "idv.photo": {
                    "on_erasure": "delete",
                    "erased": 1,
                    "redacted": 0,
                    "kept": [{"hold": 7, "reason": "Case 12", "count": 1}],
                    "basis": "",
                    "left": 1,
                    "verified": False,
                }
            },
            "settled_at": "2026-03-16T12:00:00Z",
        },
    )

    body = client.get(f"{URL}{request.pk}/", headers=acme).json()

    assert body["state"] == "partially_completed"
    assert body["completed_at"] == "2026-03-16T12:00:00Z"
    (photo,) = body["classes"]
    assert (photo["settled"], photo["erased"], photo["kept"], photo["left"]) == (True, 1, 1, 1)
    assert photo["verified"] is False
    # The hold's reason is the provider's, not the tenant's to read.
    assert "Case 12" not in str(body)


@pytest.mark.parametrize("kind", ["other_tenant", "offboarding_of_other", "unknown", "malformed"])
def test_detail__another_tenants_unknown_or_malformed_id_is_404(
    client, acme, photos, dpo, now, kind
):
    ids = {
        "other_tenant": lambda: filed(dpo, tenant_id="globex", now=now).pk,
        "offboarding_of_other": lambda: (
            api.request_erasure(
                requested_by=dpo, reason="Contract ended", tenant_id="globex", now=now
            ).pk
        ),
        "unknown": uuid.uuid4,
        "malformed": lambda: "not-a-uuid",
    }
    erasure_id = ids[kind]()

    for path in (f"{URL}{erasure_id}/", f"{URL}{erasure_id}/certificate/"):
        response = client.get(path, headers=acme)
        assert response.status_code == 404, path
        assert response.json()["code"] == "not_found"


def test_detail__an_unknown_query_parameter_is_refused(client, acme, photos, dpo, now):
    request = filed(dpo, now=now)

    response = client.get(f"{URL}{request.pk}/?verbose=1", headers=acme)

    assert response.status_code == 400
    assert response.json()["field_errors"] == {"verbose": ["Unknown query parameter."]}


# ---------------------------------------------------------------- certificate


def test_certificate__409_until_it_is_issued(client, acme, photos, dpo, now):
    request = filed(dpo, now=now)

    response = client.get(f"{URL}{request.pk}/certificate/", headers=acme)

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "certificate_not_issued"
    assert body["detail"] == (
        f"Erasure request {request.pk} is received: its certificate is issued when it "
        "completes or partially completes."
    )


def test_certificate__the_certificate_as_issued(client, acme, photos, dpo, now):
    request = filed(dpo, now=now)
    certificate = {
        "request_id": str(request.pk),
        "subject_digest": request.subject_digest,
        "classes": {"idv.photo": {"erased": 2}},
        "signature": {"algorithm": "Ed25519", "value": "c2lnbmVk"},
    }
    ErasureRequest.objects.filter(pk=request.pk).update(
        state=ErasureState.COMPLETED, certificate=certificate
    )

    response = client.get(f"{URL}{request.pk}/certificate/", headers=acme)

    assert response.status_code == 200
    assert response.json() == certificate
