"""Turning a submitted version down: a page that asks why, then ``policy_version_reject``.

The version goes back to its author as a draft; the reason is shown on its
page and in the author's inbox. Kept apart from ``versions`` (the admin of
versions) so each stays short; four-eyes is the service's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from retention import services
from retention.admin.base import acting_user, report_refusal
from retention.admin.release import ReasonForm
from retention.models import PolicyVersion, PolicyVersionStatus
from retention.services.policies import APPROVE_PERMISSION

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

REASON_HELP = (
    "What the author should change, in words they can act on (e.g. 'the contract says "
    "90 days, not 60'). They read it on the version and in their inbox."
)


def reject_view(
    model_admin: ModelAdmin[PolicyVersion], request: HttpRequest, object_id: str
) -> HttpResponse:
    """``<version>/reject/``: the reason, then the version is back with its author."""
    if not (model_admin.has_view_permission(request) and request.user.has_perm(APPROVE_PERMISSION)):
        raise PermissionDenied
    version = get_object_or_404(
        PolicyVersion.objects.select_related("policy", "author"), pk=object_id
    )
    change_url = reverse("admin:retention_policyversion_change", args=[version.pk])
    if version.status != PolicyVersionStatus.SUBMITTED:
        model_admin.message_user(
            request, f"{version} is not waiting for approval: nothing to reject.", messages.WARNING
        )
        return HttpResponseRedirect(change_url)
    form = ReasonForm(request.POST or None, help_text=REASON_HELP)
    if request.method == "POST" and form.is_valid():
        done = report_refusal(
            model_admin,
            request,
            lambda: services.policy_version_reject(
                version=version,
                by=acting_user(request),
                reason=form.cleaned_data["reason"],
                now=timezone.now(),
            ),
        )
        if done is not None:
            model_admin.message_user(
                request,
                f"{version.label} returned to "
                f"{version.author.get_username()} as a draft, with your reason.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(change_url)
    return TemplateResponse(
        request,
        "admin/retention/policyversion/reject.html",
        {
            **model_admin.admin_site.each_context(request),
            "title": f"Reject {version.label}",
            "opts": model_admin.opts,
            "original": version,
            "is_author": version.author_id == request.user.pk,
            "form": form,
        },
    )
