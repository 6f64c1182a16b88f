"""What approving a version changes that its approver must see apart, and whether the
code still matches what was approved.

Two rules, each spelled once here: a class of model rows disposes of nothing
while its registration in the code differs from the one its version recorded
(the engine skips it, ``retention_check`` says ``registration_changed``, the
admin shows old against new); and a version that changes the disposition
needs its approver's explicit confirmation (the service refuses without it,
the admin shows it as its own warning). ``version_diff`` lists a version's
rules against another's, field by field, in the order a reviewer reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from retention.models import Policy, PolicyVersion
from retention.rows.cascade import cascade_of
from retention.rows.registration import fingerprint, registration_changes, registration_of
from retention.rows.registry import row_class
from retention.selectors.policies import VERSION_RULE_FIELDS, version_governing

# Fields a policy version is compared on, in the order a reviewer reads them.
VERSION_DIFF_FIELDS = VERSION_RULE_FIELDS


@dataclass(frozen=True, slots=True)
class RegistrationDrift:
    """The code's registration of a class against the one its version approved."""

    data_class: str
    version: PolicyVersion
    approved: dict[str, Any] | None  # None: approved before registrations were recorded
    current: dict[str, Any]
    changes: tuple[tuple[str, str, str], ...]  # (part, as approved, in the code now)
    cascade_changed: bool

    @property
    def reason(self) -> str:
        """One sentence for a run's report, a log line and the check's output."""
        number = f"v{self.version.number}"
        if self.approved is None:
            return (
                f"the registration of {self.data_class} was not recorded when {number} was "
                "approved (before registrations were part of a version): approve a version "
                "that adopts it"
            )
        parts = [part for part, _, _ in self.changes]
        if self.cascade_changed:
            parts.append("what deleting a row also deletes, nulls or is blocked by")
        return (
            f"the registration of {self.data_class} in the code differs from the one approved "
            f"with {number} ({', '.join(parts)}): approve a version that adopts it"
        )


def registration_drift(version: PolicyVersion) -> RegistrationDrift | None:
    """How the code's registration differs from ``version``'s, or None when it matches.

    None also for a class of tracked objects (no registration). A version
    with no recorded registration (approved before they were recorded) is
    drift: nobody approved what its rows are, so none is disposed of.
    """
    row = row_class(version.policy.data_class)
    if row is None:
        return None
    current = registration_of(row)
    cascade = cascade_of(row.model)
    approved = version.registration if version.registration_fingerprint else None
    same = approved is not None and version.registration_fingerprint == fingerprint(current)
    cascade_same = version.cascade == cascade
    if same and cascade_same:
        return None
    return RegistrationDrift(
        data_class=version.policy.data_class,
        version=version,
        approved=approved,
        current=current,
        changes=tuple(registration_changes(approved, current)) if not same else (),
        cascade_changed=not cascade_same,
    )


def class_registration_drift(policy: Policy) -> RegistrationDrift | None:
    """The drift of the version a run of ``policy``'s class works by (see ``version_governing``)."""
    version = version_governing(policy)
    return None if version is None else registration_drift(version)


@dataclass(frozen=True, slots=True)
class DispositionChange:
    before: str
    after: str

    @property
    def words(self) -> str:
        return f"This version changes what happens to expired rows: {self.before} → {self.after}"


def disposition_change(
    version: PolicyVersion, in_force: PolicyVersion | None
) -> DispositionChange | None:
    """The disposition ``version`` would change from the one in force, if any."""
    if in_force is None or in_force.pk == version.pk:
        return None
    if in_force.disposition == version.disposition:
        return None
    return DispositionChange(before=in_force.disposition, after=version.disposition)


@dataclass(frozen=True, slots=True)
class FieldDiff:
    name: str
    label: str
    before: object
    after: object

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def shorter(self) -> bool:
        return (
            self.name == "retention_period"
            and isinstance(self.before, timedelta)
            and isinstance(self.after, timedelta)
            and self.after < self.before
        )


def version_diff(version: PolicyVersion, against: PolicyVersion | None) -> list[FieldDiff]:
    rows = []
    for name in VERSION_DIFF_FIELDS:
        label = str(getattr(PolicyVersion._meta.get_field(name), "verbose_name", name))
        before = getattr(against, name) if against is not None else None
        rows.append(FieldDiff(name, label, before, getattr(version, name)))
    return rows
