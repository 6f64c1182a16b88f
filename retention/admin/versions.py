"""Policy versions in the admin: draft, submit, review (diff, impact preview), approve, retire."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from retention import services
from retention.admin.base import (
    ChangeContextMixin,
    VersionDataClassFilter,
    acting_user,
    lock_refusal_message,
    one_at_a_time,
    report_refusal,
)
from retention.admin.policies import LIFECYCLE_FIELDS, RULE_FORM_FIELDS, DraftForm, VersionRulesForm
from retention.admin.version_help import ADVANCED_DESCRIPTION, ADVANCED_FIELDS
from retention.admin.version_registration import changes_context
from retention.admin.version_reject import reject_view
from retention.durations import format_duration
from retention.exceptions import RetentionError
from retention.models import PolicyVersion, PolicyVersionStatus
from retention.rows.cascade import cascade_of
from retention.rows.registry import row_class
from retention.selectors.impact import impact_preview
from retention.selectors.policies import version_in_force, version_or_latest
from retention.selectors.version_changes import version_diff
from retention.services import governance
from retention.services.policies import APPROVE_PERMISSION, RETIRE_PERMISSION

if TYPE_CHECKING:
    from django_stubs_ext import FieldsetSpec


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ChangeContextMixin[PolicyVersion]):
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

    @admin.display(description="retention period", ordering="retention_period")
    def period(self, obj: PolicyVersion) -> str:
        return format_duration(obj.retention_period)

    @admin.display(description="safety margin", ordering="safety_margin")
    def margin(self, obj: PolicyVersion) -> str:
        return format_duration(obj.safety_margin)

    def get_fieldsets(self, request: HttpRequest, obj: PolicyVersion | None = None) -> FieldsetSpec:
        rules = [name for name in RULE_FORM_FIELDS if name not in ADVANCED_FIELDS]
        advanced: FieldsetSpec = [
            (
                "Advanced",
                {
                    "fields": list(ADVANCED_FIELDS),
                    "classes": ["collapse"],
                    "description": ADVANCED_DESCRIPTION,
                },
            )
        ]
        if obj is None:
            return [
                (None, {"fields": ["data_class", "description"]}),
                ("Rules", {"fields": rules}),
                *advanced,
            ]
        return [
            ("Version", {"fields": ["policy", "number", "status"]}),
            ("Rules", {"fields": rules}),
            *advanced,
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

    def change_context(self, request: HttpRequest, version: PolicyVersion) -> dict[str, Any]:
        in_force = version_in_force(policy_id=version.policy_id)
        against: PolicyVersion | None = in_force if in_force != version else None
        compare = request.GET.get("compare")
        others = list(version.policy.versions.exclude(pk=version.pk).order_by("number"))
        if compare and compare.isdigit():
            against = next((v for v in others if v.number == int(compare)), against)
        diff = version_diff(version, against)
        submitted = version.status == PolicyVersionStatus.SUBMITTED
        row = row_class(version.policy.data_class)
        return {
            "version": version,
            "row_class": row,
            # Once approved, what the approver saw; before, the model graph as it is now.
            "cascade": None if row is None else version.cascade or cascade_of(row.model),
            "in_force": in_force,
            "against": against,
            "other_versions": others,
            "diff": diff,
            "lock_refusal": lock_refusal_message(version, in_force),
            "can_submit": version.status == PolicyVersionStatus.DRAFT
            and super().has_change_permission(request),
            "can_review": submitted,
            "can_approve": submitted and self.has_approve_permission(request),
            "can_reject": submitted
            and self.has_approve_permission(request)
            and version.author_id != request.user.pk,
            "can_retire": version.status
            in (
                PolicyVersionStatus.DRAFT,
                PolicyVersionStatus.SUBMITTED,
                PolicyVersionStatus.APPROVED,
            )
            and self.has_retire_permission(request),
            "is_author": version.author_id == request.user.pk,
            **changes_context(version, in_force, row, now=timezone.now()),
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
                self.message_user(request, f"{done.label} {done_verb}.")

    @admin.action(permissions=["change"], description="Submit selected drafts for approval")
    def submit_versions(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        self._each_version(request, queryset, services.policy_version_submit, "submitted")

    @admin.action(permissions=["approve"], description="Review impact and approve…")
    def review_and_approve(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> HttpResponse | None:
        return one_at_a_time(
            self,
            request,
            queryset,
            "admin:retention_policyversion_review",
            "Approve one version at a time: each needs its impact reviewed first.",
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
            path(
                "<path:object_id>/reject/",
                view(lambda request, object_id: reject_view(self, request, object_id)),
                name="retention_policyversion_reject",
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
                f"{version.label} submitted; a second person must now review and approve it.",
                messages.SUCCESS,
            )
        return HttpResponseRedirect(self._change_url(version))

    def review_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The approval page: the diff, the impact preview, and the approve button."""
        version = self._get_version(request, object_id)
        context = self.change_context(request, version)
        context.update(
            {
                **self.admin_site.each_context(request),
                "title": f"Review {version.label}",
                "opts": self.opts,
                "original": version,
                "preview": impact_preview(version, now=timezone.now()),
            }
        )
        return TemplateResponse(request, "admin/retention/policyversion/review.html", context)

    def approve_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._get_version(request, object_id)
        if request.method != "POST" or not self.has_approve_permission(request):
            raise PermissionDenied
        confirmed = request.POST.get("confirm_disposition_change") == "on"
        done = report_refusal(
            self,
            request,
            lambda: services.policy_version_approve(
                version=version,
                approver=acting_user(request),
                now=timezone.now(),
                confirm_disposition_change=confirmed,
            ),
        )
        if done is None:
            return HttpResponseRedirect(
                reverse("admin:retention_policyversion_review", args=[version.pk])
            )
        row = row_class(version.policy.data_class)
        applies = (
            f"it governs the rows of {row.label}" if row else "new uploads get its retention period"
        )
        self.message_user(
            request,
            f"{version.label} approved and in force: {applies}.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(self._change_url(version))


class _VersionTransition(Protocol):
    def __call__(
        self, *, version: PolicyVersion, by: AbstractBaseUser, now: datetime
    ) -> PolicyVersion: ...
