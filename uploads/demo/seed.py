"""The seed step: users, approved policies, uploads, rows of the host's tables, holds.

Refused on a database that already holds demo data.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from io import StringIO

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group
from django.core.management import call_command
from django.core.management.base import CommandError

from retention import api
from retention.models import LegalHold, Policy, PolicyVersion, RetentionRecord
from uploads.demo.classes import row_rule
from uploads.demo.formatting import Out, fmt, period, span
from uploads.demo.seed_objects import seed_uploads, uploads_summary, uploads_touch
from uploads.demo.seed_rows import rows_summary, seed_accounts, seed_request_logs
from uploads.demo.seeds import (
    ACCOUNT_HOLD_AGE,
    ACCOUNT_HOLD_REASON,
    APPROVER,
    APPROVERS_GROUP,
    AUTHOR,
    AUTHORS_GROUP,
    HOLD_AGE,
    HOLD_REASON,
    POLICIES,
    POLICY_AGE,
    days,
)
from uploads.models import ApiRequestLog, CustomerAccount, Upload


def seed(out: Out, now: datetime) -> None:
    _refuse_twice()
    alice, bob = _seed_users()
    versions = _seed_policies(now, alice, bob)
    uploads = seed_uploads(now)
    logs = seed_request_logs(now)
    accounts = seed_accounts(now)
    holds = [
        api.place_hold(
            reason=HOLD_REASON,
            placed_by=bob,
            tenant_id="globex",
            data_class="pod.scan",
            now=now - HOLD_AGE,
        )
    ]
    holds += [
        api.place_hold(
            reason=ACCOUNT_HOLD_REASON,
            placed_by=bob,
            subject=account,
            now=now - ACCOUNT_HOLD_AGE,
        )
        for seed, account in accounts
        if seed.held
    ]
    renewed, removed = uploads_touch(uploads, now)

    out(f"Seeded the Lethe demo (reference time {fmt(now)}).")
    out(
        f"  Users: {AUTHOR} ({AUTHORS_GROUP}, writes policies), "
        f"{APPROVER} ({APPROVERS_GROUP}, approves them)."
    )
    _policies_summary(out, versions)
    uploads_summary(out, now, versions, uploads)
    out(f"  Renewed after expiry: {renewed} upload(s).")
    for hold in holds:
        out(f"  Legal hold #{hold.pk} on {hold.scope_label}: {hold.reason}")
    out(f"  Files removed from storage by hand (the ledger does not know): {removed}.")
    rows_summary(out, now, logs, accounts)


def _refuse_twice() -> None:
    user_model = get_user_model()
    existing = [
        label
        for label, present in (
            ("users alice/bob", user_model.objects.filter(username__in=[AUTHOR, APPROVER])),
            ("policies", Policy.objects.all()),
            ("retention records", RetentionRecord.objects.all()),
            ("uploads", Upload.objects.all()),
            ("request logs", ApiRequestLog.objects.all()),
            ("customer accounts", CustomerAccount.objects.all()),
            ("legal holds", LegalHold.objects.all()),
        )
        if present.exists()
    ]
    if existing:
        raise CommandError(
            f"The database already holds demo data ({', '.join(existing)}); refusing to "
            "seed twice. Start from an empty database (`make demo` wipes var/demo first)."
        )


def _seed_users() -> tuple[AbstractUser, AbstractUser]:
    user_model = get_user_model()
    alice = user_model.objects.create_user(AUTHOR, f"{AUTHOR}@example.com", is_staff=True)
    bob = user_model.objects.create_user(APPROVER, f"{APPROVER}@example.com", is_staff=True)
    # Each demo user gets exactly their governance role's permissions.
    call_command("retention_setup_groups", stdout=StringIO())
    alice.groups.add(Group.objects.get(name=AUTHORS_GROUP))
    bob.groups.add(Group.objects.get(name=APPROVERS_GROUP))
    bob = user_model.objects.get(pk=bob.pk)  # has_perm caches permissions
    return alice, bob


def _seed_policies(now: datetime, alice: AbstractUser, bob: AbstractUser) -> list[PolicyVersion]:
    """Each seed policy proposed by alice and approved by bob, POLICY_AGE ago."""
    written = now - POLICY_AGE
    versions: list[PolicyVersion] = []
    for policy_seed in POLICIES:
        version = api.propose_policy_version(
            data_class=policy_seed.data_class,
            retention_period=days(policy_seed.days),
            author=alice,
            locked=policy_seed.locked,
            safety_margin=policy_seed.safety_margin,
            disposition=policy_seed.disposition,
            description=policy_seed.description,
            owner="Data Protection Office",
            now=written,
        )
        api.submit_policy_version(version, by=alice, now=written + timedelta(hours=1))
        version = api.approve_policy_version(version, approver=bob, now=written + timedelta(days=1))
        versions.append(version)
    return versions


def _policies_summary(out: Out, versions: list[PolicyVersion]) -> None:
    out(f"  Policies, each proposed by {AUTHOR} and approved by {APPROVER}; all report-only:")
    for version in versions:
        rules = [f"keep {period(version.retention_period)}"]
        if version.safety_margin:
            rules.append(f"safety margin {span(version.safety_margin)}")
        if version.locked:
            rules.append("locked (can only be lengthened)")
        row = api.registration(version.policy.data_class)
        if row is not None:
            rules.append(row_rule(row, version))
        out(f"    {version.policy.data_class} v{version.number}: {', '.join(rules)}")
