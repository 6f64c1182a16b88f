"""The kill switch and the volume breaker."""

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


class BreakerState(models.TextChoices):
    TRIPPED = "tripped", "Tripped (held for review)"
    RELEASED = "released", "Released for the next run"
    USED = "used", "Release used by a run"


class BreakerTrip(models.Model):
    """A run was about to delete far more of a class than is normal: it deleted none of it.

    The class stays held until an approver releases it (``api.breaker_release``);
    the next run then deletes, and marks the release used.
    """

    data_class = models.CharField(max_length=100, db_index=True)
    run = models.ForeignKey(
        "retention.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(
        max_length=20, choices=BreakerState.choices, default=BreakerState.TRIPPED
    )
    tripped_at = models.DateTimeField()
    # Which limit, by how much, against what is normal; and a sample of record ids / digests.
    limit = models.CharField(max_length=20)
    figures = models.JSONField(default=dict)
    sample = models.JSONField(default=list, blank=True)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.TextField(blank=True)
    used_by_run = models.ForeignKey(
        "retention.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-tripped_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=BreakerState.values), name="retention_breaker_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(state=BreakerState.TRIPPED)
                | Q(released_by__isnull=False, released_at__isnull=False),
                name="retention_breaker_release_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"Breaker on {self.data_class} ({self.state})"
