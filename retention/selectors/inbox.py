"""A governance owner's inbox: what waits for a person, and for whom.

Each kind of item is one rule, spelled here or in the selector it reuses:
versions submitted by someone else (four-eyes: never one's own), versions an
approver returned to their author, trips of the volume breaker holding a
class, records given up on after their attempts, report-only classes with
no dry run recent enough to enable enforcement from, classes of model rows
whose code no longer matches the version in force, and open erasure
requests, the earliest due first. The admin's index and dashboard render it
(``retention_inbox``); which sections a user sees is the interface's
business (permissions), so ``sections`` says which to read.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min

from retention.models import (
    BreakerTrip,
    DataClassMode,
    ErasureRequest,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
)
from retention.models.erasure import OPEN_STATES
from retention.rows.registry import row_class
from retention.selectors.breaker import breaker_trips_open
from retention.selectors.erasure import erasure_requests_by_due
from retention.selectors.policies import version_in_force
from retention.selectors.runs import dry_run_reviewable, run_last
from retention.selectors.version_changes import RegistrationDrift, class_registration_drift

SECTIONS = frozenset(
    {"waiting", "returned", "tripped", "failed", "stale_dry_runs", "drifted", "erasures"}
)


@dataclass(frozen=True, slots=True)
class FailedForReview:
    data_class: str
    count: int
    oldest_expiry: datetime | None


@dataclass(frozen=True, slots=True)
class StaleDryRun:
    """A report-only class nobody can enable enforcement for until a new dry run."""

    policy: Policy
    last_dry_run: Run | None  # the newest finished dry run covering it, if any


@dataclass(frozen=True, slots=True)
class Inbox:
    waiting: tuple[PolicyVersion, ...] = ()
    returned: tuple[PolicyVersion, ...] = ()
    tripped: tuple[BreakerTrip, ...] = ()
    failed: tuple[FailedForReview, ...] = ()
    stale_dry_runs: tuple[StaleDryRun, ...] = ()
    drifted: tuple[RegistrationDrift, ...] = ()
    erasures: tuple[ErasureRequest, ...] = ()  # annotated with ``is_overdue``

    @property
    def count(self) -> int:
        return (
            len(self.waiting)
            + len(self.returned)
            + len(self.tripped)
            + len(self.failed)
            + len(self.stale_dry_runs)
            + len(self.drifted)
            + len(self.erasures)
        )


def versions_waiting_for(user_id: int | None) -> tuple[PolicyVersion, ...]:
    """Submitted versions ``user_id`` did not write, the longest waiting first."""
    return tuple(
        PolicyVersion.objects.filter(status=PolicyVersionStatus.SUBMITTED)
        .exclude(author_id=user_id)
        .select_related("policy", "author")
        .order_by("submitted_at", "pk")
    )


def versions_returned_to(user_id: int | None) -> tuple[PolicyVersion, ...]:
    """``user_id``'s drafts an approver rejected, with the reason, the latest first."""
    return tuple(
        PolicyVersion.objects.filter(
            status=PolicyVersionStatus.DRAFT, author_id=user_id, rejected_at__isnull=False
        )
        .select_related("policy", "rejected_by")
        .order_by("-rejected_at", "pk")
    )


def failed_for_review() -> tuple[FailedForReview, ...]:
    rows = (
        RetentionRecord.objects.failed_for_review()
        .values("data_class")
        .annotate(n=Count("id"), oldest=Min("expires_at"))
        .order_by("data_class")
    )
    return tuple(FailedForReview(r["data_class"], r["n"], r["oldest"]) for r in rows)


def stale_dry_runs(*, now: datetime) -> tuple[StaleDryRun, ...]:
    """Report-only classes with a version in force and no dry run of the whole class
    finished within RETENTION_DRY_RUN_MAX_AGE (``dry_run_reviewable``)."""
    stale = []
    for policy in Policy.objects.filter(mode=DataClassMode.REPORT_ONLY).order_by("data_class"):
        if version_in_force(policy_id=policy.pk) is None:
            continue  # nothing a run could enforce yet: its first version waits instead
        if dry_run_reviewable(data_class=policy.data_class, now=now) is not None:
            continue
        last = run_last(policy.data_class, mode=RunMode.DRY_RUN, statuses=[RunStatus.FINISHED])
        stale.append(StaleDryRun(policy=policy, last_dry_run=last))
    return tuple(stale)


def registrations_drifted() -> tuple[RegistrationDrift, ...]:
    drifts = []
    for policy in Policy.objects.order_by("data_class"):
        if row_class(policy.data_class) is None:
            continue
        drift = class_registration_drift(policy)
        if drift is not None:
            drifts.append(drift)
    return tuple(drifts)


def erasures_open(*, now: datetime) -> tuple[ErasureRequest, ...]:
    return tuple(erasure_requests_by_due(now=now).filter(state__in=OPEN_STATES))


def governance_inbox(
    *, user_id: int | None, now: datetime, sections: Collection[str] = SECTIONS
) -> Inbox:
    """The items of ``sections`` (the interface leaves out what a user may not see)."""
    unknown = set(sections) - SECTIONS
    if unknown:
        raise ValueError(f"Unknown inbox sections: {', '.join(sorted(unknown))}")
    return Inbox(
        waiting=versions_waiting_for(user_id) if "waiting" in sections else (),
        returned=versions_returned_to(user_id) if "returned" in sections else (),
        tripped=tuple(breaker_trips_open()) if "tripped" in sections else (),
        failed=failed_for_review() if "failed" in sections else (),
        stale_dry_runs=stale_dry_runs(now=now) if "stale_dry_runs" in sections else (),
        drifted=registrations_drifted() if "drifted" in sections else (),
        erasures=erasures_open(now=now) if "erasures" in sections else (),
    )
