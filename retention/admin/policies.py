"""Policies in the admin: their versions inline, the version in force, back to report-only.

Every transition is one service call; the four-eyes rule and the lock are
enforced there, and a refusal comes back as a message on the page.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from retention.admin.base import ChangeContextMixin, ObjectReadOnlyMixin
from retention.admin.enforcement import (
    DISABLE_PERMISSION,
    disable_confirmation,
    disable_view,
    enable_view,
)
from retention.admin.version_help import explain_rules
from retention.durations import HumanDurationField, format_duration
from retention.formatting import instant_html
from retention.models import (
    DataClassMode,
    Disposition,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    data_class_validator,
)
from retention.selectors.policies import (
    VERSION_RULE_FIELDS,
    disposition_choices,
    erasure_choices,
    erasure_default,
    keep_without_basis,
    version_in_force,
)
from retention.selectors.runs import dry_run_latest
from retention.selectors.version_changes import class_registration_drift
from retention.services.policies import APPROVE_PERMISSION

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

RULE_FORM_FIELDS = VERSION_RULE_FIELDS
LIFECYCLE_FIELDS = (
    "author",
    "created_at",
    "submitted_by",
    "submitted_at",
    "approver",
    "approved_at",
    "superseded_at",
)


# --------------------------------------------------------------------------
# Forms


class VersionRulesForm(forms.ModelForm[PolicyVersion]):
    retention_period = HumanDurationField(
        help_text="How long each object is kept after it is uploaded: '30 days', '12 hours', "
        "'1 day 6 hours'. Records keep the deadline computed at upload."
    )
    safety_margin = HumanDurationField(
        initial=timedelta(0),
        help_text="Extra time a run waits past the deadline before deleting, e.g. '1 hour'; "
        "'none' or '0 days' for no wait.",
    )
    disposition = forms.ChoiceField(
        choices=[(Disposition.DELETE.value, Disposition.DELETE.label)],
        initial=Disposition.DELETE.value,
        help_text="What happens to an expired row or object. Delete removes it; redact "
        "(a class of model rows registered with redact={...}) keeps the row and replaces "
        "the fields registered. A version that changes it needs the approver's explicit "
        "confirmation.",
    )

    on_erasure = forms.ChoiceField(
        choices=[("", "As the disposition")],
        required=False,
        help_text="What an erasure request (a person's, or a tenant's offboarding) does to "
        "this class's items of its subject: delete, redact (model rows registered with "
        "redact={...}) or keep, with the legal basis below. Empty: what the disposition does.",
    )

    class Meta:
        model = PolicyVersion
        fields = list(RULE_FORM_FIELDS)
        help_texts = {
            "erasure_basis": "For on erasure 'keep': the written legal basis, e.g. "
            "'invoices are kept 10 years under tax law'. A certificate names it.",
        }
        widgets = {"erasure_basis": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["disposition"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = disposition_choices(self.governed_data_class())
        erasure = self.fields["on_erasure"]
        assert isinstance(erasure, forms.ChoiceField)
        erasure.choices = [("", "As the disposition"), *erasure_choices(self.governed_data_class())]
        explain_rules(self, self.governed_data_class())

    def governed_data_class(self) -> str:
        """The data class the version is of (the draft's own, once it exists)."""
        if self.instance.pk is not None:
            return str(self.instance.policy.data_class)
        return str(self.data.get("data_class") or self.initial.get("data_class") or "")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not cleaned.get("on_erasure"):
            cleaned["on_erasure"] = erasure_default(cleaned)
        if keep_without_basis(cleaned["on_erasure"], cleaned.get("erasure_basis")):
            self.add_error(
                "erasure_basis", "Keeping a subject's data after an erasure needs its legal basis."
            )
        return cleaned

    def clean_batch_size(self) -> int:
        value: int = self.cleaned_data["batch_size"]
        if not 1 <= value <= 10000:
            raise forms.ValidationError("From 1 to 10000 records per page.")
        return value

    def clean_rate_limit(self) -> float | None:
        value: float | None = self.cleaned_data.get("rate_limit")
        if value is not None and value <= 0:
            raise forms.ValidationError("A positive number of deletes per second, or empty.")
        return value

    def clean_max_attempts(self) -> int | None:
        value: int | None = self.cleaned_data.get("max_attempts")
        if value is not None and value < 1:
            raise forms.ValidationError("At least 1, or empty for the default.")
        return value


class DraftForm(VersionRulesForm):
    data_class = forms.CharField(
        max_length=100,
        validators=[data_class_validator],
        help_text="An existing data class, or a new one such as 'idv.photo'.",
    )
    description = forms.CharField(
        max_length=500, required=False, help_text="For a new data class only."
    )


# --------------------------------------------------------------------------
# Policies (one per data class)


class VersionInline(admin.TabularInline[PolicyVersion, Policy]):
    model = PolicyVersion
    fields = ("version_link", "status", "period", "locked", "author", "approver", "approved")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Policy | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Policy | None = None) -> bool:
        return False

    @admin.display(description="version")
    def version_link(self, obj: PolicyVersion) -> str:
        url = reverse("admin:retention_policyversion_change", args=[obj.pk])
        return format_html('<a href="{}">version {}</a>', url, obj.number)

    @admin.display(description="retention period")
    def period(self, obj: PolicyVersion) -> str:
        return format_duration(obj.retention_period)

    @admin.display(description="approved at")
    def approved(self, obj: PolicyVersion) -> str:
        return instant_html(obj.approved_at)


