"""Issue or revoke a tenant's REST API keys (SPEC §3.1).

retention_tenant_key create TENANT [--name NAME]   prints the key, once
retention_tenant_key revoke TENANT [--prefix P]    every live key, or one
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from retention.rest.services import InvalidTenantKey, tenant_key_create, tenant_keys_revoke


class Command(BaseCommand):
    help = "Create a tenant API key (printed once) or revoke a tenant's keys."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["create", "revoke"])
        parser.add_argument("tenant", help="The tenant id the key belongs to.")
        parser.add_argument("--name", default="", help="A label for the key (create).")
        parser.add_argument("--prefix", help="Revoke only the key with this prefix (revoke).")

    def handle(
        self,
        *,
        action: str,
        tenant: str,
        name: str,
        prefix: str | None,
        **options: Any,
    ) -> None:
        if action == "create":
            try:
                key, secret = tenant_key_create(tenant_id=tenant, name=name)
            except InvalidTenantKey as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"Created API key {key.prefix} for tenant {key.tenant_id}:")
            self.stdout.write(secret)
            self.stdout.write(
                "Store it now: it is kept only as a hash and cannot be shown again. "
                f"Send it as 'Authorization: Api-Key {key.prefix}.…'."
            )
            return
        count = tenant_keys_revoke(tenant_id=tenant, prefix=prefix, now=timezone.now())
        if not count:
            which = f"with prefix {prefix} " if prefix else ""
            raise CommandError(f"Tenant {tenant} has no live API key {which}to revoke.")
        self.stdout.write(f"Revoked {count} API key(s) of tenant {tenant}.")
