"""Retention records and deletion events: read-only, filterable, exportable.

Object keys are never shown, searched for display or exported: a key can
carry personal data (a file name) and the evidence must not leak it. A key
pasted into the search box is matched through its digest instead.
"""

from __future__ import annotations

import re

from django.contrib import admin
from django.contrib.admin import DateFieldListFilter
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from retention import services
from retention.admin.base import (
    CsvExportMixin,
    DataClassFilter,
    ModelT,
    ReadOnlyAdmin,
    RunIdFilter,
    TenantFilter,
    acting_user,
    report_refusal,
)
from retention.digest import key_digest
from retention.formatting import bytes_html
from retention.models import DeletionEvent, EventKind, RetentionRecord
from retention.selectors.evidence import row_subjects
from retention.services.policies import APPROVE_PERMISSION

_DIGEST = re.compile(r"^[0-9a-f]{64}$")
# The rows of a per-row page event listed on its page (up to a page of them).
ROWS_SHOWN = 100


def _search(queryset: QuerySet[ModelT], term: str, *, record_field: str) -> QuerySet[ModelT]:
    """A record id, a key digest, or an object key matched by its digest."""
    term = term.strip()
    if not term:
        return queryset
    if term.isdigit():
        return queryset.filter(**{record_field: int(term)})
    if _DIGEST.match(term.lower()):
        return queryset.filter(key_digest=term.lower())
    return queryset.filter(Q(key_digest=key_digest(term)))


@admin.register(RetentionRecord)
class RetentionRecordAdmin(CsvExportMixin[RetentionRecord], ReadOnlyAdmin[RetentionRecord]):
    list_display = (
        "id",
        "tenant_id",
        "data_class",
        "state",
        "created_at",
        "expires_at",
        "deleted_at",
        "attempts",
        "version",
    )
    list_filter = (
        "state",
        DataClassFilter,
        TenantFilter,
        ("expires_at", DateFieldListFilter),
        ("created_at", DateFieldListFilter),
        ("deleted_at", DateFieldListFilter),
    )
    list_select_related = ("policy_version__policy",)
    search_fields = ("=id", "=key_digest")
    search_help_text = "A record id, a key digest, or an object key (matched by its digest)."
    change_list_template = "admin/retention/audit_change_list.html"
    fields = (
        "id",
        "tenant_id",
        "data_class",
        "storage",
        "key_digest",
        "size",
        "policy_version",
        "created_at",
        "expires_at",
        "renewed_at",
        "state",
        "row_version",
        "attempts",
        "retryable",
        "next_attempt_at",
        "last_error",
        "lease_expires_at",
        "disposal_started_at",
        "deleted_at",
        "events_link",
    )
    readonly_fields = ("size", "events_link")
    export_fields = (
        "id",
        "tenant_id",
        "data_class",
        "storage",
        "key_digest",
        "size_bytes",
        "policy_version__policy__data_class",
        "policy_version__number",
        "created_at",
        "expires_at",
        "renewed_at",
        "state",
        "attempts",
        "retryable",
        "last_error",
        "deleted_at",
    )

    actions = ("retry_failed",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[RetentionRecord], search_term: str
    ) -> tuple[QuerySet[RetentionRecord], bool]:
        return _search(queryset, search_term, record_field="pk"), False

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_PERMISSION)

    @admin.action(permissions=["approve"], description="Retry deletion of selected failed records")
    def retry_failed(self, request: HttpRequest, queryset: QuerySet[RetentionRecord]) -> None:
        ids = list(queryset.values_list("pk", flat=True))
        reopened = report_refusal(
            self,
            request,
            lambda: services.record_failures_retry(
                record_ids=ids, by=acting_user(request), now=timezone.now()
            ),
        )
        if reopened is not None:
            skipped = len(ids) - reopened
            note = f"; {skipped} were not failed for good and were left alone" if skipped else ""
            self.message_user(
                request, f"{reopened} failed record(s) will be retried by the next run{note}."
            )

    @admin.display(description="policy version")
    def version(self, obj: RetentionRecord) -> str:
        return obj.policy_version.label

    @admin.display(description="key digest")
    def short_digest(self, obj: RetentionRecord) -> str:
        return obj.key_digest[:12] + "…"

    @admin.display(description="size", ordering="size_bytes")
    def size(self, obj: RetentionRecord) -> str:
        return bytes_html(obj.size_bytes)

    @admin.display(description="events")
    def events_link(self, obj: RetentionRecord) -> str:
        url = reverse("admin:retention_deletionevent_changelist")
        return format_html('<a href="{}?q={}">events of this record</a>', url, obj.pk)


@admin.register(DeletionEvent)
class DeletionEventAdmin(CsvExportMixin[DeletionEvent], ReadOnlyAdmin[DeletionEvent]):
    # The outcome comes early so it fits 1280 px; attempt and digest are on the event's page.
    list_display = (
        "id",
        "occurred_at",
        "outcome",
        "subject",
        "data_class",
        "tenant_id",
        "run_link",
        "policy",
    )
    list_filter = (
        "outcome",
        DataClassFilter,
        TenantFilter,
        RunIdFilter,
        ("occurred_at", DateFieldListFilter),
        "disposition",
    )
    search_fields = ("=record__id", "=key_digest")
    search_help_text = "A record id, a key digest, or an object key (matched by its digest)."
    change_list_template = "admin/retention/audit_change_list.html"
    export_fields = (
        "id",
        "occurred_at",
        "record_id",
        "run_id",
        "tenant_id",
        "data_class",
        "policy_key",
        "policy_version_number",
        "disposition",
        "outcome",
        "attempt",
        "reason",
        "key_digest",
        "expires_at",
        "idempotency_key",
    )
    readonly_fields = ("rows",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[DeletionEvent]:
        # A per-row page event's rows are read on its own page only (``rows``).
        return super().get_queryset(request).defer("row_subjects")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[DeletionEvent], search_term: str
    ) -> tuple[QuerySet[DeletionEvent], bool]:
        return _search(queryset, search_term, record_field="record_id"), False

    @admin.display(description="rows (per-row evidence)")
    def rows(self, obj: DeletionEvent) -> str:
        subjects = row_subjects(obj)
        if not subjects:
            return "—"
        shown = format_html_join(
            "", "<li>{} due {}</li>", ((s.key_digest, s.expires_at) for s in subjects[:ROWS_SHOWN])
        )
        more = f" (the first {ROWS_SHOWN} shown)" if len(subjects) > ROWS_SHOWN else ""
        return format_html(
            "{} row(s), each an event of its own: key digest and deadline{}<ol start=0>{}</ol>",
            len(subjects),
            more,
            shown,
        )

    @admin.display(description="about", ordering="record_id")
    def subject(self, obj: DeletionEvent) -> str:
        """A record by its id; database rows by their count (a page event stands for its rows)."""
        if obj.kind == EventKind.ROW:
            n = obj.row_count if obj.row_count is not None else 1
            return "1 row" if n == 1 else f"{n} rows"
        return f"record {obj.record_id}"

    @admin.display(description="policy")
    def policy(self, obj: DeletionEvent) -> str:
        return f"{obj.policy_key} version {obj.policy_version_number}"

    @admin.display(description="run")
    def run_link(self, obj: DeletionEvent) -> str:
        if obj.run_id is None:
            return "—"
        url = reverse("admin:retention_run_change", args=[obj.run_id])
        return format_html('<a href="{}">{}</a>', url, str(obj.run_id)[:8])

    @admin.display(description="key digest")
    def short_digest(self, obj: DeletionEvent) -> str:
        return obj.key_digest[:12] + "…"
