"""Erasure requests: filed, decided and followed in the admin.

The list shows due dates (overdue ones marked, by the database's clock). A
governance owner files a request (a subject, a tenant's offboarding, or a
subject within a tenant); an approver approves it after seeing its frozen
scope, or rejects it; the requester or an approver cancels it before it
executes (``erasure_decisions``). Each request's page shows its scope, then
its progress: the erase runs, what each class settled, the items kept under
a hold, and the certificate once issued. The subject's id is never shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import widgets
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from retention.admin.base import ChangeContextMixin, acting_user
from retention.admin.erasure_decisions import DECISIONS, ErasureDecisionsMixin
from retention.exceptions import RetentionError
from retention.models import ErasureRequest
from retention.reporting import human
from retention.selectors.erasure import (
    erasure_classes,
    erasure_progress,
    erasure_requests_by_due,
    erasure_runs,
)
from retention.services.erasure import erasure_request


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


class FileErasureForm(forms.ModelForm[ErasureRequest]):
    subject_id = forms.CharField(
        max_length=255,
        required=False,
        label="Subject id",
        help_text="Your id of the person, as the data carries it (track(subject_id=), the "
        "subject field of a row class). Empty: a tenant's offboarding.",
    )
    tenant_id = forms.CharField(
        max_length=100,
        required=False,
        label="Tenant",
        help_text="A tenant's offboarding; with a subject id, the subject within this tenant only.",
    )
    data_classes = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Data classes",
        help_text="None ticked: every class.",
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why, e.g. the reference of the person's request or of the contract's end.",
    )
    not_before = forms.SplitDateTimeField(
        required=False,
        widget=widgets.AdminSplitDateTime,
        label="Not before",
        help_text="A grace period: nothing is erased before this time (an offboarding's "
        "notice period). Empty: as soon as it is approved.",
    )

    class Meta:
        model = ErasureRequest
        fields = ("subject_id", "tenant_id", "data_classes", "reason", "not_before")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["data_classes"]
        assert isinstance(field, forms.MultipleChoiceField)  # declared above
        field.choices = [(name, name) for name in erasure_classes(None)]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        data["subject_id"] = (data.get("subject_id") or "").strip()
        data["tenant_id"] = (data.get("tenant_id") or "").strip()
        if not (data["subject_id"] or data["tenant_id"]):
            raise forms.ValidationError(
                "Give a subject id, a tenant (an offboarding), or both (a subject within a tenant)."
            )
        return data


@admin.register(ErasureRequest)
class ErasureRequestAdmin(ErasureDecisionsMixin, ChangeContextMixin[ErasureRequest]):
    form = FileErasureForm
    show_full_result_count = False
    list_display = ("id", "whom", "state", "received", "due", "not_before_at", "requester")
    list_filter = ("state",)
    list_select_related = ("requested_by", "approved_by")
    ordering = ("due_at",)
    actions = ("approve_request", "reject_request", "cancel_request")
    readonly_fields = (
        "whom",
        "state",
        "reason",
        "classes",
        "received",
        "due",
        "not_before_at",
        "requester",
        "approved",
        "ended",
        "end_reason",
        "completed",
        "verified",
    )
    change_form_template = "admin/retention/erasurerequest/change_form.html"

    def get_fields(
        self, request: HttpRequest, obj: ErasureRequest | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ("subject_id", "tenant_id", "data_classes", "reason", "not_before")
        return self.readonly_fields

    def get_readonly_fields(
        self, request: HttpRequest, obj: ErasureRequest | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else self.readonly_fields

    def has_change_permission(
        self, request: HttpRequest, obj: ErasureRequest | None = None
    ) -> bool:
        return False  # decided through the service's pages, never edited

    def has_delete_permission(
        self, request: HttpRequest, obj: ErasureRequest | None = None
    ) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ErasureRequest]:
        # Overdue by the database's clock, as retention_check says it.
        return erasure_requests_by_due(now=Now())

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """No filter by the subject's id or the scope from the URL: a guessed
        ``?subject_id=`` (or ``__startswith``) would confirm an id nobody may read here."""
        if lookup.split("__")[0] in ("subject_id", "scope"):
            return False
        return super().lookup_allowed(lookup, value, request)

    # ------------------------------------------------------------ displays

    @admin.display(description="whom")
    def whom(self, obj: ErasureRequest) -> str:
        return whom(obj)

    @admin.display(description="classes")
    def classes(self, obj: ErasureRequest) -> str:
        return ", ".join(obj.data_classes) or "every class"

    @admin.display(description="received", ordering="received_at")
    def received(self, obj: ErasureRequest) -> str:
        return human(obj.received_at)

    @admin.display(description="due", ordering="due_at")
    def due(self, obj: ErasureRequest) -> str:
        when = human(obj.due_at)
        if getattr(obj, "is_overdue", False):
            return format_html('<strong class="retention-overdue">{} OVERDUE</strong>', when)
        return when

    @admin.display(description="not before", ordering="not_before")
    def not_before_at(self, obj: ErasureRequest) -> str:
        return "—" if obj.not_before is None else human(obj.not_before)

    @admin.display(description="requested by")
    def requester(self, obj: ErasureRequest) -> str:
        if obj.requested_by_tenant:
            return f"tenant {obj.requested_by_tenant} (API key)"
        return "—" if obj.requested_by is None else str(obj.requested_by.get_username())

    @admin.display(description="approved")
    def approved(self, obj: ErasureRequest) -> str:
        if obj.approved_at is None or obj.approved_by is None:
            return "—"
        return f"{human(obj.approved_at)} by {obj.approved_by.get_username()}"

    @admin.display(description="rejected or cancelled")
    def ended(self, obj: ErasureRequest) -> str:
        if obj.ended_at is None or obj.ended_by is None:
            return "—"
        return f"{human(obj.ended_at)} by {obj.ended_by.get_username()}"

    @admin.display(description="completed")
    def completed(self, obj: ErasureRequest) -> str:
        return "—" if obj.completed_at is None else human(obj.completed_at)

    @admin.display(description="verified")
    def verified(self, obj: ErasureRequest) -> str:
        return "—" if obj.verified_at is None else human(obj.verified_at)

    # --------------------------------------------------------------- filing

    def save_form(
        self, request: HttpRequest, form: forms.ModelForm[ErasureRequest], change: bool
    ) -> ErasureRequest:
        data = form.cleaned_data
        return erasure_request(
            requested_by=acting_user(request),
            reason=data["reason"],
            now=timezone.now(),
            subject_id=data["subject_id"] or None,
            tenant_id=data["tenant_id"] or None,
            data_classes=data["data_classes"] or None,
            not_before=data.get("not_before"),
        )

    def save_model(
        self,
        request: HttpRequest,
        obj: ErasureRequest,
        form: forms.ModelForm[ErasureRequest],
        change: bool,
    ) -> None:
        """Saved by the service in save_form."""

    def save_related(
        self,
        request: HttpRequest,
        form: forms.ModelForm[ErasureRequest],
        formsets: Sequence[object],
        change: bool,
    ) -> None:
        """A request has no related objects to save."""

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {
            "title": "File an erasure request",
            "show_save_and_add_another": False,
            "show_save_and_continue": False,
            **(extra_context or {}),
        }
        try:
            return super().add_view(request, form_url, context)
        except RetentionError as exc:
            # The admin's transaction was rolled back; say why, on the same page.
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def response_add(
        self, request: HttpRequest, obj: ErasureRequest, post_url_continue: str | None = None
    ) -> HttpResponse:
        total = (obj.scope or {}).get("total", 0)
        self.message_user(
            request,
            f"Erasure request {obj.pk} received, due {human(obj.due_at)}: its scope is frozen "
            f"({total} item{'' if total == 1 else 's'}); a second person must approve it.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:retention_erasurerequest_change", args=[obj.pk]))

    # ------------------------------------------------------- its own page

    def get_urls(self) -> list[URLPattern]:
        download = path(
            "<path:object_id>/certificate/",
            self.admin_site.admin_view(self.certificate_view),
            name="retention_erasurerequest_certificate",
        )
        return [download, *super().get_urls()]

    def certificate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        obj = get_object_or_404(ErasureRequest, pk=object_id)
        if obj.certificate is None:
            self.message_user(request, f"{obj} has no certificate yet.", messages.WARNING)
            return HttpResponseRedirect(
                reverse("admin:retention_erasurerequest_change", args=[obj.pk])
            )
        response = JsonResponse(obj.certificate, json_dumps_params={"indent": 2})
        response["Content-Disposition"] = (
            f'attachment; filename="erasure-certificate-{obj.pk}.json"'
        )
        return response

    def decision_context(self, request: HttpRequest, obj: ErasureRequest) -> dict[str, object]:
        return {
            "whom": whom(obj),
            "requester": self.requester(obj),
            "received": human(obj.received_at),
            "due": human(obj.due_at),
            "not_before": self.not_before_at(obj),
            "classes": self.classes(obj),
            "scope_rows": scope_rows(obj),
            "scope_total": (obj.scope or {}).get("total", 0),
        }

    def change_context(self, request: HttpRequest, obj: ErasureRequest) -> dict[str, Any]:
        progress = erasure_progress(obj)
        kept = [
            {"data_class": c.data_class, **item, "hold_url": _hold_url(item.get("hold"))}
            for c in progress
            for item in c.kept
        ]
        return {
            **super().change_context(request, obj),
            "scope_rows": scope_rows(obj),
            "scope_total": (obj.scope or {}).get("total", 0),
            "decisions": [d for d in DECISIONS.values() if self.may_decide(request, d, obj)],
            "progress": [c for c in progress if c.settled],
            "settled_at": (obj.outcome or {}).get("settled_at"),
            "runs": [
                {"run": run, "started": human(run.started_at), "finished": human(run.finished_at)}
                for run in erasure_runs(obj)
            ],
            "kept": kept,
            "certificate": None
            if obj.certificate is None
            else json.dumps(obj.certificate, indent=2, sort_keys=True),
        }


def _hold_url(hold_id: object) -> str:
    if not isinstance(hold_id, int):
        return ""
    return reverse("admin:retention_legalhold_change", args=[hold_id])
