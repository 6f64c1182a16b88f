"""Release with a reason: one admin flow for lifting what keeps data from its deadline.

A legal hold keeps records past their deadline; a tripped volume breaker keeps
a whole data class. Releasing either is the same flow: an action that takes
one object to its confirmation page, the page showing what the release lets
go, a reason that the service records, then a message. Each admin says only
what differs: who may release, when there is nothing to release, the service
call and its words. Its ``release.html`` fills the blocks of
``admin/retention/release.html``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from retention.admin.base import (
    ChangeContextMixin,
    ModelT,
    acting_user,
    one_at_a_time,
    report_refusal,
)


class ReasonForm(forms.Form):
    """The one question a release, a pause and a resume ask: why."""

    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))

    def __init__(self, *args: Any, help_text: str = "", rows: int = 3, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        reason = self.fields["reason"]
        reason.help_text = help_text
        reason.widget.attrs["rows"] = rows


class ReleaseMixin(ChangeContextMixin[ModelT]):
    """``<id>/release/``: a confirmation page that asks why, then one service call.

    The object's page offers the release (``can_release``) when there is
    something to release and the user may.
    """

    # Under the reason field: what a good reason says.
    release_help_text = ""

    def has_release_permission(self, request: HttpRequest) -> bool:
        raise NotImplementedError

    def release_queryset(self) -> QuerySet[ModelT]:
        return self.model._default_manager.all()

    def release_refusal(self, obj: ModelT) -> str:
        """Why there is nothing to release (a warning), or "" when there is."""
        raise NotImplementedError

    def release(self, obj: ModelT, *, by: AbstractBaseUser, reason: str, now: datetime) -> object:
        """The service call; a RetentionError it raises is shown, not a 500."""
        raise NotImplementedError

    def released_message(self, obj: ModelT) -> str:
        raise NotImplementedError

    def released_url(self, obj: ModelT) -> str:
        return self._release_url("change", obj)

    def release_context(self, request: HttpRequest, obj: ModelT) -> dict[str, Any]:
        """What the page shows of ``obj`` (its ``title`` too)."""
        raise NotImplementedError

    def change_context(self, request: HttpRequest, obj: ModelT) -> dict[str, Any]:
        return {
            **super().change_context(request, obj),
            "can_release": not self.release_refusal(obj) and self.has_release_permission(request),
        }

    def _release_url(self, name: str, obj: ModelT) -> str:
        return reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_{name}", args=[obj.pk])

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/release/",
                self.admin_site.admin_view(self.release_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_release",
            ),
            *super().get_urls(),
        ]

    def release_one(
        self, request: HttpRequest, queryset: QuerySet[ModelT], noun: str
    ) -> HttpResponse | None:
        """The action: one object at a time, to its release page."""
        return one_at_a_time(
            self,
            request,
            queryset,
            f"admin:{self.opts.app_label}_{self.opts.model_name}_release",
            f"Release one {noun} at a time: each needs its own reason.",
        )

    def release_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.has_release_permission(request):
            raise PermissionDenied
        obj = get_object_or_404(self.release_queryset(), pk=object_id)
        refusal = self.release_refusal(obj)
        if refusal:
            self.message_user(request, refusal, messages.WARNING)
            return HttpResponseRedirect(self._release_url("change", obj))
        form = ReasonForm(request.POST or None, help_text=self.release_help_text)
        if request.method == "POST" and form.is_valid():
            done = report_refusal(
                self,
                request,
                lambda: self.release(
                    obj,
                    by=acting_user(request),
                    reason=form.cleaned_data["reason"],
                    now=timezone.now(),
                ),
            )
            if done is not None:
                self.message_user(request, self.released_message(obj), messages.SUCCESS)
                return HttpResponseRedirect(self.released_url(obj))
        return TemplateResponse(
            request,
            f"admin/{self.opts.app_label}/{self.opts.model_name}/release.html",
            {
                **self.admin_site.each_context(request),
                **self.release_context(request, obj),
                "opts": self.opts,
                "object": obj,
                "form": form,
            },
        )
