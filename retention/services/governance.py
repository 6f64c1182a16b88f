"""Writes the governance admin needs beyond the core services.

Editing a draft, enabling enforcement from the very dry run a reviewer looked
at, and the two permission groups. Each builds on the core services so the
rules (four-eyes, lock, dry-run freshness) stay in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.db import transaction

from retention.conf import settings
from retention.exceptions import EnforcementNotAllowed, InvalidTransition, NotAllowed
from retention.formatting import format_duration
from retention.models import Policy, PolicyVersion, PolicyVersionStatus, Run, RunMode, RunStatus
from retention.selectors.policies import RULE_FIELDS
from retention.selectors.runs import dry_run_reviewable
from retention.services.control import enforcement_enable
from retention.services.policies import policy_version_validate_rules

AUTHORS_GROUP = "Retention authors"
APPROVERS_GROUP = "Retention approvers"

# Exactly what each role needs, as (app_label, codename). Authors write and
# submit drafts; approvers approve or retire versions, switch a data class
# between report-only and enforce, place and release holds, pause and resume,
# release the volume breaker, approve or reject erasure requests, and read
# the audit trail; authors also file erasure requests. Nobody gets
# add/change/delete on the audit models.
GROUP_PERMISSIONS: dict[str, frozenset[str]] = {
    AUTHORS_GROUP: frozenset(
        {
            "view_policy",
            "view_policyversion",
            "add_policyversion",
            "change_policyversion",
            "view_run",
            "view_legalhold",
            "view_killswitch",
            # Erasure requests: filed by one person, approved by another.
            "view_erasurerequest",
            "add_erasurerequest",
        }
    ),
    APPROVERS_GROUP: frozenset(
        {
            "view_policy",
            "change_policy",
            "view_policyversion",
            "approve_policyversion",
            "retire_policyversion",
            "view_run",
            "view_runbatch",
            "view_retentionrecord",
            "view_deletionevent",
            "view_legalhold",
            "add_legalhold",
            "change_legalhold",
            "view_killswitch",
            "change_killswitch",
            # The volume breaker's trips; releasing one is an approval.
            "view_breakertrip",
            "view_erasurerequest",
            "approve_erasurerequest",
        }
    ),
}

EDITABLE_DRAFT_FIELDS = frozenset({"retention_period", "locked"} | RULE_FIELDS)


def policy_version_update_draft(
    *, version: PolicyVersion, by: AbstractBaseUser, now: datetime, **changes: Any
) -> PolicyVersion:
    """Change a draft's rules. Only its author may: an approver who could
    rewrite someone else's draft would be approving their own words."""
    unknown = set(changes) - EDITABLE_DRAFT_FIELDS
    if unknown:
        raise InvalidTransition(f"These fields cannot be edited: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        version = PolicyVersion.objects.select_for_update().get(pk=version.pk)
        if version.status != PolicyVersionStatus.DRAFT:
            raise InvalidTransition(
                f"{version} is {version.status} and can no longer be changed; "
                "draft a new version instead."
            )
        if version.author_id != by.pk:
            raise NotAllowed(f"Only the author of {version} may change it.")
        for name, value in changes.items():
            setattr(version, name, value)
        policy_version_validate_rules(
            version.retention_period,
            {name: getattr(version, name) for name in RULE_FIELDS},
            data_class=version.policy.data_class,
        )
        version.full_clean(exclude=["policy"])
        version.save(update_fields=sorted(changes))
    return version


def enforcement_enable_from_dry_run(
    *, run: Run, data_class: str, by: AbstractBaseUser, now: datetime
) -> Policy:
    """Enable enforcement from the report the approver is looking at.

    ``enforcement_enable`` records the newest reviewable dry run as reviewed;
    refusing when that is not ``run`` keeps the record truthful.
    """
    if run.mode != RunMode.DRY_RUN or data_class not in run.data_classes:
        raise EnforcementNotAllowed(f"Run {run.pk} is not a dry run covering {data_class!r}.")
    latest = dry_run_reviewable(data_class=data_class, now=now)
    if latest is None or latest.pk != run.pk:
        if run.status != RunStatus.FINISHED:
            reason = f"this dry run did not finish (it is {run.status})"
        elif run.finished_at is None or run.finished_at < now - settings.DRY_RUN_MAX_AGE:
            reason = (
                f"this dry run is older than {format_duration(settings.DRY_RUN_MAX_AGE)} "
                "(RETENTION_DRY_RUN_MAX_AGE); run a new one and review it"
            )
        elif run.tenant_id or run.limit or run.report.get("record_ids"):
            reason = "this dry run was narrowed (tenant, limit or records) and does not show "
            reason += "the whole data class"
        else:
            reason = f"a newer dry run ({latest.pk if latest else '?'}) exists; review that one"
        raise EnforcementNotAllowed(f"Cannot enable enforcement for {data_class!r}: {reason}.")
    return enforcement_enable(data_class=data_class, by=by, now=now)


@dataclass(frozen=True, slots=True)
class GroupChange:
    name: str
    created: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]


def groups_setup() -> list[GroupChange]:
    """Create or correct both groups so each has exactly its permissions."""
    changes = []
    with transaction.atomic():
        for name, codenames in GROUP_PERMISSIONS.items():
            permissions = list(
                Permission.objects.filter(
                    content_type__app_label="retention", codename__in=codenames
                )
            )
            missing = codenames - {p.codename for p in permissions}
            if missing:
                raise NotAllowed(
                    f"Permissions missing: {', '.join(sorted(missing))}. Run `migrate` first."
                )
            group, created = Group.objects.get_or_create(name=name)
            current = {
                (p.content_type.app_label, p.codename): p
                for p in group.permissions.select_related("content_type")
            }
            wanted = {("retention", p.codename): p for p in permissions}
            added = sorted(set(wanted) - set(current))
            removed = sorted(set(current) - set(wanted))
            if added:
                group.permissions.add(*(wanted[key] for key in added))
            if removed:
                group.permissions.remove(*(current[key] for key in removed))
            changes.append(
                GroupChange(
                    name=name,
                    created=created,
                    added=tuple(f"{app}.{code}" for app, code in added),
                    removed=tuple(f"{app}.{code}" for app, code in removed),
                )
            )
    return changes
