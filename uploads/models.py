"""Example host models governed by Lethe.

``Upload`` is a file tracked through ``retention.api.track``; the other two
are plain tables whose rows are data classes themselves, registered in
``UploadsConfig.ready()``: request logs are deleted, closed customer
accounts are redacted.
"""

from __future__ import annotations

import uuid

from django.db import models

from retention.models import data_class_validator


class Upload(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id = models.CharField(max_length=100, db_index=True)
    data_class = models.CharField(max_length=100, validators=[data_class_validator])
    storage = models.CharField(max_length=100, default="default")
    object_key = models.CharField(max_length=1024, unique=True)
    original_name = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=100, blank=True)
    retention_record = models.OneToOneField(
        "retention.RetentionRecord", on_delete=models.PROTECT, related_name="upload"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.original_name} ({self.tenant_id}, {self.data_class})"


class ApiRequestLog(models.Model):
    """One request to the host's API: many rows, no relations, deleted by age."""

    tenant_id = models.CharField(max_length=100)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=300)
    status = models.PositiveSmallIntegerField()
    duration_ms = models.PositiveIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        # Runs page through the rows in (created_at, id) order.
        indexes = [models.Index(fields=["created_at", "id"], name="uploads_apilog_created")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} ({self.tenant_id}, {self.created_at:%Y-%m-%d})"


class CustomerAccount(models.Model):
    """A customer's account: kept after it is closed, but without its personal fields."""

    tenant_id = models.CharField(max_length=100)
    name = models.CharField(max_length=200)
    email = models.EmailField(unique=True)
    phone = models.CharField(max_length=30, blank=True)
    created_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["closed_at", "id"], name="uploads_account_closed")]

    def __str__(self) -> str:
        return f"account {self.pk} ({self.tenant_id})"
