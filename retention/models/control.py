"""The kill switch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q

if TYPE_CHECKING:
    pass


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
