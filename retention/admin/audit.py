"""Minimal admin registrations; audit models are read-only.

The governance workflows (approval actions, impact preview, dashboard) are
built on top of these.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from retention.models import (
    DeletionEvent,
    KillSwitch,
    LegalHold,
    Policy,
    PolicyVersion,
    RetentionRecord,
    Run,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "mode",
        "trigger",
        "status",
        "started_at",
        "eligible",
        "deleted",
        "failed",
    )
    list_filter = ("mode", "status", "trigger")


@admin.register(DeletionEvent)
class DeletionEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "record_id", "tenant_id", "data_class", "outcome", "occurred_at")
    list_filter = ("outcome", "data_class")
    search_fields = ("=record__id", "=key_digest", "=tenant_id")


@admin.register(RetentionRecord)
class RetentionRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "tenant_id", "data_class", "state", "expires_at", "attempts")
    list_filter = ("state", "data_class")
    search_fields = ("=id", "=key_digest", "=tenant_id")
    exclude = ("object_key",)


@admin.register(Policy)
class PolicyAdmin(ReadOnlyAdmin):
    list_display = ("data_class", "mode", "mode_changed_at")


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdmin):
    list_display = ("policy", "number", "status", "retention_period", "locked", "approved_at")
    list_filter = ("status",)


@admin.register(LegalHold)
class LegalHoldAdmin(ReadOnlyAdmin):
    list_display = ("id", "tenant_id", "data_class", "record_id", "placed_at", "released_at")


@admin.register(KillSwitch)
class KillSwitchAdmin(ReadOnlyAdmin):
    list_display = ("paused", "paused_by", "paused_at", "reason")
