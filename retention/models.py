"""The deletion contract as tables (SPEC §2).

Invariants that must never break live in the database as constraints, not
only in services: one approved version per policy, an approver who is not the
author, one event per idempotency key, states from a closed set.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Exists, Lookup, OuterRef, Q

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler

data_class_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9._-]*$",
    "A data class is lower-case letters, digits, '.', '_' or '-', e.g. 'idv.photo'.",
)


class DataClassMode(models.TextChoices):
    REPORT_ONLY = "report_only", "Report only"
    ENFORCE = "enforce", "Enforce"


class Policy(models.Model):
    """One data class and the enforcement mode it is in.

    The rules themselves live in immutable, numbered PolicyVersions.
    """

    data_class = models.CharField(max_length=100, unique=True, validators=[data_class_validator])
    description = models.TextField(blank=True)
    mode = models.CharField(
        max_length=20, choices=DataClassMode.choices, default=DataClassMode.REPORT_ONLY
    )
    mode_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    mode_changed_at = models.DateTimeField(null=True, blank=True)
    reviewed_dry_run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "policies"
        ordering = ["data_class"]
        constraints = [
            models.CheckConstraint(
                condition=Q(mode__in=DataClassMode.values), name="retention_policy_mode_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.data_class

    @property
    def key(self) -> str:
        return self.data_class


class PolicyVersionStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    APPROVED = "approved", "Approved (in force)"
    SUPERSEDED = "superseded", "Superseded"
    RETIRED = "retired", "Retired"


class Disposition(models.TextChoices):
    DELETE = "delete", "Delete"
    REDACT = "redact", "Redact (database records)"


class PolicyVersion(models.Model):
    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(
        max_length=20, choices=PolicyVersionStatus.choices, default=PolicyVersionStatus.DRAFT
    )
    retention_period = models.DurationField()
    safety_margin = models.DurationField(default=timedelta(0))
    disposition = models.CharField(
        max_length=20, choices=Disposition.choices, default=Disposition.DELETE
    )
    erase_all_versions = models.BooleanField(
        default=False, help_text="On versioned buckets, delete every version of the exact key."
    )
    batch_size = models.PositiveIntegerField(default=500)
    rate_limit = models.FloatField(
        null=True, blank=True, help_text="Deletes per second; empty means unpaced."
    )
    max_attempts = models.PositiveIntegerField(null=True, blank=True)
    owner = models.CharField(max_length=200, blank=True)
    locked = models.BooleanField(
        default=False, help_text="A locked policy can only be lengthened, never shortened."
    )
    notes = models.TextField(blank=True)

    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    submitted_at = models.DateTimeField(null=True, blank=True)
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["policy", "-number"]
        permissions = [
            ("approve_policyversion", "Can approve policy versions"),
            ("retire_policyversion", "Can retire policy versions"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["policy", "number"], name="retention_pv_unique_number"),
            models.UniqueConstraint(
                fields=["policy"],
                condition=Q(status=PolicyVersionStatus.APPROVED),
                name="retention_pv_one_approved_per_policy",
            ),
            models.CheckConstraint(
                condition=Q(approver__isnull=True) | ~Q(approver=models.F("author")),
                name="retention_pv_four_eyes",
            ),
            models.CheckConstraint(
                condition=~Q(status=PolicyVersionStatus.APPROVED)
                | (Q(approver__isnull=False) & Q(approved_at__isnull=False)),
                name="retention_pv_approved_has_approver",
            ),
            models.CheckConstraint(
                condition=Q(status__in=PolicyVersionStatus.values), name="retention_pv_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(retention_period__gte=timedelta(0))
                & Q(safety_margin__gte=timedelta(0)),
                name="retention_pv_durations_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(batch_size__gte=1) & Q(batch_size__lte=10000),
                name="retention_pv_batch_size_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.policy.data_class} v{self.number} ({self.status})"


class RecordState(models.TextChoices):
    ACTIVE = "active", "Active"
    DELETING = "deleting", "Deleting"
    DELETED = "deleted", "Deleted"
    FAILED = "failed", "Failed"


class HoldQuerySet(models.QuerySet["LegalHold"]):
    def active(self) -> HoldQuerySet:
        return self.filter(released_at__isnull=True)

    def covering(
        self,
        *,
        tenant_id: Any = None,
        data_class: Any = None,
        record_id: Any = None,
    ) -> HoldQuerySet:
        """Active holds that protect a record with these values (or OuterRef expressions).

        The one spelling of hold coverage: a hold protects every record that
        matches all of its non-empty scopes. An argument left None does not
        narrow the match (any value of it).
        """
        qs = self.active()
        if tenant_id is not None:
            qs = qs.filter(Q(tenant_id__isnull=True) | Q(tenant_id=tenant_id))
        if data_class is not None:
            qs = qs.filter(Q(data_class__isnull=True) | Q(data_class=data_class))
        if record_id is not None:
            qs = qs.filter(Q(record__isnull=True) | Q(record_id=record_id))
        return qs


class LegalHold(models.Model):
    """Protects every record matching all of its non-empty scopes."""

    # NULL means "any": a scope left empty does not narrow the hold.
    tenant_id = models.CharField(max_length=100, null=True, blank=True, db_index=True)  # noqa: DJ001
    data_class = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    record = models.ForeignKey(
        "RetentionRecord", null=True, blank=True, on_delete=models.PROTECT, related_name="holds"
    )
    reason = models.TextField()
    placed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    placed_at = models.DateTimeField()
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.TextField(blank=True)

    objects = HoldQuerySet.as_manager()

    class Meta:
        ordering = ["-placed_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(tenant_id__isnull=False)
                | Q(data_class__isnull=False)
                | Q(record__isnull=False),
                name="retention_hold_has_scope",
            ),
            models.CheckConstraint(
                condition=Q(released_at__isnull=True, released_by__isnull=True)
                | Q(released_at__isnull=False, released_by__isnull=False),
                name="retention_hold_release_complete",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="retention_hold_has_reason"),
        ]

    def __str__(self) -> str:
        return f"Hold #{self.pk} ({self.scope_label})"

    @property
    def scope_label(self) -> str:
        parts = []
        if self.tenant_id:
            parts.append(f"tenant={self.tenant_id}")
        if self.data_class:
            parts.append(f"data_class={self.data_class}")
        if self.record_id:
            parts.append(f"record={self.record_id}")
        return ", ".join(parts)

    def scope_q(self) -> Q:
        """The records this hold's scope covers (released or not)."""
        q = Q()
        if self.tenant_id:
            q &= Q(tenant_id=self.tenant_id)
        if self.data_class:
            q &= Q(data_class=self.data_class)
        if self.record_id:
            q &= Q(pk=self.record_id)
        return q


