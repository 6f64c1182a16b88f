"""Erasure requests: one data subject or one tenant erased everywhere (SPEC §2)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class ErasureAction(models.TextChoices):
    """What an erasure request does to a class's items of its subject (``on_erasure``)."""

    DELETE = "delete", "Delete"
    REDACT = "redact", "Redact (model rows with strategies)"
    KEEP = "keep", "Keep (with a legal basis)"


class ErasureState(models.TextChoices):
    RECEIVED = "received", "Received"
    APPROVED = "approved", "Approved"
    EXECUTING = "executing", "Executing"
    COMPLETED = "completed", "Completed"
    PARTIALLY_COMPLETED = "partially_completed", "Partially completed (items kept under a hold)"
    REJECTED = "rejected", "Rejected"
    CANCELLED = "cancelled", "Cancelled"


# Open: not ended. At most one open request per subject (within a tenant) or tenant.
OPEN_STATES = (
    ErasureState.RECEIVED,
    ErasureState.APPROVED,
    ErasureState.EXECUTING,
    ErasureState.PARTIALLY_COMPLETED,
)


class ErasureRequest(models.Model):
    """One data subject, one tenant, or a subject within a tenant, to be erased everywhere.

    Its scope is frozen when it is received (``scope``): per class, what the
    request reaches, how many items existed then and the bound that keeps
    later items out, what the class does on erasure (the version in force
    then), and the holds that cover some of them. The approver approves that.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    state = models.CharField(
        max_length=20, choices=ErasureState.choices, default=ErasureState.RECEIVED
    )
    # The subject as the host gave it (rows are found by it until the request
    # ends) and its keyed digest (tracked records, certificates); "" for a
    # tenant's offboarding.
    subject_id = models.TextField(blank=True, default="")
    subject_digest = models.CharField(max_length=64, blank=True, default="")
    tenant_id = models.CharField(max_length=100, blank=True, default="")
    # The classes asked for; empty: every class.
    data_classes = models.JSONField(default=list, blank=True)
    reason = models.TextField()
    # A person (admin, the Python API), or a tenant through its API key
    # (``requested_by_tenant``): one of the two, unless replayed from the journal.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    requested_by_tenant = models.CharField(max_length=100, blank=True, default="", db_default="")
    received_at = models.DateTimeField()
    due_at = models.DateTimeField()
    # A tenant's offboarding: a grace period before it may execute.
    not_before = models.DateTimeField(null=True, blank=True)
    scope = models.JSONField(default=dict)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    # Rejected or cancelled: by whom, when and why.
    ended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.TextField(blank=True, default="")
    completed_at = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    # What its runs did, per class, as last settled (``retention.engine.erasure``):
    # {"classes": {name: {"on_erasure", "erased", "redacted", "kept": [{"hold",
    # "reason", "count"}], "basis", "left", "verified"}}, "settled_at"}.
    outcome = models.JSONField(default=dict, db_default={}, blank=True)
    # Issued when it completes or partially completes (``api.erasure_certificate``):
    # fixed then, so its hash in the journal stays its hash.
    certificate = models.JSONField(null=True, blank=True)
    # Written to the journal outside the database (RETENTION_EVIDENCE_ANCHOR) once it
    # completed; re-executed from it after a restore (``retention_erasure replay``).
    journaled_at = models.DateTimeField(null=True, blank=True)
    replayed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at"]
        permissions = [("approve_erasurerequest", "Can approve or reject erasure requests")]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=ErasureState.values), name="retention_erasure_state_valid"
            ),
            models.CheckConstraint(
                condition=~Q(subject_digest="") | ~Q(tenant_id=""),
                name="retention_erasure_subject_or_tenant",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="retention_erasure_has_reason"),
            models.CheckConstraint(
                condition=Q(requested_by__isnull=False)
                | ~Q(requested_by_tenant="")
                | Q(replayed_at__isnull=False),
                name="retention_erasure_has_requester",
            ),
            models.CheckConstraint(
                condition=Q(approved_by__isnull=True) | ~Q(approved_by=models.F("requested_by")),
                name="retention_erasure_four_eyes",
            ),
            models.UniqueConstraint(
                fields=["subject_digest", "tenant_id"],
                condition=Q(state__in=OPEN_STATES),
                name="retention_erasure_one_open",
            ),
        ]

    def __str__(self) -> str:
        return f"Erasure request {self.pk} ({self.state})"
