"""The volume breaker's trips: what a run was about to delete against what is normal,
a sample, and the release for the next run (approvers, with a reason)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import DateFieldListFilter
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from retention import services
from retention.admin.base import DataClassFilter, ReadOnlyAdmin, acting_user, report_refusal
from retention.models import BreakerState, BreakerTrip
from retention.selectors.breaker import HISTORY_DAYS, trip_summary
from retention.services.policies import APPROVE_PERMISSION


class BreakerReleaseForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why this volume is legitimate (e.g. the first sweep of a backfilled class, "
        "reviewed against the sample).",
    )


def figure_rows(trip: BreakerTrip) -> list[tuple[str, str, str]]:
    """(what, this run, the limit) for the change page and the release page."""
    f = trip.figures or {}
    noun = "rows" if f.get("kind") == "rows" else "records"
    rows = [("About to delete", f"{f.get('about_to_delete', 0):,} {noun}", "")]
    if "not_yet_deleted" in f:
        rows.append(("Not yet deleted in the class", f"{f['not_yet_deleted']:,}", ""))
        rows.append(
            (
                "Share of the class",
                f"{float(f.get('fraction') or 0):.1%}",
                f"at most {float(f.get('max_fraction') or 0):.0%}",
            )
        )
        median = float(f.get("median_daily") or 0)
        multiple = f"{float(f['multiple']):.1f}x" if f.get("multiple") is not None else "—"
        rows.append((f"Median day of the last {HISTORY_DAYS}", f"{median:g}", ""))
        rows.append(
            (
                "Multiple of the median day",
                multiple if any(f.get("daily") or []) else "— (no history: a first sweep)",
                f"at most {float(f.get('max_multiple') or 0):g}x",
            )
        )
    rows.append(("Trips only from", f"{f.get('min_count', 0):,}", ""))
    return rows


def _context(trip: BreakerTrip) -> dict[str, Any]:
    return {
        "trip": trip,
        "summary": trip_summary(trip.limit, trip.figures or {}),
        "figure_rows": figure_rows(trip),
        "daily": list(enumerate((trip.figures or {}).get("daily") or [], start=1)),
        "sample": trip.sample or [],
    }


@admin.register(BreakerTrip)
class BreakerTripAdmin(ReadOnlyAdmin[BreakerTrip]):
    list_display = (
        "__str__",
        "data_class",
        "state",
        "limit",
        "about_to_delete",
        "tripped_at",
        "run_link",
        "released_by",
        "released_at",
        "used_by_run_link",
    )
    list_filter = ("state", DataClassFilter, ("tripped_at", DateFieldListFilter))
    list_select_related = ("released_by",)
    ordering = ("-tripped_at",)
    actions = ("release_for_next_run",)
    fields = (
        "data_class",
        "state",
        "limit",
        "summary",
        "tripped_at",
        "run_link",
        "released_by",
        "released_at",
        "release_reason",
        "used_by_run_link",
    )
    readonly_fields = fields
    change_form_template = "admin/retention/breakertrip/change_form.html"

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_PERMISSION)

    @admin.display(description="about to delete")
    def about_to_delete(self, obj: BreakerTrip) -> int:
        return int((obj.figures or {}).get("about_to_delete") or 0)

    @admin.display(description="why")
    def summary(self, obj: BreakerTrip) -> str:
        return trip_summary(obj.limit, obj.figures or {})

    @admin.display(description="run")
    def run_link(self, obj: BreakerTrip) -> str:
        return _run_link(obj.run_id)

    @admin.display(description="release used by")
    def used_by_run_link(self, obj: BreakerTrip) -> str:
        return _run_link(obj.used_by_run_id)

    @admin.action(
        permissions=["approve"], description="Release the selected trip for the next run…"
    )
    def release_for_next_run(
        self, request: HttpRequest, queryset: QuerySet[BreakerTrip]
    ) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(
                request, "Release one trip at a time: each needs its own reason.", messages.WARNING
            )
            return None
        return HttpResponseRedirect(
            reverse("admin:retention_breakertrip_release", args=[queryset.get().pk])
        )

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/release/",
                self.admin_site.admin_view(self.release_view),
                name="retention_breakertrip_release",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        trip = self.get_object(request, object_id)
        if trip is not None:
            context.update(_context(trip))
            context["can_release"] = (
                trip.state == BreakerState.TRIPPED and self.has_approve_permission(request)
            )
        return super().change_view(request, object_id, form_url, context)

    def release_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not (self.has_view_permission(request) and self.has_approve_permission(request)):
            raise PermissionDenied
        trip = get_object_or_404(BreakerTrip, pk=object_id)
        back = HttpResponseRedirect(reverse("admin:retention_breakertrip_change", args=[trip.pk]))
        if trip.state != BreakerState.TRIPPED:
            self.message_user(request, f"{trip} is not holding anything.", messages.WARNING)
            return back
        form = BreakerReleaseForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            done = report_refusal(
                self,
                request,
                lambda: services.breaker_release(
                    data_class=trip.data_class,
                    by=acting_user(request),
                    reason=form.cleaned_data["reason"],
                    now=timezone.now(),
                ),
            )
            if done is not None:
                self.message_user(
                    request,
                    f"{trip.data_class} released: its next full enforcing run deletes it "
                    "without checking the volume.",
                    messages.SUCCESS,
                )
                return back
        return TemplateResponse(
            request,
            "admin/retention/breakertrip/release.html",
            {
                **self.admin_site.each_context(request),
                **_context(trip),
                "title": f"Release {trip.data_class} for the next run",
                "opts": self.opts,
                "form": form,
            },
        )


def _run_link(run_id: object) -> str:
    if run_id is None:
        return "—"
    url = reverse("admin:retention_run_change", args=[run_id])
    return format_html('<a href="{}">{}</a>', url, str(run_id)[:8])
