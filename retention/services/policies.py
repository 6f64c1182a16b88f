"""Policy versions: draft → submitted → approved (in force) → superseded.

Four-eyes and the lock are enforced here (and the former again by a database
constraint), so no interface can bypass them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from retention.durations import format_duration
from retention.exceptions import (
    DispositionChangeNotConfirmed,
    FourEyesViolation,
    InvalidPolicyVersion,
    InvalidTransition,
    LockedPolicyShortened,
    NoApprovedPolicy,
    NotAllowed,
    UnknownDataClass,
)
from retention.models import (
    Disposition,
    ErasureAction,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    data_class_validator,
)
from retention.rows.cascade import cascade_of
from retention.rows.registration import fingerprint, registration_of, unstable_scope
from retention.rows.registry import RowClass, row_class
from retention.selectors.policies import (
    RULE_FIELDS,
    erasure_default,
    keep_without_basis,
    lock_violation,
    version_in_force,
)
from retention.selectors.version_changes import disposition_change

APPROVE_PERMISSION = "retention.approve_policyversion"
RETIRE_PERMISSION = "retention.retire_policyversion"


def policy_version_validate_rules(
    retention_period: timedelta, rules: dict[str, Any], *, data_class: str | None = None
) -> None:
    unknown = set(rules) - RULE_FIELDS
    if unknown:
        raise InvalidPolicyVersion(
            f"Unknown policy rule(s): {', '.join(sorted(unknown))}. "
            f"Allowed: {', '.join(sorted(RULE_FIELDS))}."
        )
    if not isinstance(retention_period, timedelta) or retention_period < timedelta(0):
        raise InvalidPolicyVersion("retention_period must be a non-negative timedelta.")
    margin = rules.get("safety_margin", timedelta(0))
    if not isinstance(margin, timedelta) or margin < timedelta(0):
        raise InvalidPolicyVersion("safety_margin must be a non-negative timedelta.")
    batch_size = rules.get("batch_size", 500)
    if not isinstance(batch_size, int) or not 1 <= batch_size <= 10000:
        raise InvalidPolicyVersion("batch_size must be an integer from 1 to 10000.")
    rate = rules.get("rate_limit")
    if rate is not None and (not isinstance(rate, int | float) or rate <= 0):
        raise InvalidPolicyVersion("rate_limit must be a positive number of deletes per second.")
    attempts = rules.get("max_attempts")
    if attempts is not None and (not isinstance(attempts, int) or attempts < 1):
        raise InvalidPolicyVersion("max_attempts must be a positive integer.")
    _validate_breaker_limits(rules)
    disposition = rules.get("disposition", Disposition.DELETE)
    if disposition not in Disposition.values:
        raise InvalidPolicyVersion(f"Unknown disposition {disposition!r}.")
    if disposition == Disposition.REDACT:
        _redact_possible("Disposition 'redact'", data_class)
    _validate_on_erasure(rules, data_class)


def _redact_possible(what: str, data_class: str | None) -> None:
    row = row_class(data_class) if data_class else None
    if row is None:
        raise InvalidPolicyVersion(
            f"{what} is for model rows: register the model with "
            "retention.api.register_model(..., redact={...}); tracked objects are deleted."
        )
    if not row.redact:
        raise InvalidPolicyVersion(
            f"{what} needs field strategies: {row.label} was registered without redact={{...}}."
        )


def _validate_on_erasure(rules: dict[str, Any], data_class: str | None) -> None:
    """What an erasure does to the class: delete, redact (rows with strategies) or keep
    (with its written legal basis). Absent, it is what the disposition does."""
    action = rules.get("on_erasure", erasure_default(rules))
    if action not in ErasureAction.values:
        raise InvalidPolicyVersion(
            f"Unknown on_erasure {action!r}: one of {', '.join(ErasureAction.values)}."
        )
    basis = rules.get("erasure_basis", "")
    if not isinstance(basis, str):
        raise InvalidPolicyVersion("erasure_basis is text: the legal basis for keeping.")
    if keep_without_basis(action, basis):
        raise InvalidPolicyVersion(
            "on_erasure 'keep' needs erasure_basis: the written legal basis for keeping a "
            "subject's data after an erasure request (e.g. 'invoices: 10 years, tax law')."
        )
    if action == ErasureAction.REDACT:
        _redact_possible("on_erasure 'redact'", data_class)


def _validate_breaker_limits(rules: dict[str, Any]) -> None:
    """A version's own volume breaker limits (RETENTION_BREAKER_* when empty)."""
    fraction = rules.get("breaker_max_fraction")
    number = int | float
    if fraction is not None and (
        not isinstance(fraction, number) or isinstance(fraction, bool) or not 0 < fraction <= 1
    ):
        raise InvalidPolicyVersion("breaker_max_fraction must be a share in (0, 1], or empty.")
    multiple = rules.get("breaker_max_multiple")
    if multiple is not None and (
        not isinstance(multiple, number) or isinstance(multiple, bool) or not multiple > 0
    ):
        raise InvalidPolicyVersion("breaker_max_multiple must be a positive number, or empty.")
    count = rules.get("breaker_min_count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        raise InvalidPolicyVersion("breaker_min_count must be a non-negative integer, or empty.")


def policy_version_propose(
    *,
    data_class: str,
    retention_period: timedelta,
    author: AbstractBaseUser,
    now: datetime,
    locked: bool = False,
    description: str = "",
    **rules: Any,
) -> PolicyVersion:
    policy_version_validate_rules(retention_period, rules, data_class=data_class)
    try:
        data_class_validator(data_class)
    except ValidationError as exc:
        raise InvalidPolicyVersion(
            f"Invalid data class {data_class!r}: {exc.messages[0]}"
        ) from None
    with transaction.atomic():
        policy, _ = Policy.objects.get_or_create(
            data_class=data_class, defaults={"description": description}
        )
        policy = Policy.objects.select_for_update().get(pk=policy.pk)
        last = policy.versions.aggregate(n=Max("number"))["n"] or 0
        row = row_class(data_class)
        # What the reviewer is shown, and what approving it adopts.
        registration = _registration(row) if row is not None else None
        # The author is the host's AUTH_USER_MODEL, which the stubs see as User.
        version = PolicyVersion(  # type: ignore[misc]
            policy=policy,
            number=last + 1,
            status=PolicyVersionStatus.DRAFT,
            retention_period=retention_period,
            locked=locked,
            author=author,
            created_at=now,
            registration=registration,
            registration_fingerprint=fingerprint(registration) if registration else "",
            **{"on_erasure": erasure_default(rules), **rules},
        )
        version.full_clean(exclude=["policy"])
        version.save()
    return version


def policy_version_submit(
    *, version: PolicyVersion, by: AbstractBaseUser, now: datetime
) -> PolicyVersion:
    with transaction.atomic():
        version = PolicyVersion.objects.select_for_update().get(pk=version.pk)
        if version.status != PolicyVersionStatus.DRAFT:
            raise InvalidTransition(
                f"{version} cannot be submitted: only a draft can (it is {version.status})."
            )
        version.status = PolicyVersionStatus.SUBMITTED
        version.submitted_by = by  # type: ignore[assignment]
        version.submitted_at = now
        version.save(update_fields=["status", "submitted_by", "submitted_at"])
    return version


def policy_version_in_force(*, data_class: str) -> PolicyVersion:
    """The version in force, or a clear error saying why there is none."""
    version = version_in_force(data_class=data_class)
    if version is None:
        if not Policy.objects.filter(data_class=data_class).exists():
            raise UnknownDataClass(f"Unknown data class {data_class!r}: no policy governs it.")
        raise NoApprovedPolicy(
            f"Data class {data_class!r} has no approved policy version; "
            "a version must be submitted and approved by a second person first."
        )
    return version


def _registration(row: RowClass) -> dict[str, Any]:
    """The registration a version of ``row``'s class records; refused when it cannot hold."""
    problem = unstable_scope(row)
    if problem is not None:
        raise InvalidPolicyVersion(problem)
    return registration_of(row)


def policy_version_approve(
    *,
    version: PolicyVersion,
    approver: AbstractBaseUser,
    now: datetime,
    confirm_disposition_change: bool = False,
) -> PolicyVersion:
    """Put a submitted version in force; for model rows, with the cascade and the
    registration as they are now (which must be the registration it was drafted with).

    A version that changes the disposition (redact → delete) is refused unless
    the approver confirms that change explicitly: ``confirm_disposition_change``.
    """
    if not approver.has_perm(APPROVE_PERMISSION):  # type: ignore[attr-defined]
        raise NotAllowed(f"{approver} may not approve policy versions.")
    with transaction.atomic():
        policy = Policy.objects.select_for_update().get(pk=version.policy_id)
        version = PolicyVersion.objects.select_for_update().get(pk=version.pk)
        if version.status != PolicyVersionStatus.SUBMITTED:
            raise InvalidTransition(
                f"{version} cannot be approved: only a submitted version can "
                f"(it is {version.status})."
            )
        if version.author_id == approver.pk:
            raise FourEyesViolation(
                f"{approver} wrote {version} and cannot also approve it: "
                "a second person must approve."
            )
        current = version_in_force(policy_id=version.policy_id)
        violation = lock_violation(version, current)
        if violation is not None and violation.kind == "shortened":
            raise LockedPolicyShortened(
                f"{version.policy.data_class} is locked: its retention period can only "
                f"be lengthened ({format_duration(version.retention_period)} < "
                f"{format_duration(violation.in_force.retention_period)})."
            )
        if violation is not None:
            raise LockedPolicyShortened(
                f"{version.policy.data_class} is locked: a new version must stay locked."
            )
        change = disposition_change(version, current)
        if change is not None and not confirm_disposition_change:
            raise DispositionChangeNotConfirmed(
                f"{version.label} changes what happens to "
                f"expired rows: {change.before} → {change.after}. The approver must confirm "
                "this change explicitly (the confirmation box on the review page; "
                "confirm_disposition_change=True in the API)."
            )
        rows = row_class(policy.data_class)
        registration = _registration(rows) if rows is not None else None
        if (
            registration is not None
            and version.registration_fingerprint
            and version.registration_fingerprint != fingerprint(registration)
        ):
            raise InvalidPolicyVersion(
                f"The registration of {policy.data_class} in the code changed after "
                f"v{version.number} was drafted, so it is not what was reviewed: draft a new "
                "version (it records the registration as it is now) and approve that."
            )
        if current is not None:
            current.status = PolicyVersionStatus.SUPERSEDED
            current.superseded_at = now
            current.save(update_fields=["status", "superseded_at"])
        version.status = PolicyVersionStatus.APPROVED
        version.approver = approver  # type: ignore[assignment]
        version.approved_at = now
        # The review page's cascade, computed again: all a page's delete may touch.
        version.cascade = cascade_of(rows.model) if rows is not None else None
        version.registration = registration
        version.registration_fingerprint = fingerprint(registration) if registration else ""
        version.save(
            update_fields=[
                "status",
                "approver",
                "approved_at",
                "cascade",
                "registration",
                "registration_fingerprint",
            ]
        )
        if policy.review_reason or policy.review_since is not None:
            # A class stopped for review runs again under the new version's cascade.
            policy.review_reason = ""
            policy.review_since = None
            policy.save(update_fields=["review_reason", "review_since"])
    return version


def policy_version_reject(
    *, version: PolicyVersion, by: AbstractBaseUser, reason: str, now: datetime
) -> PolicyVersion:
    """Turn a submitted version down: it goes back to its author as a draft, with the
    reason, for the author to change and submit again (or retire).

    Approvers only, and never the version's author (four-eyes): an author who
    wants their version back retires it.
    """
    if not by.has_perm(APPROVE_PERMISSION):  # type: ignore[attr-defined]
        raise NotAllowed(f"{by} may not reject policy versions: approvers only.")
    reason = (reason or "").strip()
    if not reason:
        raise NotAllowed("Rejecting a version needs a reason: its author reads it.")
    with transaction.atomic():
        version = PolicyVersion.objects.select_for_update().get(pk=version.pk)
        if version.status != PolicyVersionStatus.SUBMITTED:
            raise InvalidTransition(
                f"{version} cannot be rejected: only a submitted version can "
                f"(it is {version.status})."
            )
        if version.author_id == by.pk:
            raise FourEyesViolation(
                f"{by} wrote {version} and cannot also review it: a second person must; "
                "retire it to withdraw it."
            )
        version.status = PolicyVersionStatus.DRAFT
        version.rejected_by = by  # type: ignore[assignment]
        version.rejected_at = now
        version.rejection_reason = reason
        version.save(update_fields=["status", "rejected_by", "rejected_at", "rejection_reason"])
    return version


def policy_version_retire(
    *, version: PolicyVersion, by: AbstractBaseUser, now: datetime
) -> PolicyVersion:
    """Withdraw a version. Records it governs keep their deadlines."""
    if not by.has_perm(RETIRE_PERMISSION):  # type: ignore[attr-defined]
        raise NotAllowed(f"{by} may not retire policy versions.")
    with transaction.atomic():
        version = PolicyVersion.objects.select_for_update().get(pk=version.pk)
        if version.status in (PolicyVersionStatus.RETIRED, PolicyVersionStatus.SUPERSEDED):
            raise InvalidTransition(f"{version} is already {version.status}.")
        if version.status == PolicyVersionStatus.APPROVED and version.locked:
            raise LockedPolicyShortened(
                f"{version} is locked and in force: it can only be superseded by a longer one."
            )
        version.status = PolicyVersionStatus.RETIRED
        version.superseded_at = now
        version.save(update_fields=["status", "superseded_at"])
    return version
