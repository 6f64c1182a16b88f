"""The kill switch: one page showing its state, with pause and resume forms.

Both need a reason. Pausing stores it on the switch (the banner shows it);
resuming has no column of its own, so its reason goes to the admin history
of the switch, next to the pause.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from retention import services
from retention.admin.base import acting_user, report_refusal
from retention.admin.release import ReasonForm
from retention.models import KillSwitch


@admin.register(KillSwitch)
class KillSwitchAdmin(admin.ModelAdmin[KillSwitch]):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: KillSwitch | None = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        return [
            path("pause/", self.admin_site.admin_view(self.pause_view), name="retention_pause"),
            path("resume/", self.admin_site.admin_view(self.resume_view), name="retention_resume"),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return self._page(request, ReasonForm(rows=2))

    def change_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The one switch has no page of its own: its list is the page."""
        return HttpResponseRedirect(reverse("admin:retention_killswitch_changelist"))

    def _page(self, request: HttpRequest, form: ReasonForm) -> HttpResponse:
        switch = KillSwitch.objects.filter(pk=1).select_related("paused_by", "resumed_by").first()
        history = (
            LogEntry.objects.filter(
                content_type=ContentType.objects.get_for_model(KillSwitch), object_id="1"
            )
            .select_related("user")
            .order_by("-action_time")[:10]
        )
        return TemplateResponse(
            request,
            "admin/retention/killswitch/page.html",
            {
                **self.admin_site.each_context(request),
                "title": "Kill switch",
                "opts": self.opts,
                "switch": switch,
                "paused": switch is not None and switch.paused,
                "form": form,
                "can_change": self.has_change_permission(request),
                "history": history,
            },
        )

    def _act(self, request: HttpRequest, *, pause: bool) -> HttpResponse:
        if request.method != "POST" or not self.has_change_permission(request):
            raise PermissionDenied
        form = ReasonForm(request.POST, rows=2)
        if not form.is_valid():
            self.message_user(request, "Give a reason.", messages.ERROR)
            return self._page(request, form)
        reason = form.cleaned_data["reason"]
        now = timezone.now()
        by = acting_user(request)
        if pause:
            switch = report_refusal(
                self,
                request,
                lambda: services.kill_switch_pause(by=by, reason=reason, now=now),
            )
        else:
            switch = report_refusal(
                self, request, lambda: services.kill_switch_resume(by=by, now=now)
            )
        if switch is not None:
            verb = "Paused" if pause else "Resumed"
            self.log_change(request, switch, f"{verb}: {reason}")
            self.message_user(
                request,
                "Retention paused: no run claims anything new; work in flight finishes."
                if pause
                else "Retention resumed: runs claim expired records again.",
                messages.WARNING if pause else messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:retention_killswitch_changelist"))

    def pause_view(self, request: HttpRequest) -> HttpResponse:
        return self._act(request, pause=True)

    def resume_view(self, request: HttpRequest) -> HttpResponse:
        return self._act(request, pause=False)
