"""Which policy version governs a data class, and what a lock allows.

Each rule is spelled once here; the services, the engine, the admin and the
REST API ask these functions instead of filtering versions themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from retention.models import (
    Disposition,
    ErasureAction,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
)
from retention.rows.registry import row_class

# A version's rules, in the order a reviewer reads them.
VERSION_RULE_FIELDS: tuple[str, ...] = (
    "retention_period",
    "safety_margin",
    "locked",
    "disposition",
    "erase_all_versions",
    "batch_size",
    "rate_limit",
    "max_attempts",
    "owner",
    "notes",
    # The volume breaker's limits for this version; empty: the settings'.
    "breaker_max_fraction",
    "breaker_max_multiple",
    "breaker_min_count",
    # What an erasure request does to the class, and the legal basis of "keep".
    "on_erasure",
    "erasure_basis",
)
# Rules a version may carry besides its period and lock (keyword arguments).
RULE_FIELDS = frozenset(VERSION_RULE_FIELDS) - {"retention_period", "locked"}


def version_in_force(
    *, policy_id: int | None = None, data_class: str | None = None
) -> PolicyVersion | None:
    """The approved version of a policy (at most one: a database constraint)."""
    if (policy_id is None) == (data_class is None):
        raise TypeError("version_in_force() takes exactly one of policy_id and data_class")
    versions = PolicyVersion.objects.select_related("policy").filter(
        status=PolicyVersionStatus.APPROVED
    )
    if policy_id is not None:
        return versions.filter(policy_id=policy_id).first()
    return versions.filter(policy__data_class=data_class).first()


def version_governing(policy: Policy) -> PolicyVersion | None:
    """The version whose rules a run follows: in force, else the last one approved.

    A retired class still has records that were written under its last
    version; a run disposing of them keeps that version's pacing and batch size.
    """
    return (
        version_in_force(policy_id=policy.pk)
        or policy.versions.filter(approved_at__isnull=False).order_by("-number").first()
    )


def version_or_latest(data_class: str) -> PolicyVersion | None:
    """The version a new draft starts from: the one in force, else the newest."""
    return (
        version_in_force(data_class=data_class)
        or PolicyVersion.objects.filter(policy__data_class=data_class).order_by("-number").first()
    )


@dataclass(frozen=True, slots=True)
class LockViolation:
    """Why approving a version over a locked one in force is refused."""

    kind: Literal["shortened", "unlocked"]
    in_force: PolicyVersion


def lock_violation(version: PolicyVersion, in_force: PolicyVersion | None) -> LockViolation | None:
    """A locked policy can only be lengthened, and its next version stays locked."""
    if in_force is None or in_force.pk == version.pk or not in_force.locked:
        return None
    if version.retention_period < in_force.retention_period:
        return LockViolation("shortened", in_force)
    if not version.locked:
        return LockViolation("unlocked", in_force)
    return None


# What a class supports, offered by the draft form and checked by the services.


def disposition_choices(data_class: str) -> list[tuple[str, str]]:
    """Every disposition the class supports: delete always; redact for a class of
    model rows registered with redaction strategies."""
    choices = [(Disposition.DELETE.value, Disposition.DELETE.label)]
    row = row_class(data_class) if data_class else None
    if row is not None and row.redact:
        choices.append((Disposition.REDACT.value, "Redact (keep the row, replace its fields)"))
    return choices


def erasure_choices(data_class: str) -> list[tuple[str, str]]:
    """What an erasure may do to the class: delete and keep always; redact for a class
    of model rows registered with redaction strategies."""
    choices = [(ErasureAction.DELETE.value, "Delete the subject's items")]
    row = row_class(data_class) if data_class else None
    if row is not None and row.redact:
        choices.append((ErasureAction.REDACT.value, "Redact the subject's rows"))
    choices.append((ErasureAction.KEEP.value, "Keep them, under a legal basis"))
    return choices


def erasure_default(rules: Mapping[str, Any]) -> str:
    """What an erasure does when a version leaves ``on_erasure`` out: what its disposition does."""
    return str(rules.get("disposition") or Disposition.DELETE.value)


def keep_without_basis(on_erasure: str, basis: object) -> bool:
    """Whether a version would keep a subject's items on erasure with no written basis."""
    return on_erasure == ErasureAction.KEEP and not str(basis or "").strip()
