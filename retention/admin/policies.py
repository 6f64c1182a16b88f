"""Policies and their versions: draft, submit, review the impact, approve, retire.

Every transition is one service call; the four-eyes rule and the lock are
enforced there, and a refusal comes back as a message on the page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from retention import services
from retention.admin.base import (
    DataClassFilter,
    ModelT,
    ObjectReadOnlyMixin,
    acting_user,
    report_refusal,
)
from retention.durations import HumanDurationField, format_duration
from retention.exceptions import RetentionError
from retention.models import (
    Disposition,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    data_class_validator,
)
from retention.selectors import admin as selectors
from retention.selectors.policies import (
    VERSION_RULE_FIELDS,
    lock_violation,
    version_in_force,
    version_or_latest,
)
from retention.selectors.runs import dry_run_latest
from retention.services import governance
from retention.services.policies import APPROVE_PERMISSION, RETIRE_PERMISSION

if TYPE_CHECKING:
    from django_stubs_ext import FieldsetSpec, WithAnnotations

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
        help_text="Extra time a run waits past the deadline before deleting, e.g. '1 hour'.",
    )
    disposition = forms.ChoiceField(
        choices=[(Disposition.DELETE.value, Disposition.DELETE.label)],
        initial=Disposition.DELETE.value,
        help_text="Redacting database records is not available yet.",
    )

    class Meta:
        model = PolicyVersion
        fields = list(RULE_FORM_FIELDS)

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
    fields = ("version_link", "status", "period", "locked", "author", "approver", "approved_at")
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
        return format_html('<a href="{}">v{}</a>', url, obj.number)

    @admin.display(description="retention period")
    def period(self, obj: PolicyVersion) -> str:
        return format_duration(obj.retention_period)


class _Waiting(TypedDict):
    waiting: int


@admin.register(Policy)
class PolicyAdmin(ObjectReadOnlyMixin[Policy], admin.ModelAdmin[Policy]):
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
        return f"v{version.number}: {format_duration(version.retention_period)}{lock}"

    @admin.display(description="submitted, waiting", ordering="waiting")
    def waiting_for_approval(self, obj: WithAnnotations[Policy, _Waiting]) -> int:
        return obj.waiting  # annotated by get_queryset

    @admin.action(permissions=["change"], description="Back to report-only (stop deleting)")
    def back_to_report_only(self, request: HttpRequest, queryset: QuerySet[Policy]) -> None:
        now = timezone.now()
        by = acting_user(request)
        for policy in queryset:
            done = report_refusal(
                self,
                request,
                partial(services.enforcement_disable, data_class=policy.data_class, by=by, now=now),
            )
            if done is not None:
                self.message_user(request, f"{policy.data_class} is report-only again.")

    def get_urls(self) -> list[URLPattern]:
        from retention.admin.dashboard import dashboard_view

        urls = [
            path(
                "dashboard/",
                self.admin_site.admin_view(lambda request: dashboard_view(self, request)),
                name="retention_policy_dashboard",
            )
        ]
        return urls + super().get_urls()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        policy = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if policy is not None:
            context["latest_dry_run"] = dry_run_latest(data_class=policy.data_class)
            context["can_draft"] = request.user.has_perm("retention.add_policyversion")
        return super().change_view(request, object_id, form_url, context)


# --------------------------------------------------------------------------
# Versions


class VersionDataClassFilter(DataClassFilter):
    def queryset(self, request: HttpRequest, queryset: QuerySet[ModelT]) -> QuerySet[ModelT]:
        if self.value():
            return queryset.filter(policy__data_class=self.value())
        return queryset


@admin.register(PolicyVersion)
class PolicyVersionAdmin(admin.ModelAdmin[PolicyVersion]):
    list_display = (
        "__str__",
        "status",
        "period",
        "margin",
        "locked",
        "author",
        "approver",
        "approved_at",
    )
    list_filter = ("status", VersionDataClassFilter, "locked")
    list_select_related = ("policy", "author", "approver")
    actions = ("submit_versions", "review_and_approve", "retire_versions")

    # -------------------------------------------------------------- permissions

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_PERMISSION)

    def has_retire_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(RETIRE_PERMISSION)

    def has_change_permission(self, request: HttpRequest, obj: PolicyVersion | None = None) -> bool:
        # Only a draft, and only by its author: a submitted version is immutable.
        if obj is not None and (
            obj.status != PolicyVersionStatus.DRAFT or obj.author_id != request.user.pk
        ):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: PolicyVersion | None = None) -> bool:
        return False

    # ------------------------------------------------------------------- lists

    @admin.display(description="retention period", ordering="retention_period")
    def period(self, obj: PolicyVersion) -> str:
        return format_duration(obj.retention_period)

    @admin.display(description="safety margin", ordering="safety_margin")
    def margin(self, obj: PolicyVersion) -> str:
        return format_duration(obj.safety_margin)

    # -------------------------------------------------------------------- forms

    def get_fieldsets(self, request: HttpRequest, obj: PolicyVersion | None = None) -> FieldsetSpec:
        if obj is None:
            return [
                (None, {"fields": ["data_class", "description"]}),
                ("Rules", {"fields": list(RULE_FORM_FIELDS)}),
            ]
        return [
            ("Version", {"fields": ["policy", "number", "status"]}),
            ("Rules", {"fields": list(RULE_FORM_FIELDS)}),
            ("Lifecycle", {"fields": list(LIFECYCLE_FIELDS)}),
        ]

    def get_readonly_fields(
        self, request: HttpRequest, obj: PolicyVersion | None = None
    ) -> list[str]:
        if obj is None:
            return []
        return ["policy", "number", "status", *LIFECYCLE_FIELDS]

    def get_form(
        self,
        request: HttpRequest,
        obj: PolicyVersion | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[PolicyVersion]]:
        kwargs["form"] = VersionRulesForm if obj is not None else DraftForm
        return super().get_form(request, obj, change, **kwargs)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """Start a new version from the one in force of ``?data_class=``."""
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        data_class = request.GET.get("data_class")
        if not data_class:
            return initial
        version = version_or_latest(data_class)
        if version is not None:
            initial.update({name: getattr(version, name) for name in RULE_FORM_FIELDS})
        return initial

    def save_form(
        self, request: HttpRequest, form: forms.ModelForm[PolicyVersion], change: bool
    ) -> PolicyVersion:
        data = form.cleaned_data
        now = timezone.now()
        if not change:
            rules = {name: data[name] for name in RULE_FORM_FIELDS}
            period = rules.pop("retention_period")
            locked = rules.pop("locked")
            return services.policy_version_propose(
                data_class=data["data_class"],
                retention_period=period,
                locked=locked,
                description=data.get("description") or "",
                author=acting_user(request),
                now=now,
                **rules,
            )
        changes = {name: data[name] for name in form.changed_data if name in RULE_FORM_FIELDS}
        return governance.policy_version_update_draft(
            version=form.instance, by=acting_user(request), now=now, **changes
        )

    def save_model(
        self,
        request: HttpRequest,
        obj: PolicyVersion,
        form: forms.ModelForm[PolicyVersion],
        change: bool,
    ) -> None:
        """Saved by the service in save_form."""

    def save_related(
        self,
        request: HttpRequest,
        form: forms.ModelForm[PolicyVersion],
        formsets: Sequence[object],
        change: bool,
    ) -> None:
        """A version has no related objects to save."""

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except RetentionError as exc:
            # The admin's transaction was rolled back; say why, on the same page.
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        version = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if version is not None:
            context.update(self._version_context(request, version))
        return super().change_view(request, object_id, form_url, context)

    def _version_context(self, request: HttpRequest, version: PolicyVersion) -> dict[str, Any]:
        in_force = version_in_force(policy_id=version.policy_id)
        against: PolicyVersion | None = in_force if in_force != version else None
        compare = request.GET.get("compare")
        others = list(version.policy.versions.exclude(pk=version.pk).order_by("number"))
        if compare and compare.isdigit():
            against = next((v for v in others if v.number == int(compare)), against)
        diff = selectors.version_diff(version, against)
        submitted = version.status == PolicyVersionStatus.SUBMITTED
        return {
            "version": version,
            "in_force": in_force,
            "against": against,
            "other_versions": others,
            "diff": diff,
            "lock_refusal": _lock_refusal(version, in_force),
            "can_submit": version.status == PolicyVersionStatus.DRAFT
            and super().has_change_permission(request),
            "can_review": submitted,
            "can_approve": submitted and self.has_approve_permission(request),
            "can_retire": version.status
            in (
                PolicyVersionStatus.DRAFT,
                PolicyVersionStatus.SUBMITTED,
                PolicyVersionStatus.APPROVED,
            )
            and self.has_retire_permission(request),
            "is_author": version.author_id == request.user.pk,
        }

    # ------------------------------------------------------------------ actions

    def _each_version(
        self,
        request: HttpRequest,
        queryset: QuerySet[PolicyVersion],
        service: _VersionTransition,
        done_verb: str,
    ) -> None:
        """Call ``service`` per version; report each success or refusal."""
        now = timezone.now()
        by = acting_user(request)
        for version in queryset.select_related("policy"):
            done = report_refusal(self, request, partial(service, version=version, by=by, now=now))
            if done is not None:
                self.message_user(request, f"{done.policy.data_class} v{done.number} {done_verb}.")

    @admin.action(permissions=["change"], description="Submit selected drafts for approval")
    def submit_versions(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        self._each_version(request, queryset, services.policy_version_submit, "submitted")

    @admin.action(permissions=["approve"], description="Review impact and approve…")
    def review_and_approve(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(
                request,
                "Approve one version at a time: each needs its impact reviewed first.",
                messages.WARNING,
            )
            return None
        version = queryset.get()
        return HttpResponseRedirect(
            reverse("admin:retention_policyversion_review", args=[version.pk])
        )

    @admin.action(permissions=["retire"], description="Retire selected versions…")
    def retire_versions(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> HttpResponse | None:
        if request.POST.get("post") == "yes":
            self._each_version(request, queryset, services.policy_version_retire, "retired")
            return None
        return TemplateResponse(
            request,
            "admin/retention/policyversion/retire_confirmation.html",
            {
                **self.admin_site.each_context(request),
                "title": "Retire policy versions",
                "opts": self.opts,
                "versions": list(queryset.select_related("policy")),
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            },
        )

    # ---------------------------------------------------------- object views

    def get_urls(self) -> list[URLPattern]:
        def view(fn: Callable[[HttpRequest, str], HttpResponse]) -> Callable[..., HttpResponse]:
            return self.admin_site.admin_view(fn)

        urls = [
            path(
                "<path:object_id>/submit/",
                view(self.submit_view),
                name="retention_policyversion_submit",
            ),
            path(
                "<path:object_id>/review/",
                view(self.review_view),
                name="retention_policyversion_review",
            ),
            path(
                "<path:object_id>/approve/",
                view(self.approve_view),
                name="retention_policyversion_approve",
            ),
        ]
        return urls + super().get_urls()

    def _get_version(self, request: HttpRequest, object_id: str) -> PolicyVersion:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return get_object_or_404(
            PolicyVersion.objects.select_related("policy", "author", "approver"), pk=object_id
        )

    def _change_url(self, version: PolicyVersion) -> str:
        return reverse("admin:retention_policyversion_change", args=[version.pk])

    def submit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._get_version(request, object_id)
        if request.method != "POST" or not super().has_change_permission(request):
            raise PermissionDenied
        done = report_refusal(
            self,
            request,
            lambda: services.policy_version_submit(
                version=version, by=acting_user(request), now=timezone.now()
            ),
        )
        if done is not None:
            self.message_user(
                request,
                f"{version.policy.data_class} v{version.number} submitted; "
                "a second person must now review and approve it.",
                messages.SUCCESS,
            )
        return HttpResponseRedirect(self._change_url(version))

    def review_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The approval page: the diff, the impact preview, and the approve button."""
        version = self._get_version(request, object_id)
        context = self._version_context(request, version)
        context.update(
            {
                **self.admin_site.each_context(request),
                "title": f"Review {version.policy.data_class} v{version.number}",
                "opts": self.opts,
                "original": version,
                "preview": selectors.impact_preview(version, now=timezone.now()),
            }
        )
        return TemplateResponse(request, "admin/retention/policyversion/review.html", context)

    def approve_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._get_version(request, object_id)
        if request.method != "POST" or not self.has_approve_permission(request):
            raise PermissionDenied
        done = report_refusal(
            self,
            request,
            lambda: services.policy_version_approve(
                version=version, approver=acting_user(request), now=timezone.now()
            ),
        )
        if done is None:
            return HttpResponseRedirect(
                reverse("admin:retention_policyversion_review", args=[version.pk])
            )
        self.message_user(
            request,
            f"{version.policy.data_class} v{version.number} approved and in force: "
            "new uploads get its retention period.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(self._change_url(version))


class _VersionTransition(Protocol):
    def __call__(
        self, *, version: PolicyVersion, by: AbstractBaseUser, now: datetime
    ) -> PolicyVersion: ...


def _lock_refusal(version: PolicyVersion, in_force: PolicyVersion | None) -> str:
    """Why approving would be refused by the lock, said before anyone tries."""
    violation = lock_violation(version, in_force)
    if violation is None:
        return ""
    if violation.kind == "shortened":
        return (
            f"The policy is locked at {format_duration(violation.in_force.retention_period)}: "
            "a shorter period will be refused."
        )
    return "The policy is locked: a new version must stay locked, or it will be refused."
