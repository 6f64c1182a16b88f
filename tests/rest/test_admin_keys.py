"""Admin pages to issue and revoke tenant API keys."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission

from retention.rest.models import TenantAPIKey
from retention.rest.services import tenant_key_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/retention_rest/tenantapikey/"


def test_admin_add__shows_the_key_once_and_stores_its_hash(admin_client, client):
    response = admin_client.post(
        f"{CHANGELIST}add/", {"tenant_id": "acme", "name": "nightly export", "expiry_date": ""}
    )

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    key = re.search(r'<code id="tenant-api-key"[^>]*>([^<]+)</code>', page)[1]
    stored = TenantAPIKey.objects.get()
    assert (stored.tenant_id, stored.name) == ("acme", "nightly export")
    assert key.startswith(stored.prefix + ".")
    assert key not in stored.hashed_key
    detail = admin_client.get(f"{CHANGELIST}{quote(stored.pk)}/change/").content.decode()
    assert key not in detail
    used = client.get("/api/v1/deletions/", headers={"Authorization": f"Api-Key {key}"})
    assert used.status_code == 200


def test_admin_add__refuses_a_malformed_tenant(admin_client):
    response = admin_client.post(f"{CHANGELIST}add/", {"tenant_id": "acme corp", "name": "x"})

    assert response.status_code == 200
    assert "is not a tenant id" in response.content.decode()
    assert not TenantAPIKey.objects.exists()


def test_admin_revoke__asks_for_confirmation_then_revokes(admin_client, client):
    key, secret = tenant_key_create(tenant_id="acme")
    other, _ = tenant_key_create(tenant_id="globex")
    selection = {"action": "revoke_keys", "_selected_action": [key.pk]}

    confirm = admin_client.post(CHANGELIST, selection)
    assert confirm.status_code == 200
    assert "Revocation cannot be undone" in confirm.content.decode()
    assert not TenantAPIKey.objects.get(pk=key.pk).revoked

    done = admin_client.post(CHANGELIST, {**selection, "confirm": "yes"})

    assert done.status_code == 302
    key.refresh_from_db()
    assert key.revoked and key.revoked_at is not None
    assert not TenantAPIKey.objects.get(pk=other.pk).revoked
    refused = client.get("/api/v1/deletions/", headers={"Authorization": f"Api-Key {secret}"})
    assert refused.json()["code"] == "api_key_revoked"


def test_admin_revoke__needs_the_revoke_permission(client):
    viewer = UserFactory(username="viewer")
    viewer.user_permissions.add(
        Permission.objects.get(
            codename="view_tenantapikey", content_type__app_label="retention_rest"
        )
    )
    client.force_login(viewer)
    key, _ = tenant_key_create(tenant_id="acme")

    changelist = client.get(CHANGELIST).content.decode()
    client.post(
        CHANGELIST, {"action": "revoke_keys", "_selected_action": [key.pk], "confirm": "yes"}
    )

    assert "revoke_keys" not in changelist
    assert not TenantAPIKey.objects.get(pk=key.pk).revoked


def test_admin__keys_are_never_edited_or_deleted_and_tenantless_keys_are_hidden(admin_client):
    key, _ = tenant_key_create(tenant_id="acme")

    detail = admin_client.get(f"{CHANGELIST}{quote(key.pk)}/change/").content.decode()
    delete = admin_client.get(f"{CHANGELIST}{quote(key.pk)}/delete/")
    generic = admin_client.get("/admin/rest_framework_api_key/apikey/")

    assert 'name="tenant_id"' not in detail  # read-only
    assert delete.status_code == 403
    assert generic.status_code == 404
