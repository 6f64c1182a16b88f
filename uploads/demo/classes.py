"""A data class's mode, version in force and rules, said in words."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.management.base import CommandError

from retention import api
from retention.models import (
    DataClassMode,
    Disposition,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    Run,
    RunMode,
    RunStatus,
)
from uploads.demo.formatting import and_list, period


def row_rule(row: api.RowClass, version: PolicyVersion) -> str:
    """How a version disposes of a class of model rows, for a person."""
    what = f"rows of {row.label} by {row.time_field}"
    if version.disposition == Disposition.REDACT:
        return f"{what}, then {and_list(list(row.redact))} redacted"
    return f"{what}, then deleted"


def reviewed(policy: Policy, row: api.RowClass) -> str:
    """What the reviewed dry run showed of a class of model rows."""
    run = policy.reviewed_dry_run
    figures = run.report.get("per_data_class", {}).get(policy.data_class, {}) if run else {}
    if figures.get("kind") != "rows":
        return f"rows of {row.label} past their period are disposed of"
    if figures["disposition"] == Disposition.REDACT:
        text = (
            f"rows of {figures['model']} past their period are redacted; the dry run: "
            f"{figures['eligible']} to redact"
        )
    else:
        text = (
            f"rows of {figures['model']} past their period are deleted; the dry run: "
            f"{figures['eligible']} to delete"
        )
    text += f", {figures['held']} under legal hold"
    if figures["protected"]:
        text += f", {figures['protected']} kept by a PROTECT relation"
    related = figures.get("related")
    if related is not None:
        taken = [f"{n} {m}" for m, n in related["deletes"].items()]
        taken += [f"{n} {m} set to NULL" for m, n in related["nulls"].items()]
        text += f", taking {', '.join(taken) if taken else 'no related row'} with them"
    return text


def approved_version(policy: Policy) -> PolicyVersion | None:
    return policy.versions.filter(status=PolicyVersionStatus.APPROVED).first()


def mode(policy: Policy) -> str:
    """'enforced (v1, 30 days, locked)': the mode and the version in force."""
    version = approved_version(policy)
    if version is None:
        rule = "no version in force"
    else:
        rule = f"v{version.number}, {period(version.retention_period)}"
        if version.locked:
            rule += ", locked"
        row = api.registration(policy.data_class)
        if row is not None:
            rule += f", {row_rule(row, version)}"
    state = "enforced" if policy.mode == DataClassMode.ENFORCE else "report-only"
    return f"{state} ({rule})"


def registration_required(data_class: str) -> api.RowClass:
    row = api.registration(data_class)
    if row is None:
        raise CommandError(f"{data_class} is not registered: see UploadsConfig.ready().")
    return row


def last_enforced(data_class: str) -> tuple[Run | None, datetime | None]:
    """The newest finished enforce run over a class of model rows, and its cutoff for them.

    Every row at or before that cutoff was disposed of by that run, unless held;
    the report's own clock would move the line by the seconds since.
    """
    runs = Run.objects.filter(mode=RunMode.ENFORCE, status=RunStatus.FINISHED)
    for run in runs.order_by("-started_at"):
        if data_class in run.data_classes:
            return run, api.run_row_cutoff(run, data_class)
    return None, None


def rows_in_force(
    data_class: str, policy: Policy
) -> tuple[Run | None, datetime | None, timedelta, api.RowHolds]:
    """A class of model rows as the report judges it: the last enforce run over it,
    that run's cutoff for it, the period in force and what the holds protect."""
    registration_required(data_class)
    run, cutoff = last_enforced(data_class)
    version = approved_version(policy)
    keep = version.retention_period if version else timedelta(0)
    return run, cutoff, keep, api.row_holds(data_class)
