"""Erasure requests: the list with due dates (overdue ones marked), and each request's
frozen scope as its approver sees it before approving.

Read-only here: requests are filed, approved, rejected and cancelled through
``retention.api`` (``request_erasure``, ``approve_erasure``, …).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest
from django.utils.html import format_html

from retention.admin.base import ChangeContextMixin, ReadOnlyAdmin
from retention.models import ErasureRequest
from retention.models.erasure import OPEN_STATES
from retention.reporting import human


def whom(obj: ErasureRequest) -> str:
    """Whom a request erases, never the subject's id: its digest's first characters."""
    subject = f"subject {obj.subject_digest[:12]}…" if obj.subject_digest else ""
    tenant = f"tenant {obj.tenant_id}" if obj.tenant_id else ""
    return " in ".join(part for part in (subject, tenant) if part)


def scope_rows(obj: ErasureRequest) -> list[dict[str, Any]]:
    """The frozen scope, a row per class, in the words the approver reads."""
    rows = []
    for entry in (obj.scope or {}).get("classes", []):
        action = entry.get("on_erasure") or "—"
        if action == "keep" and entry.get("erasure_basis"):
            action = f"keep: {entry['erasure_basis']}"
        holds = ", ".join(f"hold #{h['hold']} ({h['count']})" for h in entry.get("holds", []))
        rows.append(
            {
                "data_class": entry.get("data_class", ""),
                "kind": entry.get("kind", ""),
                "reached": "yes" if entry.get("reachable") else entry.get("not_reachable_because"),
                "count": entry.get("count", 0),
                "on_erasure": action,
                "holds": holds or "none",
            }
        )
    return rows


@admin.register(ErasureRequest)
class ErasureRequestAdmin(ChangeContextMixin[ErasureRequest], ReadOnlyAdmin[ErasureRequest]):
    list_display = (
        "id",
        "whom",
        "state",
        "received_at",
        "due",
        "not_before",
        "requested_by",
        "approved_by",
    )
    list_filter = ("state",)
    list_select_related = ("requested_by", "approved_by")
    ordering = ("due_at",)
    fields = (
        "whom",
        "state",
        "reason",
        "classes",
        "received_at",
        "due_at",
        "not_before",
        "requested_by",
        "approved_by",
        "approved_at",
        "ended_by",
        "ended_at",
        "end_reason",
        "completed_at",
        "verified_at",
    )
    readonly_fields = fields
    change_form_template = "admin/retention/erasurerequest/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ErasureRequest]:
        # Overdue by the database's clock, as retention_check says it.
        return (
            super()
            .get_queryset(request)
            .annotate(
                is_overdue=ExpressionWrapper(
                    Q(state__in=OPEN_STATES, due_at__lt=Now()), output_field=BooleanField()
                )
            )
        )

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """No filter by the subject's id or the scope from the URL: a guessed
        ``?subject_id=`` (or ``__startswith``) would confirm an id nobody may read here."""
        if lookup.split("__")[0] in ("subject_id", "scope"):
            return False
        return super().lookup_allowed(lookup, value, request)

    @admin.display(description="whom")
    def whom(self, obj: ErasureRequest) -> str:
        return whom(obj)

    @admin.display(description="classes")
    def classes(self, obj: ErasureRequest) -> str:
        return ", ".join(obj.data_classes) or "every class"

    @admin.display(description="due", ordering="due_at")
    def due(self, obj: ErasureRequest) -> str:
        when = human(obj.due_at)
        if getattr(obj, "is_overdue", False):
            return format_html('<strong class="retention-overdue">{} OVERDUE</strong>', when)
        return when

    def change_context(self, request: HttpRequest, obj: ErasureRequest) -> dict[str, Any]:
        return {"scope_rows": scope_rows(obj), "scope_total": (obj.scope or {}).get("total", 0)}