def active_holds_matching(outer: str = "") -> Exists:
    """An EXISTS over the active holds that cover the record at ``outer``."""
    prefix = f"{outer}__" if outer else ""
    return Exists(
        LegalHold.objects.covering(
            tenant_id=OuterRef(f"{prefix}tenant_id"),
            data_class=OuterRef(f"{prefix}data_class"),
            record_id=OuterRef(f"{prefix}pk"),
        )
    )


class RecordQuerySet(models.QuerySet["RetentionRecord"]):
    def held(self) -> RecordQuerySet:
        return self.filter(active_holds_matching())

    def not_held(self) -> RecordQuerySet:
        return self.filter(~active_holds_matching())

    def expired(self, cutoff: datetime) -> RecordQuerySet:
        return self.filter(expires_at__lte=cutoff)

    def pending(self) -> RecordQuerySet:
        """Not deleted and not given up on: what a run still owes.

        Active, deleting, or failed but retryable; the check constraints make
        that the due index's predicate, spelled so the planner can use it.
        """
        return self.filter(deleted_at__isnull=True, retryable=True)

    def claimable(self, *, cutoff: datetime, now: datetime) -> RecordQuerySet:
        """Rows a claim may take now: expired, and free or with a dead lease."""
        return (
            self.pending()
            .filter(expires_at__lte=cutoff)
            .filter(
                Q(state=RecordState.ACTIVE)
                | Q(state=RecordState.FAILED, retryable=True, next_attempt_at__lte=now)
                | Q(state=RecordState.DELETING, lease_expires_at__lte=now)
            )
        )


