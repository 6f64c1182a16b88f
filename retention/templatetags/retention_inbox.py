"""``{% retention_inbox %}``: the governance owner's inbox on the admin index and dashboard.

What waits comes from ``retention.selectors.inbox``; this says it in words,
leaves out what the user may not see or do, and links each item to the page
where it is acted on (the version's review, the trip's release, the failed
records, the class's enable page, the draft that adopts a registration, the
erasure request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.template import Context
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from retention.conf import settings
from retention.durations import approximate_duration, format_duration
from retention.models import ErasureRequest
from retention.reporting import human
from retention.selectors.breaker import trip_summary
from retention.selectors.inbox import Inbox, StaleDryRun, governance_inbox

register = template.Library()

APPROVE = "retention.approve_policyversion"


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str  # for styling and tests: waiting, returned, tripped, ...
    title: str
    detail: str
    url: str
    action: str  # the link's words: what the page lets one do
    urgent: bool = False


def _sections(user: Any) -> set[str]:
    """The sections ``user`` may see, by the permissions their actions need."""
    sections = set()
    if user.has_perm(APPROVE):
        sections |= {"waiting", "stale_dry_runs"}
    if user.has_perm("retention.change_policyversion"):
        sections.add("returned")
    if user.has_perm("retention.view_breakertrip"):
        sections.add("tripped")
    if user.has_perm("retention.view_retentionrecord"):
        sections.add("failed")
    if user.has_perm("retention.add_policyversion"):
        sections.add("drifted")
    if user.has_perm("retention.view_erasurerequest"):
        sections.add("erasures")
    return sections


def _whom(request: ErasureRequest) -> str:
    """As the erasure admin says it: never the subject's id, its digest's first characters."""
    subject = f"subject {request.subject_digest[:12]}…" if request.subject_digest else ""
    tenant = f"tenant {request.tenant_id}" if request.tenant_id else ""
    return " in ".join(part for part in (subject, tenant) if part)


def _stale_detail(item: StaleDryRun, now: Any) -> str:
    max_age = format_duration(settings.DRY_RUN_MAX_AGE)
    last = item.last_dry_run
    if last is None or last.finished_at is None:
        return f"no dry run yet; enabling enforcement needs one from the last {max_age}"
    age = now - last.finished_at
    if age <= settings.DRY_RUN_MAX_AGE:
        return (
            f"its last dry run ({human(last.finished_at)}) was narrowed to a tenant, a limit "
            "or some records; enabling enforcement needs one of the whole class"
        )
    return (
        f"its last dry run finished {approximate_duration(age)} ago ({human(last.finished_at)}); "
        f"enabling enforcement needs one from the last {max_age}"
    )


def inbox_entries(inbox: Inbox, *, user: Any, now: Any) -> list[Entry]:
    entries = []
    for version in inbox.waiting:
        entries.append(
            Entry(
                "waiting",
                f"{version.label} waits for your approval",
                f"written by {version.author.get_username()}, submitted "
                f"{human(version.submitted_at)}",
                reverse("admin:retention_policyversion_review", args=[version.pk]),
                "Review",
            )
        )
    for version in inbox.returned:
        by = version.rejected_by.get_username() if version.rejected_by else "an approver"
        entries.append(
            Entry(
                "returned",
                f"{version.label} returned to you: {version.rejection_reason}",
                f"by {by}, {human(version.rejected_at)}; change the draft and submit it again",
                reverse("admin:retention_policyversion_change", args=[version.pk]),
                "Open the draft",
                urgent=True,
            )
        )
    may_release = user.has_perm(APPROVE)
    for trip in inbox.tripped:
        page = "release" if may_release else "change"
        entries.append(
            Entry(
                "tripped",
                f"{trip.data_class} is held by the volume breaker",
                f"tripped {human(trip.tripped_at)}: {trip_summary(trip.limit, trip.figures or {})}",
                reverse(f"admin:retention_breakertrip_{page}", args=[trip.pk]),
                "Review and release" if may_release else "Review",
                urgent=True,
            )
        )
    for failed in inbox.failed:
        noun = "record" if failed.count == 1 else "records"
        query = urlencode(
            {"state__exact": "failed", "retryable__exact": "0", "data_class": failed.data_class}
        )
        entries.append(
            Entry(
                "failed",
                f"{failed.count} {noun} of {failed.data_class} failed and wait for review",
                "given up on after their attempts; the oldest expired "
                f"{human(failed.oldest_expiry)}",
                f"{reverse('admin:retention_retentionrecord_changelist')}?{query}",
                "See the records",
                urgent=True,
            )
        )
    for stale in inbox.stale_dry_runs:
        entries.append(
            Entry(
                "stale_dry_run",
                f"{stale.policy.data_class} is report-only: no recent dry run to enable from",
                _stale_detail(stale, now),
                reverse("admin:retention_policy_enable", args=[stale.policy.pk]),
                "Enable enforcement…",
            )
        )
    for drift in inbox.drifted:
        query = urlencode({"data_class": drift.data_class})
        entries.append(
            Entry(
                "drifted",
                f"{drift.data_class}: the code's registration no longer matches "
                f"v{drift.version.number}",
                "no run disposes of its rows until a version that adopts the registration "
                "in the code is approved",
                f"{reverse('admin:retention_policyversion_add')}?{query}",
                "Draft a version that adopts it",
                urgent=True,
            )
        )
    for request in inbox.erasures:
        overdue = bool(getattr(request, "is_overdue", False))
        entries.append(
            Entry(
                "erasure",
                f"Erasure of {_whom(request)}: {request.get_state_display().lower()}",
                f"{'OVERDUE: was ' if overdue else ''}due {human(request.due_at)}",
                reverse("admin:retention_erasurerequest_change", args=[request.pk]),
                "Open the request",
                urgent=overdue,
            )
        )
    return entries


@register.inclusion_tag("retention/admin/inbox.html", takes_context=True)
def retention_inbox(context: Context) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_active or not user.is_staff:
        return {"shown": False}
    sections = _sections(user)
    if not sections:
        return {"shown": False}
    now = timezone.now()
    inbox = governance_inbox(user_id=user.pk, now=now, sections=sections)
    return {"shown": True, "entries": inbox_entries(inbox, user=user, now=now)}
