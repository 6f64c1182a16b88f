"""The append-only deletion events and the hash chain over them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models
from django.db.models import Q

from retention.models.policies import Disposition, PolicyVersion
from retention.models.records import RetentionRecord
from retention.models.runs import Run

if TYPE_CHECKING:
    pass


class EventOutcome(models.TextChoices):
    DELETED = "deleted", "Deleted"
    ALREADY_ABSENT = "already_absent", "Already absent"
    SKIPPED_HELD = "skipped_held", "Skipped: legal hold"
    SKIPPED_RENEWED = "skipped_renewed", "Skipped: renewed"
    RETRY_SCHEDULED = "retry_scheduled", "Transient error, retry scheduled"
    FAILED = "failed", "Failed"
    REDACTED = "redacted", "Redacted"
    SKIPPED_PROTECTED = "skipped_protected", "Skipped: protected by a related row"
    # Reconciliation: the object was not in the store (terminal, never "deleted"),
    # or it was there again after its deletion (back to the claim queue).
    MISSING = "missing", "Not found at deletion time"
    REAPPEARED = "reappeared", "Reappeared after deletion"


class EventKind(models.TextChoices):
    OBJECT = "object", "Tracked object"
    ROW = "row", "Database row"


class DeletionEvent(models.Model):
    """Append-only evidence of one decision about one record.

    Carries a keyed digest of the object key, never the key or a URL.
    """

    id = models.BigAutoField(primary_key=True)
    # Unique by a constraint, not unique=True: on PostgreSQL that would add a
    # second (LIKE-pattern) index, which no query uses and every event writes.
    idempotency_key = models.CharField(max_length=200)
    # No index of its own: retention_event_record (record, id) serves every
    # look-up by record, and each index costs every page of events a write.
    # Null for an event about database rows (kind "row"), which have no record.
    record = models.ForeignKey(
        RetentionRecord,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="events",
        db_index=False,
    )
    # Defaults in the database too: events written by earlier versions' SQL stay valid.
    kind = models.CharField(
        max_length=10,
        choices=EventKind.choices,
        default=EventKind.OBJECT,
        db_default=EventKind.OBJECT,
    )
    # Evidence "per_batch": one event for a page of rows, its count and primary-key range.
    row_count = models.PositiveIntegerField(null=True, blank=True)
    first_pk = models.CharField(max_length=100, blank=True, default="", db_default="")
    last_pk = models.CharField(max_length=100, blank=True, default="", db_default="")
    # "per_row": a page event standing for one event per row. Its rows'
    # subjects (keyed digest and deadline each, ``evidence.subjects_unpack``)
    # are stored here, their Merkle root is its key_digest, and each row's
    # idempotency key is in RowEventKey.
    # Up to a page of rows' worth of bytes: lists of events defer it.
    evidence = models.CharField(max_length=10, blank=True, default="", db_default="")
    row_subjects = models.BinaryField(null=True, blank=True, editable=False)
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
            models.UniqueConstraint(
                fields=["idempotency_key"], name="retention_event_idempotency_key"
            ),
            models.CheckConstraint(
                condition=Q(outcome__in=EventOutcome.values), name="retention_event_outcome_valid"
            ),
        ]

    def __str__(self) -> str:
        if self.kind == EventKind.ROW:
            # A page event stands for its rows; an event of one row has no count.
            n = self.row_count if self.row_count is not None else 1
            rows = "1 row" if n == 1 else f"{n} rows"
            return f"Event #{self.pk}: {rows} of {self.data_class}: {self.outcome}"
        return f"Event #{self.pk} record {self.record_id}: {self.outcome}"


class RowEventKey(models.Model):
    """The idempotency key of one row's event under a per-row page event.

    Policy version + row + disposition, as an object's event has, unique,
    so a replay records no row twice: stored as the first 128 bits of the
    key's SHA-256 (a UUID column: 16 bytes, one index), since a page of rows
    writes a thousand of them and a full event row each would cost several
    times the delete itself.
    """

    key = models.UUIDField(primary_key=True)

    class Meta:
        verbose_name = "row event key"

    def __str__(self) -> str:
        return str(self.key)


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
        return f"Batch {self.seq} ({self.size} event{'' if self.size == 1 else 's'})"


class ChainHead(models.Model):
    """A single row: the last batch's seq and chain hash; its lock orders appends."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    seq = models.PositiveBigIntegerField(default=0)
    chain = models.CharField(max_length=64, default="0" * 64)
    # The last head signed and written outside the database (RETENTION_EVIDENCE_ANCHOR).
    anchored_seq = models.PositiveBigIntegerField(default=0, db_default=0)
    anchored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="retention_chainhead_singleton")
        ]

    def __str__(self) -> str:
        return f"Chain head at batch {self.seq}"
