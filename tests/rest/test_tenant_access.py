"""Who may call the tenant endpoints, and what each tenant may see (SPEC §3.2)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone

from retention.rest.models import TenantAPIKey
from retention.rest.services import tenant_key_create, tenant_key_revoke
from uploads.services import upload_create

pytestmark = pytest.mark.django_db

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 64


def tenant_requests(upload_id: object) -> list[tuple[str, str, dict]]:
    """(method, path, data) of every tenant endpoint."""
    return [
        ("get", "/api/v1/deletions/", {}),
        ("get", "/api/v1/deletions/?format=csv", {}),
        ("get", "/api/v1/deletions/report/", {}),
        ("get", f"/api/v1/uploads/{upload_id}/retention/", {}),
        (
            "post",
            "/api/v1/uploads/",
            {"data_class": "idv.photo", "file": ContentFile(JPEG, name="a.jpg")},
        ),
    ]


def call(client, method: str, path: str, data: dict, headers: dict | None = None):
    if method == "post":
        return client.post(path, data=data, headers=headers or {})
    return client.get(path, headers=headers or {})


@pytest.mark.parametrize("index", range(5))
def test_tenant_endpoints__without_a_key_answer_401_not_authenticated(client, index):
    method, path, data = tenant_requests(uuid.uuid4())[index]

    response = call(client, method, path, data)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"] == "Api-Key"
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.parametrize("index", range(5))
def test_tenant_endpoints__revoked_key_answers_401_api_key_revoked(client, make_policy, now, index):
    make_policy("idv.photo", timedelta(days=30))
    key, secret = tenant_key_create(tenant_id="acme")
    upload = upload_create(
        tenant_id="acme", data_class="idv.photo", file=ContentFile(JPEG, name="a.jpg")
    )
    method, path, data = tenant_requests(upload.pk)[index]
    headers = {"Authorization": f"Api-Key {secret}"}
    assert call(client, method, path, dict(data), headers).status_code in (200, 201)

    tenant_key_revoke(key=key, now=timezone.now())
    if method == "post":
        data = {"data_class": "idv.photo", "file": ContentFile(JPEG, name="b.jpg")}
    response = call(client, method, path, data, headers)

    assert response.status_code == 401
    assert response.json()["code"] == "api_key_revoked"


@pytest.mark.parametrize("kind", ["altered", "unknown_prefix", "no_secret"])
def test_tenant_key__unknown_or_altered_key_answers_401_api_key_invalid(client, acme, kind):
    good = acme["Authorization"]
    value = {
        "altered": good[:-1] + ("A" if good[-1] != "A" else "B"),
        "unknown_prefix": "Api-Key nosuchpr.0123456789abcdef0123456789abcdef",
        "no_secret": good.split(".", 1)[0],
    }[kind]

    response = client.get("/api/v1/deletions/", headers={"Authorization": value})

    assert response.status_code == 401
    assert response.json()["code"] == "api_key_invalid"


def test_tenant_key__expired_key_answers_401_api_key_expired(client):
    _, secret = tenant_key_create(
        tenant_id="acme", expiry_date=timezone.now() - timedelta(seconds=1)
    )

    response = client.get("/api/v1/deletions/", headers={"Authorization": f"Api-Key {secret}"})

    assert response.status_code == 401
    assert response.json()["code"] == "api_key_expired"


def test_tenant_key__other_schemes_are_not_credentials(client, acme):
    secret = acme["Authorization"].removeprefix("Api-Key ")

    response = client.get("/api/v1/deletions/", headers={"Authorization": f"Bearer {secret}"})

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_tenant_key__stored_hashed_never_in_clear(db):
    key, secret = tenant_key_create(tenant_id="acme")

    row = TenantAPIKey.objects.get(pk=key.pk)
    stored = " ".join(str(getattr(row, f.attname)) for f in TenantAPIKey._meta.fields)
    assert secret not in stored
    assert secret.split(".", 1)[1] not in stored
    assert row.hashed_key.startswith("sha512$$")
    assert row.prefix == secret.split(".", 1)[0]


def test_tenant_key__a_tenant_key_cannot_trigger_runs(client, acme):
    response = client.post("/api/v1/runs/", data={"mode": "dry_run"}, headers=acme)

    assert response.status_code == 401
    assert response.json()["code"] == "signature_missing"


# --------------------------------------------------------------------------
# Scoping: another tenant's data does not exist for you


def test_cross_tenant__upload_retention_of_another_tenants_upload_is_404(
    client, acme, globex, make_policy
):
    make_policy("idv.photo", timedelta(days=30))
    theirs = upload_create(
        tenant_id="globex", data_class="idv.photo", file=ContentFile(JPEG, name="g.jpg")
    )

    mine = client.get(f"/api/v1/uploads/{theirs.pk}/retention/", headers=globex)
    foreign = client.get(f"/api/v1/uploads/{theirs.pk}/retention/", headers=acme)
    unknown = client.get(f"/api/v1/uploads/{uuid.uuid4()}/retention/", headers=acme)
    malformed = client.get("/api/v1/uploads/not-a-uuid/retention/", headers=acme)

    assert mine.status_code == 200
    for response in (foreign, unknown, malformed):
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"code": "not_found", "detail": "Not found."}


def test_cross_tenant__receipts_list_and_csv_show_only_your_own(
    client, acme, globex, deleted_records
):
    records = deleted_records({"acme": 2, "globex": 3})
    acme_ids = {r.pk for r in records if r.tenant_id == "acme"}
    globex_ids = {r.pk for r in records if r.tenant_id == "globex"}

    listed = client.get("/api/v1/deletions/", headers=acme).json()["results"]
    filtered = client.get("/api/v1/deletions/?data_class=idv.photo", headers=acme).json()
    csv_body = b"".join(
        client.get("/api/v1/deletions/?format=csv", headers=acme).streaming_content
    ).decode()
    theirs = client.get("/api/v1/deletions/", headers=globex).json()["results"]

    assert {r["record_id"] for r in listed} == acme_ids
    assert {r["record_id"] for r in filtered["results"]} == acme_ids
    assert len(csv_body.strip().splitlines()) == 1 + len(acme_ids)
    assert {r["record_id"] for r in theirs} == globex_ids


def test_cross_tenant__report_counts_only_your_own(client, acme, globex, deleted_records):
    deleted_records({"globex": 3})
    deleted_records({"acme": 1}, data_class="pod.scan")

    mine = client.get("/api/v1/deletions/report/", headers=acme).json()
    theirs = client.get("/api/v1/deletions/report/", headers=globex).json()

    assert [(c["data_class"], c["deleted"]) for c in mine["data_classes"]] == [("pod.scan", 1)]
    assert [(c["data_class"], c["deleted"]) for c in theirs["data_classes"]] == [("idv.photo", 3)]
    assert mine["tenant_id"] == "acme"


# --------------------------------------------------------------------------
# Throttling


def test_throttling__per_tenant_rate_answers_429_throttled(client, settings, acme, globex):
    settings.RETENTION_API_THROTTLE_RATE = "2/min"

    codes = [client.get("/api/v1/deletions/", headers=acme).status_code for _ in range(3)]
    refused = client.get("/api/v1/deletions/report/", headers=acme)
    other_tenant = client.get("/api/v1/deletions/", headers=globex)

    assert codes == [200, 200, 429]
    assert refused.status_code == 429
    assert refused.json()["code"] == "throttled"
    assert int(refused["Retry-After"]) > 0
    assert other_tenant.status_code == 200
