"""Enabling and disabling enforcement for a data class, each through a confirmation page.

As Django's ``delete_selected`` lists what goes before anything goes, each
page says in words what the next run will do, with the counts of the dry run
enabling records as reviewed (``retention.selectors.outlook``); a POST with
``post=yes`` confirms. The writes stay the services': enabling goes through
``enforcement_enable_from_dry_run`` with the dry run the page showed (refused
if a newer one appeared meanwhile), disabling through ``enforcement_disable``.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from retention import services
from retention.admin.base import acting_user, report_refusal
from retention.models import DataClassMode, Policy, Run
from retention.selectors.outlook import enforcement_outlook
from retention.services import governance
from retention.services.policies import APPROVE_PERMISSION

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

DISABLE_PERMISSION = "retention.change_policy"


def _change_url(policy: Policy) -> str:
    return reverse("admin:retention_policy_change", args=[policy.pk])


def _page(
    model_admin: ModelAdmin[Policy], request: HttpRequest, template: str, **context: Any
) -> TemplateResponse:
    return TemplateResponse(
        request,
        f"admin/retention/policy/{template}",
        {**model_admin.admin_site.each_context(request), "opts": model_admin.opts, **context},
    )


def _posted_run(request: HttpRequest) -> Run:
    """The dry run the page showed (a hidden field), or 404."""
    try:
        run_id = uuid.UUID(request.POST.get("run", ""))
    except ValueError:
        raise Http404("No such dry run.") from None
    return get_object_or_404(Run, pk=run_id)


def enable_view(
    model_admin: ModelAdmin[Policy], request: HttpRequest, object_id: str
) -> HttpResponse:
    """``<policy>/enable/``: what the next run will do, then "Yes, enable"."""
    if not (model_admin.has_view_permission(request) and request.user.has_perm(APPROVE_PERMISSION)):
        raise PermissionDenied
    policy = get_object_or_404(Policy, pk=object_id)
    if policy.mode == DataClassMode.ENFORCE:
        model_admin.message_user(request, f"{policy.data_class} is already enforced.")
        return HttpResponseRedirect(_change_url(policy))
    if request.method == "POST" and request.POST.get("post") == "yes":
        run = _posted_run(request)
        done = report_refusal(
            model_admin,
            request,
            lambda: governance.enforcement_enable_from_dry_run(
                run=run, data_class=policy.data_class, by=acting_user(request), now=timezone.now()
            ),
        )
        if done is not None:
            outlook = enforcement_outlook(done, now=timezone.now())
            model_admin.message_user(
                request,
                f"Enforcement enabled for {policy.data_class}: the next enforcing run "
                f"{outlook.verb}s its expired {outlook.noun} that no hold keeps. You are "
                "recorded as the reviewer of the dry run.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(_change_url(policy))
    outlook = enforcement_outlook(policy, now=timezone.now())
    return _page(
        model_admin,
        request,
        "enable_confirmation.html",
        title=f"Enable enforcement for {policy.data_class}",
        policy=policy,
        outlook=outlook,
    )


def disable_view(
    model_admin: ModelAdmin[Policy], request: HttpRequest, object_id: str
) -> HttpResponse:
    """``<policy>/disable/``: one class back to report-only, confirmed."""
    policy = get_object_or_404(Policy, pk=object_id)
    response = disable_confirmation(
        model_admin, request, Policy.objects.filter(pk=policy.pk), action=""
    )
    return response or HttpResponseRedirect(_change_url(policy))


def disable_confirmation(
    model_admin: ModelAdmin[Policy],
    request: HttpRequest,
    queryset: QuerySet[Policy],
    *,
    action: str,
) -> HttpResponse | None:
    """The confirmation page for ``queryset``, or, confirmed, the service per class.

    ``action``: the changelist action that posts here (its form carries the
    selection), or "" for a class's own page.
    """
    if not (model_admin.has_view_permission(request) and request.user.has_perm(DISABLE_PERMISSION)):
        raise PermissionDenied
    if request.method == "POST" and request.POST.get("post") == "yes":
        now, by = timezone.now(), acting_user(request)
        for policy in queryset:
            done = report_refusal(
                model_admin,
                request,
                partial(services.enforcement_disable, data_class=policy.data_class, by=by, now=now),
            )
            if done is not None:
                model_admin.message_user(
                    request,
                    f"{policy.data_class} is report-only again: no run deletes or redacts "
                    "any of it until enforcement is enabled again.",
                    messages.SUCCESS,
                )
        return None
    now = timezone.now()
    policies = list(queryset.order_by("data_class"))
    return _page(
        model_admin,
        request,
        "disable_confirmation.html",
        title="Back to report-only"
        if len(policies) != 1
        else f"Back to report-only for {policies[0].data_class}",
        outlooks=[enforcement_outlook(policy, now=now) for policy in policies],
        action=action,
        action_checkbox_name=ACTION_CHECKBOX_NAME,
    )