class _Waiting(TypedDict):
    waiting: int


@admin.register(Policy)
class PolicyAdmin(ObjectReadOnlyMixin[Policy], ChangeContextMixin[Policy]):
    list_display = (
        "data_class",
        "mode",
        "in_force",
        "waiting_for_approval",
        "mode_changed_by",
        "mode_changed_at",
    )
    list_filter = ("mode",)
    search_fields = ("data_class",)
    fields = ("data_class", "description", "mode", "mode_changed_by", "mode_changed_at")
    readonly_fields = fields
    inlines = (VersionInline,)
    actions = ("back_to_report_only",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A data class comes into being with the draft of its first version.
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Policy]:
        return (
            super()
            .get_queryset(request)
            .select_related("mode_changed_by")
            .annotate(
                waiting=Count("versions", filter=Q(versions__status=PolicyVersionStatus.SUBMITTED))
            )
        )

    @admin.display(description="version in force")
    def in_force(self, obj: Policy) -> str:
        version = version_in_force(policy_id=obj.pk)
        if version is None:
            return "none approved"
        lock = ", locked" if version.locked else ""
        return f"version {version.number}: {format_duration(version.retention_period)}{lock}"

    @admin.display(description="submitted, waiting", ordering="waiting")
    def waiting_for_approval(self, obj: WithAnnotations[Policy, _Waiting]) -> int:
        return obj.waiting  # annotated by get_queryset

    @admin.action(permissions=["change"], description="Back to report-only (stop deleting)…")
    def back_to_report_only(
        self, request: HttpRequest, queryset: QuerySet[Policy]
    ) -> HttpResponse | None:
        return disable_confirmation(self, request, queryset, action="back_to_report_only")

    def get_urls(self) -> list[URLPattern]:
        from retention.admin.dashboard import dashboard_view

        urls = [
            path(
                "dashboard/",
                self.admin_site.admin_view(lambda request: dashboard_view(self, request)),
                name="retention_policy_dashboard",
            )
        ]
        from retention.admin.datamap import datamap_view

        urls.append(
            path(
                "datamap/",
                self.admin_site.admin_view(lambda request: datamap_view(self, request)),
                name="retention_policy_datamap",
            )
        )
        urls += [
            path(
                "<path:object_id>/enable/",
                self.admin_site.admin_view(
                    lambda request, object_id: enable_view(self, request, object_id)
                ),
                name="retention_policy_enable",
            ),
            path(
                "<path:object_id>/disable/",
                self.admin_site.admin_view(
                    lambda request, object_id: disable_view(self, request, object_id)
                ),
                name="retention_policy_disable",
            ),
        ]
        return urls + super().get_urls()

    def change_context(self, request: HttpRequest, policy: Policy) -> dict[str, Any]:
        return {
            "latest_dry_run": dry_run_latest(data_class=policy.data_class),
            "can_draft": request.user.has_perm("retention.add_policyversion"),
            "registration_drift": class_registration_drift(policy),
            "can_enable": policy.mode != DataClassMode.ENFORCE
            and request.user.has_perm(APPROVE_PERMISSION),
            "can_disable": policy.mode == DataClassMode.ENFORCE
            and request.user.has_perm(DISABLE_PERMISSION),
        }
