"""Policies and their numbered, immutable versions (four-eyes, lock)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from retention.models.erasure import ErasureAction

if TYPE_CHECKING:
    pass


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
    # A class of model rows whose delete touched a model outside its approved
    # cascade stops here until a new version (with a new cascade) is approved.
    review_reason = models.TextField(blank=True)
    review_since = models.DateTimeField(null=True, blank=True)

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
    # Model rows: what deleting one row also deletes, nulls or is blocked by,
    # computed from the model graph when the version is approved.
    cascade = models.JSONField(null=True, blank=True)
    # Model rows: the host's registration (model, fields, the scope's SQL,
    # strategies, files, evidence) as drafted and approved with the version,
    # and its fingerprint. Runs dispose of nothing while the code's differs.
    registration = models.JSONField(null=True, blank=True)
    registration_fingerprint = models.CharField(max_length=64, blank=True, default="")
    # The volume breaker's limits for this version, over the settings'
    # (RETENTION_BREAKER_*): for a class whose first sweep is known to be large.
    breaker_max_fraction = models.FloatField(null=True, blank=True)
    breaker_max_multiple = models.FloatField(null=True, blank=True)
    breaker_min_count = models.PositiveIntegerField(null=True, blank=True)
    # What an erasure request does to this class's items of its subject, and
    # for "keep" the written legal basis (e.g. invoices kept ten years under
    # tax law); approved like every other rule of the version.
    on_erasure = models.CharField(
        max_length=10,
        choices=ErasureAction.choices,
        default=ErasureAction.DELETE,
        db_default=ErasureAction.DELETE,
    )
    erasure_basis = models.TextField(blank=True, default="", db_default="")

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
    # The last time an approver turned the version down: it went back to its
    # author as a draft, with the reason the author reads. Kept after a
    # re-submission, so the next approver sees what was asked for.
    rejected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    rejected_at = models.DateTimeField(null=True, blank=True)
    rejection_reason = models.TextField(blank=True, default="", db_default="")

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
                condition=Q(rejected_by__isnull=True)
                | (
                    ~Q(rejected_by=models.F("author"))
                    & Q(rejected_at__isnull=False)
                    & ~Q(rejection_reason="")
                ),
                name="retention_pv_rejected_with_reason",
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
            models.CheckConstraint(
                condition=Q(on_erasure__in=ErasureAction.values)
                & (~Q(on_erasure=ErasureAction.KEEP) | ~Q(erasure_basis="")),
                name="retention_pv_erasure_keep_has_basis",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.status})"

    @property
    def label(self) -> str:
        """How a person names it: "idv.photo version 2"."""
        return f"{self.policy.data_class} version {self.number}"
