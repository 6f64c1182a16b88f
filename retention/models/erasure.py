"""Erasure requests: one data subject or one tenant erased everywhere (SPEC §2)."""

from __future__ import annotations

from django.db import models


class ErasureAction(models.TextChoices):
    """What an erasure request does to a class's items of its subject (``on_erasure``)."""

    DELETE = "delete", "Delete"
    REDACT = "redact", "Redact (model rows with strategies)"
    KEEP = "keep", "Keep (with a legal basis)"
