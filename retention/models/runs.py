"""The run ledger, a queued run's batches, the shared rate gate and the single-flight leases."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    pass


class RunTrigger(models.TextChoices):
    SCHEDULE = "schedule", "Schedule"
    COMMAND = "command", "Command"
    API = "api", "API"
    # An erasure request's run, started on approval or by the watchdog.
    ERASURE = "erasure", "Erasure request"


class RunMode(models.TextChoices):
    DRY_RUN = "dry_run", "Dry run"
    ENFORCE = "enforce", "Enforce"
    # The store compared with the records (retention_reconcile); deletes nothing.
    RECONCILE = "reconcile", "Reconcile"
    # An approved erasure request executed: its frozen scope, whatever the age.
    ERASE = "erase", "Erase (an erasure request)"


# The modes that dispose of data: leases, liveness and the run audit apply to both.
DISPOSING_MODES = (RunMode.ENFORCE, RunMode.ERASE)


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    STOPPED = "stopped", "Stopped (limit or time budget reached)"
    PAUSED = "paused", "Paused (kill switch)"
    REFUSED = "refused", "Refused"
    ERROR = "error", "Error"
    ABANDONED = "abandoned", "Abandoned (lease expired)"


class RunExecutor(models.TextChoices):
    INLINE = "inline", "Inline (one process)"
    QUEUE = "queue", "Queued (django-q2 workers)"


RUN_COUNT_FIELDS = (
    "eligible",
    "claimed",
    "deleted",
    "already_absent",
    "skipped_held",
    "skipped_renewed",
    "deferred",
    "failed",
    "redacted",
    "skipped_protected",
    "tripped",
)


# A reconciliation's counts (mode "reconcile"), kept in its report: the
# findings, then the objects listed, the records compared, the orphans adopted.
RECONCILE_FINDINGS = ("orphans", "missing", "reappeared", "leftover_versions")
RECONCILE_COUNTS = (*RECONCILE_FINDINGS, "listed", "tracked", "adopted")


class Run(models.Model):
    """The durable ledger of one sweep, written before any work starts."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    trigger = models.CharField(max_length=20, choices=RunTrigger.choices)
    mode = models.CharField(max_length=20, choices=RunMode.choices)
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.RUNNING)
    status_reason = models.TextField(blank=True)
    data_classes = models.JSONField(default=list)
    tenant_id = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    limit = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    cutoff = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_owner = models.UUIDField(default=uuid.uuid4)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    executor = models.CharField(
        max_length=10, choices=RunExecutor.choices, default=RunExecutor.INLINE
    )
    # The cron slot a scheduled run was started for: unique, so a schedule
    # firing twice (two clusters, replayed missed slots) starts one run.
    schedule_slot = models.DateTimeField(null=True, blank=True, unique=True)
    # Queued runs: at most one dispatcher at a time, under this lease.
    dispatcher_owner = models.UUIDField(null=True, blank=True)
    dispatcher_expires_at = models.DateTimeField(null=True, blank=True)
    # Queued runs: no new claims after this instant (--max-seconds).
    deadline_at = models.DateTimeField(null=True, blank=True)

    eligible = models.PositiveIntegerField(default=0)
    claimed = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)
    already_absent = models.PositiveIntegerField(default=0)
    skipped_held = models.PositiveIntegerField(default=0)
    skipped_renewed = models.PositiveIntegerField(default=0)
    deferred = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    # Model rows: rows redacted, and rows a PROTECT relation kept from deletion.
    redacted = models.PositiveIntegerField(default=0, db_default=0)
    skipped_protected = models.PositiveIntegerField(default=0, db_default=0)
    # Records or rows the volume breaker kept from deletion in this run.
    tripped = models.PositiveIntegerField(default=0, db_default=0)
    retried = models.PositiveIntegerField(default=0)
    oldest_eligible_at = models.DateTimeField(null=True, blank=True)

    report = models.JSONField(default=dict, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    # Mode "erase": the request it executes.
    erasure = models.ForeignKey(
        "retention.ErasureRequest",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runs",
    )

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(mode=RunMode.DRY_RUN) | Q(deleted=0, already_absent=0),
                name="retention_run_dry_run_deletes_nothing",
            ),
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="retention_run_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(mode=RunMode.ERASE, erasure__isnull=False)
                | (~Q(mode=RunMode.ERASE) & Q(erasure__isnull=True)),
                name="retention_run_erase_has_request",
            ),
        ]

    def __str__(self) -> str:
        return f"Run {self.id} ({self.mode}, {self.status})"

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in RUN_COUNT_FIELDS}


class BatchState(models.TextChoices):
    QUEUED = "queued", "Published, not finished"
    DONE = "done", "Finished"
    RELEASED = "released", "Released unprocessed (kill switch)"
    UNPUBLISHED = "unpublished", "Could not be published"
    EXPIRED = "expired", "Lease expired before it finished"


class RunBatch(models.Model):
    """One page of a queued run, published as one django-q2 task.

    Its token is the lease owner of its rows; the task carries record ids
    and expected row versions, never object keys.
    """

    token = models.UUIDField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="batches")
    data_class = models.CharField(max_length=100)
    size = models.PositiveIntegerField()
    state = models.CharField(max_length=20, choices=BatchState.choices, default=BatchState.QUEUED)
    published_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    deliveries = models.PositiveIntegerField(default=0)
    # Items its claims took while the run's row was busy, not yet added to the
    # run's ``claimed``: the page's finalize moves them there, or the run's
    # close does if the worker died first.
    uncounted = models.PositiveIntegerField(default=0, db_default=0)

    class Meta:
        verbose_name_plural = "run batches"
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="retention_batch_inflight")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=BatchState.values), name="retention_batch_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Batch {self.token} of run {self.run_id} ({self.state})"


class RateGateState(models.Model):
    """The shared rate gate of one data class or storage (see retention.services.rate_gates).

    Times are seconds since the epoch on the database's clock, so workers on
    hosts with skewed clocks still share one schedule.
    """

    name = models.CharField(max_length=200, primary_key=True)
    # The instant from which the next reservation may start (GCRA's TAT).
    next_free_at = models.FloatField(default=0.0)
    # Multiplicative decrease after throttling; recovers linearly with time.
    factor = models.FloatField(default=1.0)
    throttled_at = models.FloatField(null=True, blank=True)
    throttle_count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"Rate gate {self.name}"


class RunLease(models.Model):
    """Single-flight: at most one enforcing run per data class holds this."""

    data_class = models.CharField(max_length=100, primary_key=True)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    owner = models.UUIDField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Lease on {self.data_class}"