class RetentionRecord(models.Model):
    """The expiry row of one tracked object; ``expires_at`` is set once."""

    tenant_id = models.CharField(max_length=100)
    data_class = models.CharField(max_length=100)
    storage = models.CharField(max_length=100, default="default")
    object_key = models.CharField(max_length=1024)
    key_digest = models.CharField(max_length=64, db_index=True)
    policy_version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    state = models.CharField(max_length=20, choices=RecordState.choices, default=RecordState.ACTIVE)
    row_version = models.PositiveIntegerField(default=1)
    lease_owner = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Set once a claimer passed the re-check and may have touched storage.
    # A renewal is refused from then on, and a later claimer probes first.
    disposal_started_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    retryable = models.BooleanField(default=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    renewed_at = models.DateTimeField(null=True, blank=True)

    objects = RecordQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["storage", "object_key"], name="retention_record_key_never_reused"
            ),
            models.CheckConstraint(
                condition=Q(state__in=RecordState.values), name="retention_record_state_valid"
            ),
            models.CheckConstraint(
                condition=~Q(state=RecordState.DELETING)
                | Q(lease_owner__isnull=False, lease_expires_at__isnull=False),
                name="retention_record_deleting_has_lease",
            ),
            models.CheckConstraint(
                condition=~Q(state=RecordState.DELETED) | Q(deleted_at__isnull=False),
                name="retention_record_deleted_has_time",
            ),
            # The converse two, so that "not deleted_at and retryable" is
            # exactly "active, deleting, or failed but retryable" (the due
            # index's predicate, on columns a claim never writes).
            models.CheckConstraint(
                condition=Q(state=RecordState.DELETED) | Q(deleted_at__isnull=True),
                name="retention_record_deleted_time_only_when_deleted",
            ),
            models.CheckConstraint(
                condition=Q(state__in=[RecordState.FAILED, RecordState.DELETED])
                | Q(retryable=True),
                name="retention_record_given_up_only_when_failed",
            ),
            models.CheckConstraint(
                condition=Q(expires_at__gte=models.F("created_at")),
                name="retention_record_expires_after_creation",
            ),
        ]
        indexes = [
            # The claim walks this index in (expires_at, id) order and stops
            # after one page, so its cost does not grow with the table. The
            # data class leads: a claim takes one class, and must not walk
            # other classes' due rows first (a report-only class keeps all
            # of its expired rows). Deleted rows and rows failed for review
            # (waiting for a person, not a claim) are left out, so they do not
            # pile up in every walk. The predicate names no column a claim
            # writes: with the table's free space (fillfactor, migration
            # 0006) PostgreSQL then claims a row without touching any index.
            models.Index(
                fields=["data_class", "expires_at", "id"],
                condition=Q(deleted_at__isnull=True, retryable=True),
                name="retention_record_due",
            ),
            models.Index(fields=["tenant_id", "data_class"], name="retention_record_tenant"),
        ]

    def __str__(self) -> str:
        return f"Record #{self.pk} ({self.data_class}, tenant {self.tenant_id}, {self.state})"


