"""Admin pages to issue and revoke tenant API keys."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission

from retention.rest.models import TenantAPIKey
from retention.rest.services import tenant_key_create, tenant_key_revoke
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


def test_admin__keys_show_times_as_people_read_them(admin_client):
    expiry = datetime(2027, 3, 1, 9, 30, 15, tzinfo=UTC)
    expiring, _ = tenant_key_create(tenant_id="acme", expiry_date=expiry)
    revoked, _ = tenant_key_create(tenant_id="globex")
    tenant_key_revoke(key=revoked, now=datetime(2026, 12, 3, 8, 2, 41, tzinfo=UTC))

    listing = admin_client.get(CHANGELIST).content.decode()
    revoked_page = admin_client.get(f"{CHANGELIST}{quote(revoked.pk)}/change/").content.decode()
    add_page = admin_client.get(f"{CHANGELIST}add/").content.decode()

    shown = '<time datetime="2027-03-01T09:30:15Z" title="2027-03-01T09:30:15Z">'
    assert shown + "2027-03-01 09:30 UTC</time>" in listing
    assert ">2026-12-03 08:02 UTC</time>" in revoked_page
    assert "never" in revoked_page  # its expiry date
    assert "not revoked" in listing  # the other key
    assert not re.search(r"\b[ap]\.m\.", listing + revoked_page)
    # Issuing a key keeps the expiry date's input.
    assert 'name="expiry_date_0"' in add_page
