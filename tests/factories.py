from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    is_staff = True


def approver_user(username: str) -> Any:
    user = UserFactory(username=username)
    user.user_permissions.add(
        Permission.objects.get(
            content_type__app_label="retention", codename="approve_policyversion"
        )
    )
    # has_perm caches; a fresh instance sees the new permission.
    return get_user_model().objects.get(pk=user.pk)


def _reconcile_report(run: Any) -> dict[str, Any]:
    storages = {alias: dict(counts) for alias, counts in run.storages.items()}
    totals: dict[str, int] = {}
    for counts in storages.values():
        for name, n in counts.items():
            totals[name] = totals.get(name, 0) + n
    return {"dry_run": run.dry_run, "counts": totals, "storages": storages}


class ReconcileRunFactory(factory.django.DjangoModelFactory):
    """A reconciliation as the ledger keeps it: ``storages`` maps alias → report counts."""

    class Meta:
        model = "retention.Run"

    class Params:
        storages = factory.LazyFunction(lambda: {"default": {}})
        dry_run = False

    trigger = "schedule"
    mode = "reconcile"
    status = "finished"
    finished_at = factory.LazyFunction(timezone.now)
    started_at = factory.LazyAttribute(lambda run: run.finished_at - timedelta(minutes=5))
    cutoff = factory.SelfAttribute("started_at")
    report = factory.LazyAttribute(_reconcile_report)


def user_with_perms(username: str, *codenames: str) -> Any:
    """A user holding these ``retention`` permissions (read back, so they are seen)."""
    user = UserFactory(username=username)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="retention", codename__in=codenames)
    )
    return type(user).objects.get(pk=user.pk)
