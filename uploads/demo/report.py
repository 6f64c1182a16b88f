"""The report step: the fate of every upload, then the request logs and the accounts.

Each part returns a check; the step ends with their verdict.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from django.core.management.base import CommandError

from retention.models import (
    DataClassMode,
    DeletionEvent,
    EventOutcome,
    LegalHold,
    Policy,
    RecordState,
)
from uploads.apps import CLOSED_ACCOUNTS, REQUEST_LOGS
from uploads.demo.checks import conclude, storage_check
from uploads.demo.classes import mode
from uploads.demo.formatting import Out, fmt, span
from uploads.demo.report_accounts import report_accounts
from uploads.demo.report_logs import report_request_logs
from uploads.models import Upload


def report(out: Out, err: Out, now: datetime) -> None:
    uploads = list(
        Upload.objects.select_related("retention_record__policy_version__policy").order_by(
            "data_class", "tenant_id", "created_at", "original_name"
        )
    )
    if not uploads:
        raise CommandError("No uploads: run `manage.py lethe_demo seed` first.")
    policies = {p.data_class: p for p in Policy.objects.all()}
    missing = [name for name in (REQUEST_LOGS, CLOSED_ACCOUNTS) if name not in policies]
    if missing:
        raise CommandError(
            f"No policy for {', '.join(missing)}: the demo data predates them; "
            "start from an empty database and seed again."
        )
    holds = list(LegalHold.objects.active().order_by("pk"))
    events: dict[int, list[DeletionEvent]] = defaultdict(list)
    for event in DeletionEvent.objects.filter(
        record_id__in=[u.retention_record_id for u in uploads]
    ).order_by("id"):
        if event.record_id is not None:
            events[event.record_id].append(event)

    out(f"Report at {fmt(now)}. Data classes:")
    for name, policy in sorted(policies.items()):
        out(f"  {name}: {mode(policy)}")
    out("Uploads (tracked files):")
    width = max(len(u.original_name) for u in uploads)
    totals: Counter[str] = Counter()
    for upload in uploads:
        kind, fate = _fate(upload, now, policies, holds, events)
        totals[kind] += 1
        out(
            f"  {upload.original_name:<{width}}  {upload.tenant_id:<7} "
            f"{upload.data_class:<17} uploaded {upload.created_at:%Y-%m-%d}  {fate}"
        )
    line = (
        f"Totals: deleted {totals['deleted']}, already absent {totals['absent']}, "
        f"kept {totals['kept']}"
    )
    for kind, label in (("failed", "failed"), ("in_flight", "being deleted")):
        if totals[kind]:
            line += f", {label} {totals[kind]}"
    out(line + ".")

    checks = [
        storage_check(uploads),
        report_request_logs(out, now, policies[REQUEST_LOGS]),
        report_accounts(out, now, policies[CLOSED_ACCOUNTS]),
    ]
    conclude(checks, out, err)


def _fate(
    upload: Upload,
    now: datetime,
    policies: dict[str, Policy],
    holds: list[LegalHold],
    events: dict[int, list[DeletionEvent]],
) -> tuple[str, str]:
    """What became of one upload: (kind, text)."""
    record = upload.retention_record
    if record.state == RecordState.DELETED:
        final = [
            e
            for e in events[record.pk]
            if e.outcome in (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT)
        ]
        if not final:
            return "deleted", f"deleted at {fmt(record.deleted_at)} (no receipt found)"
        event = final[-1]
        detail = (
            f"(expired {fmt(event.expires_at)}, "
            f"policy {event.policy_key} v{event.policy_version_number})"
        )
        if event.outcome == EventOutcome.ALREADY_ABSENT:
            return "absent", f"already absent, recorded at {fmt(event.occurred_at)} {detail}"
        return "deleted", f"deleted at {fmt(event.occurred_at)} {detail}"
    if record.state == RecordState.FAILED:
        reason = record.last_error or "no reason recorded"
        if record.retryable and record.next_attempt_at:
            reason += f" (retry due {fmt(record.next_attempt_at)})"
        return "failed", f"failed: {reason}"
    if record.state == RecordState.DELETING:
        return "in_flight", f"being deleted (claimed until {fmt(record.lease_expires_at)})"

    hold = (
        LegalHold.objects.covering(
            tenant_id=record.tenant_id, data_class=record.data_class, record_id=record.pk
        )
        .order_by("pk")
        .first()
        if holds
        else None
    )
    if record.expires_at > now:
        if record.renewed_at is not None:
            fate = (
                f"kept: renewed on {fmt(record.renewed_at)}, now expires {fmt(record.expires_at)}"
            )
        else:
            fate = f"kept: expires in {span(record.expires_at - now)} ({fmt(record.expires_at)})"
        if hold is not None:
            fate += f"; legal hold #{hold.pk} also applies"
        return "kept", fate
    if hold is not None:
        return "kept", f"kept: under legal hold #{hold.pk} ({hold.reason})"
    policy = policies.get(record.data_class)
    if policy is None or policy.mode != DataClassMode.ENFORCE:
        return "kept", f"kept: data class {record.data_class} is report-only"
    return "kept", f"kept: expired {fmt(record.expires_at)}, due at the next enforce run"
