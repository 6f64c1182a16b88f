"""Host models with the relations a registered model meets in a real project."""

from __future__ import annotations

import uuid

from django.db import models


class RequestLog(models.Model):
    """A high-volume log: no relations, an indexed age column."""

    tenant_id = models.CharField(max_length=100)
    path = models.CharField(max_length=200)
    status = models.PositiveSmallIntegerField(default=200)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.path} ({self.created_at:%Y-%m-%d})"


class Tag(models.Model):
    name = models.CharField(max_length=50)

    def __str__(self) -> str:
        return self.name


class Account(models.Model):
    """A customer account: personal fields to redact, related rows of every kind."""

    tenant_id = models.CharField(max_length=100)
    name = models.CharField(max_length=100)
    email = models.EmailField(max_length=80, unique=True)
    phone = models.CharField(max_length=30, blank=True)
    nickname = models.CharField(max_length=30, null=True, blank=True)  # noqa: DJ001
    profile = models.JSONField(default=dict, blank=True)
    avatar = models.FileField(upload_to="avatars/", blank=True)
    referrer = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tags = models.ManyToManyField(Tag, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # No index: the system check warns about it.
    last_seen_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"account {self.pk}"


class AccountNote(models.Model):
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="notes")
    text = models.TextField()

    def __str__(self) -> str:
        return f"note {self.pk}"


class Invoice(models.Model):
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="invoices")
    amount = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"invoice {self.pk}"


class Ticket(models.Model):
    account = models.ForeignKey(
        Account, null=True, blank=True, on_delete=models.SET_NULL, related_name="tickets"
    )
    subject = models.CharField(max_length=100)

    def __str__(self) -> str:
        return f"ticket {self.pk}"


class Shipment(models.Model):
    """A row whose file goes with it."""

    tenant_id = models.CharField(max_length=100)
    proof = models.FileField(upload_to="proofs/", blank=True)
    delivered_at = models.DateTimeField(db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)

    def __str__(self) -> str:
        return f"shipment {self.pk}"


class WebSession(models.Model):
    """A row whose primary key is not an integer (its events' keys are hashed)."""

    key = models.UUIDField(primary_key=True, default=uuid.uuid4)
    tenant_id = models.CharField(max_length=100)
    created_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"session {self.key}"


class DailyTotal(models.Model):
    """A row dated by a day, not an instant (a DateField age column)."""

    tenant_id = models.CharField(max_length=100)
    day = models.DateField(db_index=True)
    total = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.day}"


class LowercaseEmailField(models.EmailField):
    """A host's own email field: a subclass, which the data map must still see."""

    def get_prep_value(self, value: object) -> object:
        value = super().get_prep_value(value)
        return value.lower() if isinstance(value, str) else value


class Subscriber(models.Model):
    """The data map's host model: personal by its field types, not its field names."""

    contact = LowercaseEmailField()
    origin = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"subscriber {self.pk}"
