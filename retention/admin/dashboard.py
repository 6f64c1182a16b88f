"""The governance dashboard: lag, backlog and failures per data class.

The chart is an inline SVG computed here, on the server: no JavaScript, no
external asset, nothing fetched from a CDN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from retention.selectors.class_health import DayPoint, dashboard

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    from retention.models import Policy

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 48, 56, 16, 36


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    left: int
    right: float
    top: int
    bottom: float
    bars: list[Bar]
    line: str  # SVG polyline points
    dots: list[tuple[float, float, str]]
    ticks: list[Tick]
    max_deleted: int
    max_backlog: int
    total_deleted: int


def _scale_max(value: int) -> int:
    """A round axis maximum at or above ``value``."""
    if value <= 5:
        return 5
    for step in (10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000):
        if value <= step:
            return step
    magnitude: int = 10 ** (len(str(value)) - 1)  # typeshed: int ** int may be a float
    return -(-value // magnitude) * magnitude


def build_chart(days: list[DayPoint]) -> Chart:
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    bottom = TOP + plot_h
    slot = plot_w / max(len(days), 1)
    max_deleted = _scale_max(max((d.deleted for d in days), default=0))
    max_backlog = _scale_max(max((d.backlog for d in days), default=0))
    bars, dots, points, ticks = [], [], [], []
    for i, point in enumerate(days):
        x = LEFT + i * slot
        height = plot_h * point.deleted / max_deleted
        label = f"{point.day:%Y-%m-%d}: {point.deleted} deleted, backlog {point.backlog}"
        bars.append(
            Bar(
                round(x + slot * 0.15, 1),
                round(bottom - height, 1),
                round(slot * 0.7, 1),
                round(height, 1),
                label,
            )
        )
        cx = round(x + slot / 2, 1)
        cy = round(bottom - plot_h * point.backlog / max_backlog, 1)
        points.append(f"{cx},{cy}")
        dots.append((cx, cy, label))
        if i % 5 == 0 or i == len(days) - 1:
            ticks.append(Tick(cx, f"{point.day:%m-%d}"))
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        right=WIDTH - RIGHT,
        top=TOP,
        bottom=bottom,
        bars=bars,
        line=" ".join(points),
        dots=dots,
        ticks=ticks,
        max_deleted=max_deleted,
        max_backlog=max_backlog,
        total_deleted=sum(d.deleted for d in days),
    )


def dashboard_view(model_admin: ModelAdmin[Policy], request: HttpRequest) -> HttpResponse:
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    data_class = request.GET.get("data_class") or None
    board = dashboard(now=timezone.now(), data_class=data_class)
    if data_class is not None and data_class not in {c.data_class for c in board.classes}:
        board = dashboard(now=board.now)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Retention dashboard",
        "opts": model_admin.opts,
        "board": board,
        "chart": build_chart(board.days),
        "can_view_runs": request.user.has_perm("retention.view_run"),
        "can_view_records": request.user.has_perm("retention.view_retentionrecord"),
    }
    return TemplateResponse(request, "admin/retention/dashboard.html", context)
