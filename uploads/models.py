"""An example host model: a customer upload tracked by Lethe."""

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
