"""What the review of a row class's version says about its registration: old against new.

Kept apart from ``versions`` (the admin of versions) so each stays short; the
rule itself lives in ``retention.selectors.version_changes``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from retention.models import PolicyVersion, PolicyVersionStatus
from retention.rows.registration import fingerprint, registration_changes, registration_of
from retention.rows.registry import RowClass
from retention.selectors.rows import row_class_figures
from retention.selectors.version_changes import disposition_change, registration_drift

NOT_YET_APPROVED = (PolicyVersionStatus.DRAFT, PolicyVersionStatus.SUBMITTED)


def changes_context(
    version: PolicyVersion, in_force: PolicyVersion | None, row: RowClass | None, *, now: datetime
) -> dict[str, Any]:
    """What the version and review pages show apart from the diff: a disposition
    change, the registration old against new, and the rows due under the code's scope."""
    return {
        "disposition_change": disposition_change(version, in_force),
        "registration_review": registration_review(version, in_force, row),
        "row_figures": row_class_figures(row, version, now=now)
        if row is not None and version.status in NOT_YET_APPROVED
        else None,
    }


def registration_review(
    version: PolicyVersion, in_force: PolicyVersion | None, row: RowClass | None
) -> dict[str, Any] | None:
    """What a reviewer reads about the registration of a row class: old against new.

    A version in force whose registration the code no longer matches says so
    (its rows wait); a version not yet approved that records another
    registration than the one in force says it adopts it; one drafted before
    the code changed again says approving it will be refused.
    """
    if row is None:
        return None
    if version.status == PolicyVersionStatus.APPROVED:
        drift = registration_drift(version)
        if drift is None:
            return None
        return {
            "heading": f"The code no longer matches the registration approved with "
            f"version {version.number}: no run disposes of these rows until a version that "
            "adopts it is approved",
            "before": f"as approved with version {version.number}",
            "after": "in the code now",
            "changes": drift.changes,
            "adopt": True,
        }
    if version.status not in NOT_YET_APPROVED or not version.registration:
        return None
    if version.registration_fingerprint != fingerprint(registration_of(row)):
        return {
            "heading": f"The code's registration changed after version {version.number} was "
            "drafted: approving it will be refused. Draft a new version",
            "before": f"as drafted with version {version.number}",
            "after": "in the code now",
            "changes": tuple(registration_changes(version.registration, registration_of(row))),
            "adopt": True,
        }
    if in_force is None or in_force.registration_fingerprint == version.registration_fingerprint:
        return None
    return {
        "heading": f"Approving version {version.number} adopts the registration in the code, "
        f"which differs from version {in_force.number}'s",
        "before": f"v{in_force.number}",
        "after": f"v{version.number}",
        "changes": tuple(registration_changes(in_force.registration, version.registration)),
        "adopt": False,
    }
