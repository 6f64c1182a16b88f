"""REST API credentials (SPEC §3.2): tenant API keys and the signatures already seen.

Both tables were created by the core app (migration 0002) and keep their
names, so an install upgraded from 0.1 keeps its keys.
"""

from __future__ import annotations

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models import Q

if not apps.is_installed("rest_framework_api_key"):
    # Importing its models module would fail with a message about its own
    # APIKey model; say what the host has to do instead.
    raise ImproperlyConfigured(
        '"retention.rest" needs "rest_framework" and "rest_framework_api_key" in '
        'INSTALLED_APPS (pip install "django-lethe[api]").'
    )

from rest_framework_api_key.models import AbstractAPIKey  # noqa: E402


class TenantAPIKey(AbstractAPIKey):
    """A tenant's API key, stored hashed (SHA-512 of a random key): shown once.

    Only the 8-character prefix is kept in clear, to name the key in admin and
    in logs. Revocation cannot be undone.
    """

    tenant_id = models.CharField(max_length=100, db_index=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractAPIKey.Meta):
        db_table = "retention_tenantapikey"
        verbose_name = "tenant API key"
        verbose_name_plural = "tenant API keys"
        permissions = [("revoke_tenantapikey", "Can revoke tenant API keys")]
        constraints = [
            models.CheckConstraint(condition=~Q(tenant_id=""), name="retention_apikey_has_tenant"),
            models.CheckConstraint(
                condition=Q(revoked=False, revoked_at__isnull=True)
                | Q(revoked=True, revoked_at__isnull=False),
                name="retention_apikey_revocation_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prefix} ({self.tenant_id}: {self.name})"


class SeenRequestSignature(models.Model):
    """A signed control-plane request already accepted, so its replay is refused.

    Kept only while its timestamp could still pass the freshness window; older
    rows are pruned, since a replay of them is refused as stale anyway.
    """

    digest = models.CharField(max_length=64, primary_key=True)
    key_id = models.CharField(max_length=100)
    signed_at = models.DateTimeField(db_index=True)
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "retention_seenrequestsignature"

    def __str__(self) -> str:
        return f"Signature {self.digest[:12]}… by {self.key_id}"
