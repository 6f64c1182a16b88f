"""Single flight: the run lease per data class.

An enforcing run takes the lease of every class it covers, or none. The
lease is renewed while the run works and expires when its process dies; the
next trigger then marks the dead run ``abandoned`` and takes over. Renewing
reports a lease that was taken over, so the run stops instead of sweeping on
beside its successor.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from retention.conf import settings
from retention.models import DISPOSING_MODES, Run, RunLease, RunStatus

RUN_LEASE_LOST = "run lease lost"


def runs_abandon_stale(now: datetime) -> None:
    """Mark enforcing and erase runs whose lease lapsed (their process died) abandoned."""
    Run.objects.filter(
        status=RunStatus.RUNNING, mode__in=DISPOSING_MODES, lease_expires_at__lt=now
    ).update(status=RunStatus.ABANDONED, status_reason="lease expired", finished_at=now)


def run_leases_acquire(run: Run, now: datetime) -> str | None:
    """Take every class's lease or none; return the holder's run id on conflict."""
    expires = now + timedelta(seconds=settings.RUN_LEASE_SECONDS)
    with transaction.atomic():
        for data_class in sorted(run.data_classes):
            RunLease.objects.get_or_create(data_class=data_class)
        leases = list(
            RunLease.objects.select_for_update()
            .filter(data_class__in=run.data_classes)
            .order_by("data_class")
        )
        for lease in leases:
            if lease.owner is not None and lease.expires_at and lease.expires_at > now:
                transaction.set_rollback(True)
                return str(lease.run_id)
        RunLease.objects.filter(data_class__in=run.data_classes).update(
            run=run, owner=run.lease_owner, expires_at=expires
        )
        Run.objects.filter(pk=run.pk).update(lease_expires_at=expires)
    return None


def run_leases_renew(run: Run, now: datetime, *, extra_seconds: float = 0.0) -> str | None:
    """Extend the run's class leases; say what was lost (None: all still ours).

    A lease is lost when another trigger took it over after it lapsed, or
    when the run itself was marked abandoned meanwhile.
    """
    expires = now + timedelta(seconds=settings.RUN_LEASE_SECONDS + extra_seconds)
    kept = Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(lease_expires_at=expires)
    held = RunLease.objects.filter(owner=run.lease_owner).update(expires_at=expires)
    if not kept or held < len(run.data_classes):
        return RUN_LEASE_LOST
    return None


def run_leases_release(run: Run) -> None:
    RunLease.objects.filter(owner=run.lease_owner).update(run=None, owner=None, expires_at=None)
