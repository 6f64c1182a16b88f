"""Retention records (one per tracked object) and the legal holds that protect them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import models
from django.db.models import Exists, Lookup, OuterRef, Q

from retention.models.policies import PolicyVersion

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler


class RecordState(models.TextChoices):
    ACTIVE = "active", "Active"
    DELETING = "deleting", "Deleting"
    DELETED = "deleted", "Deleted"
    FAILED = "failed", "Failed"
    # Terminal: reconciliation found no object for a live record. Never "deleted".
    MISSING = "missing", "Not found at deletion time"


class ObjectLockStatus(models.TextChoices):
    """How far a hold's S3 Object Lock mirror has got (``LegalHold.object_lock_status``)."""

    # Nothing to mirror: RETENTION_OBJECT_LOCK_HOLDS is empty, or a hold on a host row.
    NONE = "", "Not mirrored"
    APPLYING = "applying", "Applying"
    APPLIED = "applied", "Applied"
    RELEASING = "releasing", "Releasing"
    RELEASED = "released", "Released"
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
        narrow the match (any value of it). Holds on host rows: ``rows_covering``.
        """
        # A hold on one host row (a subject) never covers a tracked record.
        qs = self.active().filter(subject_pk__isnull=True)
        if tenant_id is not None:
            qs = qs.filter(Q(tenant_id__isnull=True) | Q(tenant_id=tenant_id))
        if data_class is not None:
            qs = qs.filter(Q(data_class__isnull=True) | Q(data_class=data_class))
        if record_id is not None:
            qs = qs.filter(Q(record__isnull=True) | Q(record_id=record_id))
        return qs

    def rows_covering(self, data_class: str) -> HoldQuerySet:
        """Active holds that can protect rows of a class of model rows.

        A data-class hold, a tenant hold (for rows with a tenant), a hold on
        one row (subject); never a hold on a tracked record.
        """
        return (
            self.active()
            .filter(record__isnull=True)
            .filter(Q(data_class__isnull=True) | Q(data_class=data_class))
        )


class LegalHold(models.Model):
    """Protects every record matching all of its non-empty scopes."""

    # NULL means "any": a scope left empty does not narrow the hold.
    tenant_id = models.CharField(max_length=100, null=True, blank=True, db_index=True)  # noqa: DJ001
    data_class = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    record = models.ForeignKey(
        "RetentionRecord", null=True, blank=True, on_delete=models.PROTECT, related_name="holds"
    )
    # One host row (a registered model's instance): its model label and pk.
    subject_type = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    subject_pk = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
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
    # Mirrored as S3 Object Lock legal holds (RETENTION_OBJECT_LOCK_HOLDS):
    # "" (not mirrored), "applying", "applied", "releasing", "released", "failed";
    # objects done out of total, for the hold's admin page.
    object_lock_status = models.CharField(max_length=20, blank=True, default="", db_default="")
    object_lock_total = models.PositiveIntegerField(default=0, db_default=0)
    object_lock_done = models.PositiveIntegerField(default=0, db_default=0)
    object_lock_error = models.TextField(blank=True, default="", db_default="")
    # Where a queued mirror goes on (the last record id done, the objects that
    # failed) and when it last moved: the watchdog re-arms one that stalled.
    object_lock_after = models.PositiveBigIntegerField(default=0, db_default=0)
    object_lock_failed = models.PositiveIntegerField(default=0, db_default=0)
    object_lock_moved_at = models.DateTimeField(null=True, blank=True)

    objects = HoldQuerySet.as_manager()

    # Not a column: set by ``legal_hold_place`` on the hold it returns, the
    # records it covers that were past their re-check at that moment (their
    # deletion goes on; their events say the hold came after). 0 when loaded.
    in_flight: int = 0

    class Meta:
        ordering = ["-placed_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(tenant_id__isnull=False)
                | Q(data_class__isnull=False)
                | Q(record__isnull=False)
                | Q(subject_pk__isnull=False),
                name="retention_hold_has_scope_or_subject",
            ),
            models.CheckConstraint(
                condition=Q(released_at__isnull=True, released_by__isnull=True)
                | Q(released_at__isnull=False, released_by__isnull=False),
                name="retention_hold_release_complete",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="retention_hold_has_reason"),
            models.CheckConstraint(
                condition=Q(subject_type__isnull=True, subject_pk__isnull=True)
                | Q(subject_type__isnull=False, subject_pk__isnull=False),
                name="retention_hold_subject_complete",
            ),
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
        if self.subject_pk is not None:
            parts.append(f"row={self.subject_type}:{self.subject_pk}")
        return ", ".join(parts)

    def scope_q(self) -> Q:
        """The records this hold's scope covers (released or not)."""
        if self.subject_pk is not None:
            # A hold on one host row covers no tracked record.
            return Q(pk__in=[])
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

    def failed_for_review(self) -> RecordQuerySet:
        """Given up on after their attempts: a person must look at them.

        ``deleted_at`` is null for every failed row (a constraint); saying so
        lets the planner use the small ``retention_record_for_review`` index.
        """
        return self.filter(state=RecordState.FAILED, retryable=False, deleted_at__isnull=True)

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
    # Reconciliation found the object again after its record said deleted
    # (a bucket restore, a re-upload): how often, and when last. Each time
    # the record goes back to the claim queue, and its deletion events get a
    # fresh idempotency key.
    reappearances = models.PositiveIntegerField(default=0, db_default=0)
    reappeared_at = models.DateTimeField(null=True, blank=True)
    # The data subject, as ``retention.digest.subject_digest`` of the id the
    # host gave ``track(subject_id=)``; never the id. "" when none was given.
    subject_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    # The object's size in bytes as the host gave ``track(size=)``; NULL when
    # it did not (no storage round trip is made to find out).
    size_bytes = models.PositiveBigIntegerField(null=True, blank=True)

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
                condition=Q(
                    state__in=[RecordState.FAILED, RecordState.DELETED, RecordState.MISSING]
                )
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
            # retention_check: reappeared objects not deleted again yet (few rows).
            models.Index(
                fields=["reappeared_at"],
                condition=Q(reappeared_at__isnull=False, deleted_at__isnull=True),
                name="retention_record_reappeared",
            ),
            # The inbox's records failed for review (and missing ones): few rows.
            # Its predicate names only columns the due index's does, so a
            # claim's update stays off the indexes as before.
            models.Index(
                fields=["data_class"],
                condition=Q(retryable=False, deleted_at__isnull=True),
                name="retention_record_for_review",
            ),
            # An erasure request finds a subject's records; only records with a subject.
            models.Index(
                fields=["subject_digest", "tenant_id"],
                condition=~Q(subject_digest=""),
                name="retention_record_subject",
            ),
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