class AnyOf(Lookup):
    """``id__any_of=[...]``: ``= ANY(array)`` on PostgreSQL, ``IN (...)`` elsewhere.

    The engine filters pages of up to 1,000 ids several times per page; one
    array parameter costs far less to build, send and plan than 1,000.
    """

    lookup_name = "any_of"

    def get_prep_lookup(self) -> list[int]:
        return [int(value) for value in self.rhs]

    # django-stubs types SQL parameters as str | int; the PostgreSQL array is a list.
    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper
    ) -> tuple[str, list[str | int | list[int]]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = list(self.rhs)
        if not values:
            raise EmptyResultSet
        if connection.vendor == "postgresql":
            return f"{lhs} = ANY(%s)", [*lhs_params, values]
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [*lhs_params, *values]


RetentionRecord._meta.get_field("id").register_lookup(AnyOf)


class RunTrigger(models.TextChoices):
    SCHEDULE = "schedule", "Schedule"
    COMMAND = "command", "Command"
    API = "api", "API"


class RunMode(models.TextChoices):
    DRY_RUN = "dry_run", "Dry run"
    ENFORCE = "enforce", "Enforce"


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
)


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
    retried = models.PositiveIntegerField(default=0)
    oldest_eligible_at = models.DateTimeField(null=True, blank=True)

    report = models.JSONField(default=dict, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)

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

    class Meta:
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
    """The shared rate gate of one data class or storage (see retention.pacing).

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


class EventOutcome(models.TextChoices):
    DELETED = "deleted", "Deleted"
    ALREADY_ABSENT = "already_absent", "Already absent"
    SKIPPED_HELD = "skipped_held", "Skipped: legal hold"
    SKIPPED_RENEWED = "skipped_renewed", "Skipped: renewed"
    RETRY_SCHEDULED = "retry_scheduled", "Transient error, retry scheduled"
    FAILED = "failed", "Failed"


class DeletionEvent(models.Model):
    """Append-only evidence of one decision about one record.

    Carries a keyed digest of the object key, never the key or a URL.
    """

    id = models.BigAutoField(primary_key=True)
    idempotency_key = models.CharField(max_length=200, unique=True)
    # No index of its own: retention_event_record (record, id) serves every
    # look-up by record, and each index costs every page of events a write.
    record = models.ForeignKey(
        RetentionRecord, on_delete=models.PROTECT, related_name="events", db_index=False
    )
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    tenant_id = models.CharField(max_length=100)
    data_class = models.CharField(max_length=100)
    policy_version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    policy_key = models.CharField(max_length=100)
    policy_version_number = models.PositiveIntegerField()
    disposition = models.CharField(max_length=20, choices=Disposition.choices)
    outcome = models.CharField(max_length=20, choices=EventOutcome.choices)
    attempt = models.PositiveIntegerField()
    reason = models.TextField(blank=True)
    key_digest = models.CharField(max_length=64)
    expires_at = models.DateTimeField()
    occurred_at = models.DateTimeField()
    # Tamper evidence: the leaf hash of this event, and its place in a batch.
    batch = models.ForeignKey(
        "EventBatch", null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    leaf_index = models.PositiveIntegerField(null=True, blank=True)
    event_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["tenant_id", "occurred_at"], name="retention_event_tenant"),
            models.Index(fields=["record", "id"], name="retention_event_record"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(outcome__in=EventOutcome.values), name="retention_event_outcome_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Event #{self.pk} record {self.record_id}: {self.outcome}"


class EventBatch(models.Model):
    """The events recorded together, hashed into a Merkle root and chained."""

    seq = models.PositiveBigIntegerField(unique=True)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    size = models.PositiveIntegerField()
    root = models.CharField(max_length=64)
    previous_chain = models.CharField(max_length=64)
    chain = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["seq"]
        verbose_name_plural = "event batches"
        constraints = [
            models.CheckConstraint(condition=Q(size__gte=1), name="retention_batch_not_empty"),
        ]

    def __str__(self) -> str:
        return f"Batch {self.seq} ({self.size} events)"


class ChainHead(models.Model):
    """A single row: the last batch's seq and chain hash; its lock orders appends."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    seq = models.PositiveBigIntegerField(default=0)
    chain = models.CharField(max_length=64, default="0" * 64)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="retention_chainhead_singleton")
        ]

    def __str__(self) -> str:
        return f"Chain head at batch {self.seq}"


class KillSwitch(models.Model):
    """A single row: while paused, no run claims anything new."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    paused = models.BooleanField(default=False)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    paused_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    resumed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    resumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "kill switch"
        verbose_name_plural = "kill switch"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="retention_killswitch_singleton")
        ]

    def __str__(self) -> str:
        return "Paused" if self.paused else "Running"

    @classmethod
    def load(cls) -> KillSwitch:
        obj, _ = cls.objects.get_or_create(id=1)
        return obj
