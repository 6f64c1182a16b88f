"""The volume breaker's trips: what a run was about to delete against what is normal,
a sample, and the release for the next run (approvers, with a reason)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.admin import DateFieldListFilter
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html

from retention import services
from retention.admin.base import DataClassFilter, ReadOnlyAdmin
from retention.admin.release import ReleaseMixin
from retention.models import BreakerState, BreakerTrip
from retention.selectors.breaker import HISTORY_DAYS, trip_summary
from retention.services.policies import APPROVE_PERMISSION


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
class BreakerTripAdmin(ReleaseMixin[BreakerTrip], ReadOnlyAdmin[BreakerTrip]):
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
    release_help_text = (
        "Why this volume is legitimate (e.g. the first sweep of a backfilled class, "
        "reviewed against the sample)."
    )

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
        return self.release_one(request, queryset, "trip")

    def change_context(self, request: HttpRequest, obj: BreakerTrip) -> dict[str, Any]:
        return {**super().change_context(request, obj), **_context(obj)}

    # Releasing: approvers, a tripped class, for its next full enforcing run.

    def has_release_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request) and self.has_approve_permission(request)

    def release_refusal(self, obj: BreakerTrip) -> str:
        return "" if obj.state == BreakerState.TRIPPED else f"{obj} is not holding anything."

    def release(
        self, obj: BreakerTrip, *, by: AbstractBaseUser, reason: str, now: datetime
    ) -> object:
        return services.breaker_release(data_class=obj.data_class, by=by, reason=reason, now=now)

    def released_message(self, obj: BreakerTrip) -> str:
        return (
            f"{obj.data_class} released: its next full enforcing run deletes it "
            "without checking the volume."
        )

    def release_context(self, request: HttpRequest, obj: BreakerTrip) -> dict[str, Any]:
        return {**_context(obj), "title": f"Release {obj.data_class} for the next run"}


def _run_link(run_id: object) -> str:
    if run_id is None:
        return "—"
    url = reverse("admin:retention_run_change", args=[run_id])
    return format_html('<a href="{}">{}</a>', url, str(run_id)[:8])
