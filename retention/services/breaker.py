"""Releasing a class the volume breaker holds: an approver's decision, with a reason."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from retention.exceptions import InvalidTransition, NotAllowed, UnknownDataClass
from retention.models import BreakerState, BreakerTrip, Policy
from retention.services.policies import APPROVE_PERMISSION


def breaker_release(
    *, data_class: str, by: AbstractBaseUser, reason: str, now: datetime
) -> BreakerTrip:
    """Let the next full enforcing sweep of ``data_class`` dispose of it without checking.

    Refused unless ``by`` may approve (the permission of every governance
    decision), with a reason, while a trip holds the class.
    """
    if not by.has_perm(APPROVE_PERMISSION):  # type: ignore[attr-defined]
        raise NotAllowed(f"{by} may not release the volume breaker: approvers only.")
    if not (reason or "").strip():
        raise NotAllowed("Releasing the volume breaker needs a reason.")
    if not Policy.objects.filter(data_class=data_class).exists():
        raise UnknownDataClass(f"Unknown data class {data_class!r}.")
    with transaction.atomic():
        trip = (
            BreakerTrip.objects.select_for_update()
            .filter(data_class=data_class, state=BreakerState.TRIPPED)
            .order_by("-tripped_at", "-pk")
            .first()
        )
        if trip is None:
            raise InvalidTransition(
                f"The volume breaker holds nothing of {data_class!r}: no trip waits for release."
            )
        trip.state = BreakerState.RELEASED
        trip.released_by = by  # type: ignore[assignment]
        trip.released_at = now
        trip.release_reason = reason.strip()
        trip.save(update_fields=["state", "released_by", "released_at", "release_reason"])
    return trip
