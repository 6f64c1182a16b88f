"""A run's page as a governance owner reads it: what happened to each class first.

The page leads with a table per data class (deleted, redacted, kept and why,
failed), read from the run's events, and links to those events and to the
run's report. The engine's own fields (leases, the dispatcher, the schedule
slot) stay on the page for an engineer, folded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from retention.models import EventOutcome, Run, RunMode
from retention.selectors.runs import run_outcomes_by_class

if TYPE_CHECKING:
    from django_stubs_ext import FieldsetSpec

# The columns of the per-class table: what a person asks first, then the rest.
OUTCOME_COLUMNS = (
    (EventOutcome.DELETED, "deleted"),
    (EventOutcome.REDACTED, "redacted"),
    (EventOutcome.ALREADY_ABSENT, "not found at deletion time"),
    (EventOutcome.SKIPPED_HELD, "kept: legal hold"),
    (EventOutcome.SKIPPED_RENEWED, "kept: renewed"),
    (EventOutcome.SKIPPED_PROTECTED, "kept: a related row protects it"),
    (EventOutcome.RETRY_SCHEDULED, "retry scheduled"),
    (EventOutcome.FAILED, "failed"),
)
ENGINE_FIELDS = (
    "executor",
    "lease_expires_at",
    "dispatcher_owner",
    "dispatcher_expires_at",
    "schedule_slot",
    "deadline_at",
    "limit",
    "claimed",
    "retried",
    "tripped",
)


class RunPageMixin(admin.ModelAdmin[Run]):
    """The run's change page: the outcome per class, links, then the ledger's fields."""

    def get_fieldsets(self, request: HttpRequest, obj: Run | None = None) -> FieldsetSpec:
        return [
            (None, {"fields": ["outcome_by_class", "see_also"]}),
            (
                "The run",
                {
                    "fields": [
                        "mode",
                        "trigger",
                        "status",
                        "status_reason",
                        "classes",
                        "tenant_id",
                        "started_at",
                        "finished_at",
                        "cutoff",
                        "oldest_eligible_at",
                        "erasure",
                        "reviewed_by",
                        "reviewed_at",
                    ]
                },
            ),
            (
                "Totals",
                {
                    "fields": [
                        "eligible",
                        "deleted",
                        "redacted",
                        "already_absent",
                        "skipped_held",
                        "skipped_renewed",
                        "skipped_protected",
                        "deferred",
                        "failed",
                    ]
                },
            ),
            (
                "Engine details (for engineers)",
                {"classes": ["collapse"], "fields": list(ENGINE_FIELDS)},
            ),
        ]

    @admin.display(description="what happened, per data class")
    def outcome_by_class(self, obj: Run) -> SafeString:
        found = run_outcomes_by_class(obj.pk)
        if obj.mode == RunMode.DRY_RUN:
            return format_html("{}", "A dry run deletes nothing: its report says what it would.")
        if not found:
            return format_html("{}", "Nothing was deleted, redacted or kept by this run.")
        header = format_html_join("", "<th scope='col'>{}</th>", ((t,) for _, t in OUTCOME_COLUMNS))
        body = format_html_join(
            "",
            "<tr><th scope='row'>{}</th>{}</tr>",
            (
                (
                    name,
                    format_html_join(
                        "", "<td>{}</td>", ((outcomes.get(o, 0),) for o, _ in OUTCOME_COLUMNS)
                    ),
                )
                for name, outcomes in sorted(found.items())
            ),
        )
        return format_html(
            '<table class="retention-run-outcomes"><thead><tr><th scope="col">data class</th>'
            "{}</tr></thead><tbody>{}</tbody></table>",
            header,
            body,
        )

    @admin.display(description="see also")
    def see_also(self, obj: Run) -> SafeString:
        events = reverse("admin:retention_deletionevent_changelist") + f"?run={obj.pk}"
        links = [format_html('<a href="{}" class="retention-run-events">its events</a>', events)]
        report = reverse("admin:retention_run_report", args=[obj.pk])
        links.append(
            format_html('<a href="{}" class="retention-run-report">its report</a>', report)
        )
        if obj.erasure_id is not None:
            url = reverse("admin:retention_erasurerequest_change", args=[obj.erasure_id])
            links.append(format_html('<a href="{}">the erasure request</a>', url))
        return format_html_join(" · ", "{}", ((link,) for link in links))


def class_words(data_classes: Any, *, at_most: int | None = None) -> str:
    """A run's classes as words: "customers.closed, idv.photo" ("and 2 more" past ``at_most``)."""
    names = [str(name) for name in data_classes or ()]
    if at_most is not None and len(names) > at_most:
        return ", ".join(names[:at_most]) + f" and {len(names) - at_most} more"
    return ", ".join(names) or "—"


def sample_with_ages(run: Run, sample: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A dry run's sample with each item's age when the run measured it (where known).

    A record's size is None when the host gave none, and in a report stored
    before sizes were sampled: both read "not recorded".
    """
    shown = []
    for item in sample:
        created = parse_datetime(item.get("created_at") or "")
        age = run.started_at - created if created is not None else None
        shown.append({**item, "age": age, "size_bytes": item.get("size_bytes")})
    return shown
