"""The enable step: bob enables enforcement after reviewing the dry run."""

from __future__ import annotations

from datetime import datetime

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from retention import api
from retention.models import DataClassMode, Policy
from uploads.demo.classes import reviewed
from uploads.demo.formatting import Out
from uploads.demo.seeds import APPROVER, ENFORCED


def enable(out: Out, now: datetime) -> None:
    user_model = get_user_model()
    try:
        bob = user_model.objects.get(username=APPROVER)
    except user_model.DoesNotExist:
        raise CommandError("No demo data: run `manage.py lethe_demo seed` first.") from None
    policies = []
    for data_class in ENFORCED:
        try:
            policies.append(api.enable_enforcement(data_class, by=bob, now=now))
        except api.RetentionError as exc:
            raise CommandError(f"Cannot enable enforcement for {data_class}: {exc}") from exc
    runs = sorted({str(p.reviewed_dry_run_id) for p in policies})
    out(f"{APPROVER} reviewed dry run {', '.join(runs)} and enabled enforcement.")
    for policy in Policy.objects.select_related("reviewed_dry_run").order_by("data_class"):
        row = api.registration(policy.data_class)
        if policy.mode != DataClassMode.ENFORCE:
            out(
                f"  {policy.data_class}: stays report-only (expired records are reported, "
                "never deleted)"
            )
        elif row is None:
            out(f"  {policy.data_class}: enforced (expired records are deleted)")
        else:
            out(f"  {policy.data_class}: enforced ({reviewed(policy, row)})")
