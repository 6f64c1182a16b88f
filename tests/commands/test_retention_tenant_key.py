"""retention_tenant_key create|revoke TENANT (SPEC §3.1)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from retention.rest.models import TenantAPIKey

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("retention_tenant_key", *args, stdout=out)
    return out.getvalue()


def test_create__prints_a_working_key_once_and_stores_only_its_hash(client):
    output = run("create", "acme", "--name", "reporting job")

    lines = output.splitlines()
    key = lines[1]
    stored = TenantAPIKey.objects.get()
    assert lines[0] == f"Created API key {stored.prefix} for tenant acme:"
    assert key.startswith(f"{stored.prefix}.")
    assert "cannot be shown again" in output
    assert (stored.tenant_id, stored.name, stored.revoked) == ("acme", "reporting job", False)
    assert key not in stored.hashed_key
    response = client.get("/api/v1/deletions/", headers={"Authorization": f"Api-Key {key}"})
    assert response.status_code == 200


def test_create__refuses_a_malformed_tenant_id():
    with pytest.raises(CommandError, match="is not a tenant id"):
        run("create", "acme corp")

    assert not TenantAPIKey.objects.exists()


def test_revoke__revokes_every_live_key_of_the_tenant_only(client):
    acme_key = run("create", "acme").splitlines()[1]
    run("create", "acme")
    globex_key = run("create", "globex").splitlines()[1]

    output = run("revoke", "acme")

    assert output.strip() == "Revoked 2 API key(s) of tenant acme."
    assert TenantAPIKey.objects.filter(tenant_id="acme", revoked=True).count() == 2
    assert all(k.revoked_at for k in TenantAPIKey.objects.filter(tenant_id="acme"))
    refused = client.get("/api/v1/deletions/", headers={"Authorization": f"Api-Key {acme_key}"})
    assert refused.status_code == 401
    kept = client.get("/api/v1/deletions/", headers={"Authorization": f"Api-Key {globex_key}"})
    assert kept.status_code == 200


def test_revoke__one_key_by_prefix():
    first = run("create", "acme").splitlines()[1].split(".")[0]
    second = run("create", "acme").splitlines()[1].split(".")[0]

    run("revoke", "acme", "--prefix", first)

    assert TenantAPIKey.objects.get(prefix=first).revoked
    assert not TenantAPIKey.objects.get(prefix=second).revoked


def test_revoke__nothing_to_revoke_fails_with_a_reason():
    run("create", "acme")
    run("revoke", "acme")

    with pytest.raises(CommandError, match="no live API key"):
        run("revoke", "acme")
