"""The run ledger, read-only, and the dry-run report a reviewer enables enforcement from."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.admin import DateFieldListFilter
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html

from retention.admin.base import (
    CsvExportMixin,
    ReadOnlyAdmin,
    RunDataClassFilter,
    RunIdFilter,
)
from retention.admin.run_page import RunPageMixin, class_words, sample_with_ages
from retention.conf import settings
from retention.models import (
    RUN_COUNT_FIELDS,
    DataClassMode,
    Disposition,
    Policy,
    Run,
    RunBatch,
    RunMode,
    RunStatus,
)
from retention.reporting import oldest_due, summary_lines
from retention.rows.registry import row_class
from retention.selectors.policies import version_in_force
from retention.selectors.run_rules import run_rules
from retention.selectors.runs import dry_run_reviewable
from retention.services.policies import APPROVE_PERMISSION


@admin.register(Run)
class RunAdmin(RunPageMixin, CsvExportMixin[Run], ReadOnlyAdmin[Run]):
    # The key columns fit 1280 px: the trigger, the oldest due and the reviewer are
    # on the run's page (and filters), not here.
    list_display = (
        "short_id",
        "mode",
        "status",
        "classes",
        "started_at",
        "eligible",
        "deleted",
        "held",
        "failed",
        "report_link",
    )
    list_filter = (
        "mode",
        "status",
        "trigger",
        RunDataClassFilter,
        ("started_at", DateFieldListFilter),
    )
    list_select_related = ("reviewed_by",)
    search_fields = ("=id",)
    change_list_template = "admin/retention/audit_change_list.html"
    export_fields = (
        "id",
        "mode",
        "trigger",
        "status",
        "status_reason",
        "data_classes",
        "tenant_id",
        "limit",
        "started_at",
        "cutoff",
        "finished_at",
        *RUN_COUNT_FIELDS,
        "retried",
        "oldest_eligible_at",
        "reviewed_by__username",
        "reviewed_at",
    )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Run], search_term: str
    ) -> tuple[QuerySet[Run], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(pk=uuid.UUID(term)), False
        except ValueError:
            return queryset.none(), False

    @admin.display(description="run", ordering="started_at")
    def short_id(self, obj: Run) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="data classes")
    def classes(self, obj: Run) -> str:
        return class_words(obj.data_classes, at_most=3)

    @admin.display(description="held", ordering="skipped_held")
    def held(self, obj: Run) -> int:
        return obj.skipped_held

    @admin.display(description="report")
    def report_link(self, obj: Run) -> str:
        url = reverse("admin:retention_run_report", args=[obj.pk])
        return format_html('<a href="{}">report</a>', url)

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/report/",
                self.admin_site.admin_view(self.report_view),
                name="retention_run_report",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        """A dry run or a reconciliation opens on its report."""
        run = self.get_object(request, object_id)
        if run is not None and run.mode in (RunMode.DRY_RUN, RunMode.RECONCILE):
            return HttpResponseRedirect(reverse("admin:retention_run_report", args=[run.pk]))
        return super().change_view(request, object_id, *args, **kwargs)

    def report_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        run = get_object_or_404(Run.objects.select_related("reviewed_by"), pk=object_id)
        if run.mode == RunMode.RECONCILE:
            return self._reconcile_report(request, run)
        if run.mode != RunMode.DRY_RUN:
            return TemplateResponse(
                request,
                "admin/retention/run/summary.html",
                {
                    **self.admin_site.each_context(request),
                    "title": f"Run report {str(run.pk)[:8]}",
                    "opts": self.opts,
                    "run": run,
                    "outcomes": self.outcome_by_class(run),
                    "lines": summary_lines(run),
                },
            )
        now = timezone.now()
        report = run.report if isinstance(run.report, dict) else {}
        policies = {p.data_class: p for p in Policy.objects.filter(data_class__in=run.data_classes)}
        can_enable = request.user.has_perm(APPROVE_PERMISSION)
        can_disable = request.user.has_perm("retention.change_policy")
        sections = []
        for name in run.data_classes:
            data = report.get("per_data_class", {}).get(name, {})
            policy = policies.get(name)
            latest = dry_run_reviewable(data_class=name, now=now)
            wording = _wording(name, data, policy)
            sections.append(
                {
                    "name": name,
                    "policy": policy,
                    **wording,
                    "eligible": data.get("eligible", 0),
                    "held": data.get("held", 0),
                    "oldest_eligible_at": _oldest_due(run, name, data, wording["rows"]),
                    "cutoff": _parse(data.get("cutoff")),
                    "mode": policy.mode if policy else None,
                    "enforced": policy is not None and policy.mode == DataClassMode.ENFORCE,
                    "reviewed_here": policy is not None and policy.reviewed_dry_run_id == run.pk,
                    "tenants": report.get("per_tenant", {}).get(name, []),
                    "sample": sample_with_ages(run, report.get("sample", {}).get(name, [])),
                    "failed_for_review": report.get("failed_for_review", {}).get(name, 0),
                    "breaker": (report.get("breaker") or {}).get(name) or {},
                    "fresh": latest is not None and latest.pk == run.pk,
                    "newer": latest if latest is not None and latest.pk != run.pk else None,
                }
            )
        age = now - run.finished_at if run.finished_at else None
        context = {
            **self.admin_site.each_context(request),
            "title": f"Dry-run report {str(run.pk)[:8]}",
            "opts": self.opts,
            "run": run,
            "sections": sections,
            "age": age,
            "max_age": settings.DRY_RUN_MAX_AGE,
            "too_old": age is None or age > settings.DRY_RUN_MAX_AGE,
            "narrowed": bool(run.tenant_id or run.limit or report.get("record_ids")),
            "finished": run.status == RunStatus.FINISHED,
            "can_enable": can_enable,
            "can_disable": can_disable,
            "summary_verb": _summary_verb(sections),
            "summary_noun": _summary_noun(sections, run.eligible),
            "oldest_due": oldest_due(run),
        }
        return TemplateResponse(request, "admin/retention/run/report.html", context)

    def _reconcile_report(self, request: HttpRequest, run: Run) -> HttpResponse:
        """A reconciliation's findings per storage, and samples by digest (never keys)."""
        report = run.report if isinstance(run.report, dict) else {}
        storages = [
            {
                "alias": alias,
                "counts": list(counts.items()),
                "samples": list((report.get("samples") or {}).get(alias, {}).items()),
                "not_adopted": sorted((report.get("not_adopted") or {}).get(alias, {}).items()),
            }
            for alias, counts in (report.get("storages") or {}).items()
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Reconciliation {str(run.pk)[:8]}",
            "run": run,
            "report": report,
            "storages": storages,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/retention/run/reconcile_report.html", context)


def _parse(value: object) -> object:
    return parse_datetime(value) if isinstance(value, str) else value


def _wording(name: str, data: dict[str, Any], policy: Policy | None) -> dict[str, Any]:
    """How a class's disposal reads: rows or records, deleted or redacted.

    A dry run's report says it for its classes of rows (``kind``,
    ``disposition``); otherwise the registration and the version in force do.
    """
    rows = data.get("kind") == "rows" or row_class(name) is not None
    disposition = data.get("disposition")
    if disposition is None and policy is not None:
        version = version_in_force(policy_id=policy.pk)
        disposition = version.disposition if version is not None else None
    redact = disposition == Disposition.REDACT
    return {
        "rows": rows,
        "noun": "rows" if rows else "records",
        "would": "Would redact" if redact else "Would delete",
        "does": "redacts" if redact else "deletes",
        "has_tenants": not rows or bool(getattr(row_class(name), "tenant_field", None)),
    }


def _oldest_due(run: Run, name: str, data: dict[str, Any], rows: bool) -> object:
    """When the class's oldest eligible item came due: a row cut by its age is
    due its period after its date (the run's own figures: start − margin − cutoff)."""
    oldest = _parse(data.get("oldest_eligible_at"))
    rules = run_rules(run).get(name)
    row = row_class(name)
    if not rows or not isinstance(oldest, datetime) or rules is None or rules.row_cutoff is None:
        return oldest
    if row is None or row.by_expiry:
        return oldest
    return oldest + (run.started_at - rules.safety_margin - rules.row_cutoff)


def _summary_noun(sections: list[dict[str, Any]], count: int) -> str:
    kinds = {s["rows"] for s in sections}
    if kinds == {True}:
        return "row" if count == 1 else "rows"
    records = "expired record" if count == 1 else "expired records"
    return f"{records} and rows" if True in kinds else records


def _summary_verb(sections: list[dict[str, Any]]) -> str:
    """The report's headline: what the run would do to all its classes."""
    verbs = {str(s["would"]) for s in sections}
    if len(verbs) == 1:
        return verbs.pop()
    return "Would delete or redact" if verbs else "Would delete"


@admin.register(RunBatch)
class RunBatchAdmin(ReadOnlyAdmin[RunBatch]):
    """A queued run's pages as published to the workers: which are in flight, which
    finished, which were lost (expired), released by a pause or never published."""

    list_display = (
        "short_token",
        "run_link",
        "data_class",
        "size",
        "state",
        "published_at",
        "lease_expires_at",
        "finished_at",
        "deliveries",
    )
    list_filter = ("state", RunIdFilter, "data_class", ("published_at", DateFieldListFilter))
    list_select_related = ("run",)
    ordering = ("-published_at",)

    @admin.display(description="batch", ordering="published_at")
    def short_token(self, obj: RunBatch) -> str:
        return str(obj.token)[:8]

    @admin.display(description="run", ordering="run__started_at")
    def run_link(self, obj: RunBatch) -> str:
        url = reverse("admin:retention_run_change", args=[obj.run_id])
        return format_html('<a href="{}">{}</a>', url, str(obj.run_id)[:8])
