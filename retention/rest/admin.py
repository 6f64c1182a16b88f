"""Tenant API keys in the admin: issue (the key is shown once, on the page, never stored in
clear or put in a message cookie) and revoke (after a confirmation page).

The generic, tenant-less key admin of djangorestframework-api-key is hidden:
such a key would authenticate nothing here.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from rest_framework_api_key import admin as api_key_admin  # noqa: F401  (registers APIKey)
from rest_framework_api_key.models import APIKey

from retention.human_times import HumanTimesMixin
from retention.rest.models import TenantAPIKey
from retention.rest.services import (
    InvalidTenantKey,
    tenant_id_validate,
    tenant_key_create,
    tenant_key_revoke,
)

REVOKE_PERMISSION = "retention_rest.revoke_tenantapikey"

# The library's admin module is imported above, so that its registration has
# happened (whatever the order of INSTALLED_APPS) before it is undone here.
if admin.site.is_registered(APIKey):
    admin.site.unregister(APIKey)


class TenantAPIKeyForm(forms.ModelForm[TenantAPIKey]):
    class Meta:
        model = TenantAPIKey
        fields = ("tenant_id", "name", "expiry_date")

    def clean_tenant_id(self) -> str:
        try:
            return tenant_id_validate(self.cleaned_data["tenant_id"])
        except InvalidTenantKey as exc:
            raise ValidationError(str(exc)) from exc


@admin.register(TenantAPIKey)
class TenantAPIKeyAdmin(HumanTimesMixin[TenantAPIKey], admin.ModelAdmin[TenantAPIKey]):
    """Created, expiry and revocation read "2026-12-03 08:02 UTC" (``HumanTimesMixin``)."""

    # A key with no expiry date is valid until revoked.
    human_none = {"expiry_date": "never", "revoked_at": "not revoked"}

    form = TenantAPIKeyForm
    list_display = (
        "prefix",
        "tenant_id",
        "name",
        "created",
        "expiry_date",
        "revoked",
        "revoked_at",
    )
    list_filter = ("revoked",)
    search_fields = ("=tenant_id", "=prefix")
    actions = ["revoke_keys"]
    readonly_fields = ("prefix", "created", "revoked", "revoked_at")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("tenant_id", "name", "expiry_date")
        return ("prefix", "tenant_id", "name", "created", "expiry_date", "revoked", "revoked_at")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A key is never edited; it is revoked and a new one issued.
        return False if obj is not None else super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(REVOKE_PERMISSION))

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        key, secret = tenant_key_create(
            tenant_id=obj.tenant_id, name=obj.name, expiry_date=obj.expiry_date
        )
        # The admin goes on with ``obj`` (log entry, redirect): make it the saved key.
        obj.__dict__.update(key.__dict__)
        obj._clear_key = secret

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: Any = None) -> Any:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "API key created",
            "key": obj,
            "clear_key": obj._clear_key,
            "changelist_url": reverse("admin:retention_rest_tenantapikey_changelist"),
        }
        response = TemplateResponse(
            request, "admin/retention_rest/tenantapikey/key_created.html", context
        )
        # The page carries a secret: never cache it anywhere.
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke_keys(
        self, request: HttpRequest, queryset: QuerySet[TenantAPIKey]
    ) -> HttpResponse | None:
        live = list(queryset.filter(revoked=False))
        if request.POST.get("confirm") == "yes":
            now = timezone.now()
            for key in live:
                tenant_key_revoke(key=key, now=now)
            self.message_user(request, f"Revoked {len(live)} API key(s).", level=messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Revoke API keys?",
            "keys": live,
            "queryset": queryset,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(
            request, "admin/retention_rest/tenantapikey/revoke_confirmation.html", context
        )
