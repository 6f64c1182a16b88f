"""The data map in the admin: the governance owner's view of what is governed (SPEC §2).

The same map as ``retention_datamap``, read by ``retention.selectors.datamap``:
each governed data class links to its policy and its last run. ``?format=json``
gives the ``--json`` object, ``?format=csv`` one line per model and data
class, tracked class and store, for the records of processing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.utils import timezone

from retention.csvstream import csv_response
from retention.selectors.datamap import (
    EXEMPT,
    GOVERNED,
    INTERNAL,
    UNGOVERNED,
    DataMap,
    Governance,
    data_map,
)
from retention.selectors.datamap_export import data_map_as_json, period_text, rows_text, when_text

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    from retention.models import Policy

CSV_HEADER = (
    "kind",
    "model",
    "table",
    "status",
    "reason",
    "note",
    "personal_fields",
    "rows",
    "rows_estimated",
    "data_class",
    "policy_version",
    "retention_period",
    "disposition",
    "on_erasure",
    "subject_field",
    "tenant_field",
    "oldest_row",
    "last_run",
    "last_run_at",
    "storage",
    "last_reconciled_at",
    "orphans",
)
SECTIONS = (
    (GOVERNED, "Governed", "A registered data class of model rows covers each."),
    (EXEMPT, "Exempt", "Named in RETENTION_EXEMPT_MODELS, each with its reason."),
    (UNGOVERNED, "Ungoverned", "Nothing governs these rows."),
    (INTERNAL, "Internal", "Lethe's and Django's bookkeeping."),
)


def _governance_cells(g: Governance | None) -> list[str]:
    if g is None:
        return [""] * 10
    run = g.last_run
    return [
        g.data_class,
        str(g.version) if g.version is not None else g.note,
        period_text(g) if g.retention_period is not None else "",
        g.disposition or "",
        g.on_erasure or "—",
        g.subject_field or "—",
        g.tenant_field or "",
        when_text(g.oldest_row_at) if g.oldest_row_at is not None else "",
        run.run_id if run is not None else "",
        when_text(run.finished_at or run.started_at) if run is not None else "",
    ]


def csv_rows(found: DataMap) -> Iterator[list[str]]:
    """The map as CSV lines: models (one per data class), tracked classes, stores."""
    for e in found.models:
        fields = "; ".join(f"{p.name}: {p.why}" for p in e.personal_fields)
        head = [
            "model",
            e.label,
            e.table,
            e.status,
            e.reason,
            e.note,
            fields,
            "" if e.rows is None else str(e.rows),
            "yes" if e.rows_estimated else "no",
        ]
        for g in e.governance or (None,):
            yield [*head, *_governance_cells(g), "", "", ""]
    for t in found.tracked:
        records = "" if t.records is None else str(t.records)
        estimated = "yes" if t.records_estimated else "no"
        head = ["tracked objects", "", "", GOVERNED, "", "", "", records, estimated]
        yield [*head, *_governance_cells(t.governance), t.storage, "", ""]
    for s in found.stores:
        r = s.reconciliation
        yield [
            "store",
            *[""] * 7,
            "",
            *[""] * 10,
            s.alias,
            when_text(r.finished_at) if r is not None else "never",
            "" if s.orphans is None else str(s.orphans),
        ]


def datamap_view(model_admin: ModelAdmin[Policy], request: HttpRequest) -> HttpResponseBase:
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    now = timezone.now()
    try:
        found = data_map(now=now)
    except ImproperlyConfigured as exc:
        context = {
            **model_admin.admin_site.each_context(request),
            "title": "Data map",
            "opts": model_admin.opts,
            "error": str(exc),
        }
        return TemplateResponse(request, "admin/retention/datamap.html", context)
    wanted = request.GET.get("format")
    if wanted == "json":
        return JsonResponse(data_map_as_json(found), json_dumps_params={"indent": 2})
    if wanted == "csv":
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        return csv_response(
            CSV_HEADER, csv_rows(found), filename=f"data-map-{stamp}.csv", rows_per_chunk=200
        )
    sections: list[dict[str, Any]] = [
        {
            "status": status,
            "title": title,
            "help": help_text,
            "entries": [
                {
                    "entry": e,
                    "rows": rows_text(e.rows, estimated=e.rows_estimated),
                    "governance": [
                        {
                            "g": g,
                            "period": period_text(g),
                            "oldest": when_text(g.oldest_row_at),
                            "last_run_at": (
                                when_text(g.last_run.finished_at or g.last_run.started_at)
                                if g.last_run is not None
                                else ""
                            ),
                        }
                        for g in e.governance
                    ],
                }
                for e in found.models
                if e.status == status
            ],
        }
        for status, title, help_text in SECTIONS
    ]
    tracked = [
        {
            "t": t,
            "records": rows_text(t.records, estimated=t.records_estimated),
            "period": period_text(t.governance),
        }
        for t in found.tracked
    ]
    stores = [
        {
            "s": s,
            "reconciled_at": (
                when_text(s.reconciliation.finished_at) if s.reconciliation is not None else ""
            ),
        }
        for s in found.stores
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Data map",
        "opts": model_admin.opts,
        "map": found,
        "generated_at": when_text(found.generated_at),
        "sections": sections,
        "tracked": tracked,
        "stores": stores,
        "ungoverned": found.ungoverned_personal,
        "can_view_runs": request.user.has_perm("retention.view_run"),
    }
    return TemplateResponse(request, "admin/retention/datamap.html", context)
