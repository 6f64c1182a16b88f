"""Enforcement mode per data class, and the kill switch."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from retention.conf import settings
from retention.exceptions import EnforcementNotAllowed, NotAllowed, UnknownDataClass
from retention.formatting import format_duration
from retention.models import DataClassMode, KillSwitch, Policy, Run
from retention.selectors.runs import dry_run_reviewable
from retention.services.policies import APPROVE_PERMISSION


def _policy_for_update(data_class: str) -> Policy:
    try:
        return Policy.objects.select_for_update().get(data_class=data_class)
    except Policy.DoesNotExist:
        raise UnknownDataClass(f"Unknown data class {data_class!r}.") from None


def enforcement_enable(*, data_class: str, by: AbstractBaseUser, now: datetime) -> Policy:
    if not by.has_perm(APPROVE_PERMISSION):  # type: ignore[attr-defined]
        raise NotAllowed(f"{by} may not enable enforcement: approvers only.")
    with transaction.atomic():
        policy = _policy_for_update(data_class)
        dry_run = dry_run_reviewable(data_class=data_class, now=now)
        if dry_run is None:
            raise EnforcementNotAllowed(
                f"Enforcement for {data_class!r} needs a dry run covering it that finished "
                f"within the last {format_duration(settings.DRY_RUN_MAX_AGE)}; run "
                f"`run_retention --dry-run --data-class {data_class}` and review it first."
            )
        Run.objects.filter(pk=dry_run.pk).update(reviewed_by=by, reviewed_at=now)
        policy.mode = DataClassMode.ENFORCE
        policy.mode_changed_by = by  # type: ignore[assignment]
        policy.mode_changed_at = now
        policy.reviewed_dry_run = dry_run
        policy.save(
            update_fields=["mode", "mode_changed_by", "mode_changed_at", "reviewed_dry_run"]
        )
    return policy


def enforcement_disable(*, data_class: str, by: AbstractBaseUser, now: datetime) -> Policy:
    with transaction.atomic():
        policy = _policy_for_update(data_class)
        policy.mode = DataClassMode.REPORT_ONLY
        policy.mode_changed_by = by  # type: ignore[assignment]
        policy.mode_changed_at = now
        policy.save(update_fields=["mode", "mode_changed_by", "mode_changed_at"])
    return policy


def kill_switch_pause(*, by: AbstractBaseUser, reason: str, now: datetime) -> KillSwitch:
    if not (reason or "").strip():
        raise NotAllowed("Pausing needs a reason.")
    with transaction.atomic():
        KillSwitch.load()
        switch = KillSwitch.objects.select_for_update().get(pk=1)
        switch.paused = True
        switch.paused_by = by  # type: ignore[assignment]
        switch.paused_at = now
        switch.reason = reason.strip()
        switch.save()
    return switch


def kill_switch_resume(*, by: AbstractBaseUser, now: datetime) -> KillSwitch:
    with transaction.atomic():
        KillSwitch.load()
        switch = KillSwitch.objects.select_for_update().get(pk=1)
        switch.paused = False
        switch.resumed_by = by  # type: ignore[assignment]
        switch.resumed_at = now
        switch.save()
    return switch
