"""Deciding an erasure request in the admin: approve, reject or cancel, each on a page
of its own that shows the frozen scope before anything is decided.

One flow for the three: an action (or the request's page) leads to
``<id>/<decision>/``; the page shows whom the request erases, why, and its
scope as the approver approves it; approving asks nothing more, rejecting
and cancelling ask why. Each is one service call, which enforces the rules
(four eyes, the permission, the state); the admin only hides what it would
refuse and shows its refusals as messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.contrib import admin, messages
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from retention.admin.base import acting_user, one_at_a_time, report_refusal
from retention.admin.release import ReasonForm
from retention.models import ErasureRequest, ErasureState
from retention.services.erasure import (
    APPROVE_ERASURE_PERMISSION,
    NOT_STARTED,
    erasure_approve,
    erasure_cancel,
    erasure_reject,
)


@dataclass(frozen=True, slots=True)
class Decision:
    name: str  # in the URL and the templates
    title: str
    verb: str
    submit: str
    states: tuple[str, ...]  # the states it can leave
    reason_help: str  # "": asks no reason
    call: Callable[[ErasureRequest, AbstractBaseUser, str, datetime], ErasureRequest]
    done: str


DECISIONS = {
    d.name: d
    for d in (
        Decision(
            name="approve",
            verb="approved",
            title="Approve",
            submit="Approve: erase what this scope reaches",
            states=(ErasureState.RECEIVED,),
            reason_help="",
            call=lambda r, by, _, now: erasure_approve(request=r, approver=by, now=now),
            done="approved: the engine erases what its scope reaches",
        ),
        Decision(
            name="reject",
            verb="rejected",
            title="Reject",
            submit="Reject the request",
            states=(ErasureState.RECEIVED,),
            reason_help="Why it is refused, e.g. the identity could not be verified.",
            call=lambda r, by, why, now: erasure_reject(request=r, by=by, reason=why, now=now),
            done="rejected; the subject's id is forgotten",
        ),
        Decision(
            name="cancel",
            verb="cancelled",
            title="Cancel",
            submit="Cancel the request",
            states=NOT_STARTED,
            reason_help="Why it is withdrawn, e.g. the person withdrew the request.",
            call=lambda r, by, why, now: erasure_cancel(request=r, by=by, reason=why, now=now),
            done="cancelled; the subject's id is forgotten",
        ),
    )
}


class ErasureDecisionsMixin(admin.ModelAdmin[ErasureRequest]):
    """``<id>/approve/``, ``<id>/reject/``, ``<id>/cancel/`` and the actions leading there."""

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_ERASURE_PERMISSION)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        # The requester may cancel too; the service checks it is theirs.
        return self.has_approve_permission(request) or self.has_add_permission(request)

    def may_decide(self, request: HttpRequest, decision: Decision, obj: ErasureRequest) -> bool:
        """Whether the page offers ``decision`` on ``obj`` (the service decides for good)."""
        if obj.state not in decision.states:
            return False
        if decision.name == "cancel" and obj.requested_by_id == request.user.pk:
            return True
        return self.has_approve_permission(request)

    def get_urls(self) -> list[URLPattern]:
        opts = self.opts
        urls = [
            path(
                f"<path:object_id>/{name}/",
                self.admin_site.admin_view(self._decision_view(name)),
                name=f"{opts.app_label}_{opts.model_name}_{name}",
            )
            for name in DECISIONS
        ]
        return urls + super().get_urls()

    def _decision_view(self, name: str) -> Callable[[HttpRequest, str], HttpResponse]:
        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            return self.decision_view(request, object_id, DECISIONS[name])

        return view

    def _one(self, request: HttpRequest, queryset: QuerySet[ErasureRequest], name: str) -> object:
        return one_at_a_time(
            self,
            request,
            queryset,
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}",
            f"{DECISIONS[name].title} one request at a time: each is decided on its own page.",
        )

    @admin.action(permissions=["approve"], description="Review the scope and approve…")
    def approve_request(self, request: HttpRequest, queryset: QuerySet[ErasureRequest]) -> object:
        return self._one(request, queryset, "approve")

    @admin.action(permissions=["approve"], description="Reject the selected request…")
    def reject_request(self, request: HttpRequest, queryset: QuerySet[ErasureRequest]) -> object:
        return self._one(request, queryset, "reject")

    @admin.action(permissions=["cancel"], description="Cancel the selected request…")
    def cancel_request(self, request: HttpRequest, queryset: QuerySet[ErasureRequest]) -> object:
        return self._one(request, queryset, "cancel")

    def decision_context(self, request: HttpRequest, obj: ErasureRequest) -> dict[str, object]:
        """What the page shows of the request (its scope); the admin fills it."""
        return {}

    def decision_view(
        self, request: HttpRequest, object_id: str, decision: Decision
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        obj = get_object_or_404(ErasureRequest.objects.select_related("requested_by"), pk=object_id)
        change_url = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk]
        )
        if obj.state not in decision.states:
            self.message_user(
                request,
                f"Erasure request {obj.pk} cannot be {decision.verb}: it is {obj.state}.",
                messages.WARNING,
            )
            return HttpResponseRedirect(change_url)
        if not self.may_decide(request, decision, obj):
            raise PermissionDenied
        form = ReasonForm(request.POST or None, help_text=decision.reason_help)
        if request.method == "POST" and (not decision.reason_help or form.is_valid()):
            reason = form.cleaned_data.get("reason", "") if decision.reason_help else ""
            done = report_refusal(
                self,
                request,
                lambda: decision.call(obj, acting_user(request), reason, timezone.now()),
            )
            if done is not None:
                self.message_user(
                    request, f"Erasure request {done.pk} {decision.done}.", messages.SUCCESS
                )
                return HttpResponseRedirect(change_url)
        return TemplateResponse(
            request,
            f"admin/{self.opts.app_label}/{self.opts.model_name}/decide.html",
            {
                **self.admin_site.each_context(request),
                **self.decision_context(request, obj),
                "title": f"{decision.title} {obj}",
                "opts": self.opts,
                "object": obj,
                "decision": decision,
                "form": form if decision.reason_help else None,
                "is_requester": obj.requested_by_id == request.user.pk,
            },
        )
