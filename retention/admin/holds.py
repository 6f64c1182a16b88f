"""Legal holds: place with a scope and a reason, release with a confirmation and a reason.

Both show how many records the hold protects now, so nobody releases a hold
without seeing what it covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone

from retention import services
from retention.admin.base import ObjectReadOnlyMixin, TenantFilter, acting_user
from retention.admin.release import ReleaseMixin
from retention.models import LegalHold, ObjectLockStatus, Policy, RetentionRecord
from retention.rows.registry import row_classes
from retention.selectors.hold_reach import HoldReach, hold_reach


class PlaceHoldForm(forms.ModelForm[LegalHold]):
    tenant_id = forms.CharField(
        max_length=100, required=False, label="Tenant", help_text="Empty: every tenant."
    )
    data_class = forms.ChoiceField(
        required=False, label="Data class", help_text="Empty: every data class."
    )
    record_id = forms.IntegerField(
        required=False,
        min_value=1,
        label="Record id",
        help_text="One retention record (its id, as shown in the records list). Empty: any.",
    )
    row_model = forms.ChoiceField(
        required=False,
        label="Row of model",
        help_text="One database row of a registered model: its model here, its primary key "
        "below. A hold on a row takes no other scope.",
    )
    row_pk = forms.CharField(
        max_length=100, required=False, label="Row primary key", help_text="The row's id."
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why the data must be kept, e.g. the case or request reference.",
    )

    class Meta:
        model = LegalHold
        fields = ("tenant_id", "data_class", "reason")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = Policy.objects.order_by("data_class").values_list("data_class", flat=True)
        data_class = self.fields["data_class"]
        assert isinstance(data_class, forms.ChoiceField)  # declared above
        data_class.choices = [("", "— any —"), *((n, n) for n in names)]
        row_model = self.fields["row_model"]
        assert isinstance(row_model, forms.ChoiceField)  # declared above
        row_model.choices = [("", "— none —"), *((label, label) for label in _row_models())]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        tenant = (data.get("tenant_id") or "").strip()
        data["tenant_id"] = tenant
        record_id = data.get("record_id")
        data["subject"] = None
        if data.get("row_model") or (data.get("row_pk") or "").strip():
            self._clean_row(data, tenant=tenant, record_id=record_id)
            return data
        if not (tenant or data.get("data_class") or record_id):
            raise forms.ValidationError(
                "Choose a scope: a tenant, a data class, a record, a row, or a combination."
            )
        if record_id:
            record = (
                RetentionRecord.objects.filter(pk=record_id)
                .values("tenant_id", "data_class")
                .first()
            )
            if record is None:
                self.add_error("record_id", "No retention record has this id.")
            elif tenant and record["tenant_id"] != tenant:
                self.add_error("record_id", "This record belongs to another tenant.")
            elif data.get("data_class") and record["data_class"] != data["data_class"]:
                self.add_error("record_id", "This record is of another data class.")
        return data

    def _clean_row(self, data: dict[str, Any], *, tenant: str, record_id: int | None) -> None:
        """A hold on one row: a registered model and the primary key of a row of it."""
        label, pk = data.get("row_model") or "", (data.get("row_pk") or "").strip()
        if tenant or data.get("data_class") or record_id:
            raise forms.ValidationError(
                "A hold on one row takes no other scope: leave tenant, data class and record empty."
            )
        if not label:
            self.add_error("row_model", "Choose the row's model.")
            return
        if not pk:
            self.add_error("row_pk", "Give the row's primary key.")
            return
        model = _row_models()[label]
        try:
            row = model._default_manager.filter(pk=pk).first()
        except (ValueError, TypeError, ValidationError):
            row = None
        if row is None:
            self.add_error("row_pk", f"No row of {label} has this primary key.")
            return
        data["subject"] = row


def _row_models() -> dict[str, type[Model]]:
    """The models of the registered classes of rows, by label."""
    return {row.label: row.model for _, row in sorted(row_classes().items())}


class HoldStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [("active", "Active"), ("released", "Released")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[LegalHold]) -> QuerySet[LegalHold]:
        if self.value() == "active":
            return queryset.filter(released_at__isnull=True)
        if self.value() == "released":
            return queryset.filter(released_at__isnull=False)
        return queryset


@admin.register(LegalHold)
class LegalHoldAdmin(ReleaseMixin[LegalHold], ObjectReadOnlyMixin[LegalHold]):
    form = PlaceHoldForm
    # What a hold protects now comes second, so it fits 1280 px; who released it
    # and when are on its page.
    list_display = ("__str__", "protects_now", "status", "short_reason", "placed_by", "placed_at")
    list_filter = (HoldStatusFilter, "data_class", TenantFilter, "placed_at")
    list_select_related = ("placed_by", "released_by")
    search_fields = ("=id", "reason")
    actions = ("release_hold",)
    release_help_text = "Why the data no longer needs to be kept (e.g. case closed, reference)."
    readonly_fields = (
        "scope",
        "reason",
        "placed_by",
        "placed_at",
        "protects_now",
        "object_lock",
        "released_by",
        "released_at",
        "release_reason",
    )

    def get_fields(self, request: HttpRequest, obj: LegalHold | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("tenant_id", "data_class", "record_id", "row_model", "row_pk", "reason")
        return tuple(self.readonly_fields)

    def get_readonly_fields(
        self, request: HttpRequest, obj: LegalHold | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else self.readonly_fields

    @admin.display(description="status")
    def status(self, obj: LegalHold) -> str:
        return "active" if obj.released_at is None else "released"

    @admin.display(description="scope")
    def scope(self, obj: LegalHold) -> str:
        return obj.scope_label

    @admin.display(description="reason")
    def short_reason(self, obj: LegalHold) -> str:
        return obj.reason if len(obj.reason) <= 50 else obj.reason[:49] + "…"

    @admin.display(description="protects now")
    def protects_now(self, obj: LegalHold) -> str:
        if obj.released_at is not None:
            return "— (released)"
        reach = hold_reach(obj, now=timezone.now())
        return _reach_text(reach)

    @admin.display(description="Object Lock legal holds")
    def object_lock(self, obj: LegalHold) -> str:
        return _object_lock_text(obj)

    # Placing a hold is one service call; the form only checks the scope.
    def save_form(
        self, request: HttpRequest, form: forms.ModelForm[LegalHold], change: bool
    ) -> LegalHold:
        data = form.cleaned_data
        record = RetentionRecord.objects.get(pk=data["record_id"]) if data["record_id"] else None
        return services.legal_hold_place(
            reason=data["reason"],
            placed_by=acting_user(request),
            now=timezone.now(),
            tenant_id=data["tenant_id"] or None,
            data_class=data["data_class"] or None,
            record=record,
            subject=data.get("subject"),
        )

    def save_model(
        self, request: HttpRequest, obj: LegalHold, form: forms.ModelForm[LegalHold], change: bool
    ) -> None:
        """Saved by the service in save_form."""

    def save_related(
        self,
        request: HttpRequest,
        form: forms.ModelForm[LegalHold],
        formsets: Sequence[object],
        change: bool,
    ) -> None:
        """A hold has no related objects to save."""

    def response_add(
        self, request: HttpRequest, obj: LegalHold, post_url_continue: str | None = None
    ) -> HttpResponse:
        reach = hold_reach(obj, now=timezone.now())
        self.message_user(
            request, f"{obj} placed. It protects {_reach_text(reach)}.", messages.SUCCESS
        )
        if obj.in_flight:
            self.message_user(
                request,
                f"{obj.in_flight} of the records it covers were already being deleted (past "
                "their last check): they are deleted, and their events say the hold came after.",
                messages.WARNING,
            )
        return HttpResponseRedirect(reverse("admin:retention_legalhold_change", args=[obj.pk]))

    @admin.action(permissions=["change"], description="Release the selected hold…")
    def release_hold(
        self, request: HttpRequest, queryset: QuerySet[LegalHold]
    ) -> HttpResponse | None:
        return self.release_one(request, queryset, "hold")

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {
            "title": "Place a legal hold",
            "show_save_and_add_another": False,
            "show_save_and_continue": False,
            **(extra_context or {}),
        }
        return super().add_view(request, form_url, context)

    # Releasing: whoever may change holds, an active hold, with a reason.

    def has_release_permission(self, request: HttpRequest) -> bool:
        return self.has_change_permission(request)

    def release_queryset(self) -> QuerySet[LegalHold]:
        return LegalHold.objects.select_related("placed_by")

    def release_refusal(self, obj: LegalHold) -> str:
        return "" if obj.released_at is None else f"{obj} was already released."

    def release(
        self, obj: LegalHold, *, by: AbstractBaseUser, reason: str, now: datetime
    ) -> object:
        return services.legal_hold_release(hold=obj, released_by=by, reason=reason, now=now)

    def released_message(self, obj: LegalHold) -> str:
        return f"{obj} released."

    def released_url(self, obj: LegalHold) -> str:
        return reverse("admin:retention_legalhold_changelist")

    def release_context(self, request: HttpRequest, obj: LegalHold) -> dict[str, Any]:
        return {
            "title": f"Release {obj}",
            "hold": obj,
            "reach": hold_reach(obj, now=timezone.now()),
        }


def _object_lock_text(hold: LegalHold) -> str:
    """How far the hold's mirror into the store has got (RETENTION_OBJECT_LOCK_HOLDS)."""
    status, done, total = hold.object_lock_status, hold.object_lock_done, hold.object_lock_total
    objects = f"{done:,} of {total:,} objects"
    if status == ObjectLockStatus.APPLYING:
        return f"being set: {objects}"
    if status == ObjectLockStatus.APPLIED:
        return f"set on {total:,} objects in the store"
    if status == ObjectLockStatus.RELEASING:
        return f"being removed: {objects}"
    if status == ObjectLockStatus.RELEASED:
        return f"removed where no other hold covers the object ({total:,} objects)"
    if status == ObjectLockStatus.FAILED:
        return f"failed after {objects}: {hold.object_lock_error}"
    return "not mirrored (no storage in RETENTION_OBJECT_LOCK_HOLDS, or a hold on a row)"


def _reach_text(reach: HoldReach) -> str:
    if reach.on_row:
        if not reach.rows:
            return "0 rows now (the row is gone)"
        due = "past its deadline" if reach.rows_expired else "not yet past its deadline"
        return f"1 row now ({due})"
    noun = "record" if reach.protected == 1 else "records"
    text = f"{reach.protected} {noun} now ({reach.expired} past their deadline)"
    if reach.row_classes:
        rows = "row" if reach.rows == 1 else "rows"
        text += f"; {reach.rows} {rows} ({reach.rows_expired} past their deadline)"
    return text
