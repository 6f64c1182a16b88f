"""What a run works by, fixed when it starts: each class's rules, cutoff and scope.

The rules of every class in a run are copied into the run's report when it
starts (``ClassRules.as_json``), so a retry, a continuation task or a batch
on another host follows the same batch size, pace and cutoff even if a new
policy version was approved in between. Reading them back is a selector
(``retention.selectors.run_rules``); fixing them, checking them again and
the scope they give a run are here.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q

from retention.conf import settings
from retention.models import Policy, PolicyVersion, RecordQuerySet, RetentionRecord, Run, RunMode
from retention.rows.registry import row_class
from retention.selectors.erasure_execution import erase_records_q
from retention.selectors.policies import version_governing
from retention.selectors.run_rules import (
    DEFAULT_BATCH_SIZE,
    ERASE_CUTOFF,
    ClassRules,
    class_cutoff,
)
from retention.selectors.version_changes import registration_drift

logger = logging.getLogger("retention.engine")


def class_rules_for(policy: Policy, *, started_at: datetime | None = None) -> ClassRules:
    """The rules a run starting at ``started_at`` fixes for the policy's class."""
    version = version_governing(policy)
    if version is None:
        return ClassRules(
            policy.data_class, DEFAULT_BATCH_SIZE, None, settings.MAX_ATTEMPTS, timedelta(0)
        )
    row = row_class(policy.data_class)
    row_cutoff = None
    if row is not None and started_at is not None:
        # Rows cut by their own age: start − period − margin under the
        # version in force now; rows with a deadline: start − margin.
        row_cutoff = started_at - version.safety_margin
        if not row.by_expiry:
            row_cutoff -= version.retention_period
    drift = registration_drift(version) if row is not None else None
    if drift is not None:
        logger.warning("data class %s: no row is disposed of: %s", policy.data_class, drift.reason)
    return ClassRules(
        data_class=policy.data_class,
        batch_size=version.batch_size,
        rate_limit=version.rate_limit,
        max_attempts=version.max_attempts or settings.MAX_ATTEMPTS,
        safety_margin=version.safety_margin,
        disposition=version.disposition,
        version_id=version.pk,
        version_number=version.number,
        row_cutoff=row_cutoff,
        cascade=version.cascade if row is not None else None,
        registration_changed=drift.reason if drift is not None else "",
    )


def erase_rules(rules: ClassRules, planned: dict[str, Any]) -> ClassRules:
    """A class's rules in an erase run: what it does on erasure, as the frozen scope
    says, and no cutoff by age (a class of rows gets ``ERASE_CUTOFF``)."""
    if row_class(rules.data_class) is None:
        return rules
    return replace(
        rules,
        disposition=str(planned.get("on_erasure") or rules.disposition),
        row_cutoff=ERASE_CUTOFF,
    )


def rules_version(rules: ClassRules) -> PolicyVersion | None:
    """The version a run of the class works by (with its policy), as its rules name it."""
    if rules.version_id is None:
        return None
    return PolicyVersion.objects.select_related("policy").filter(pk=rules.version_id).first()


def registration_recheck(
    run: Run, rules: ClassRules, *, version: PolicyVersion | None = None
) -> str:
    """Why the class disposes of nothing more in this run ("" while its code matches).

    Asked again when each group of a class's pages starts (a queued batch,
    an inline sweep starting or resuming, its second lane): the run's rules
    were fixed at its start, but its later pages may run under another
    deploy's code. The version compared is the one the run works by (its
    rules), not one approved since. A drift found is stored in the run's
    report as the start's check stores it (``registration_changed`` in the
    class's rules), so the executors take no more page of the class and the
    run says why. ``version``: the rules' version, already read (a sweep
    keeps it, so a check costs no query).
    """
    if rules.registration_changed:
        return rules.registration_changed
    version = version or rules_version(rules)
    if version is None:
        return ""
    drift = registration_drift(version)
    if drift is None:
        return ""
    registration_changed_record(run, rules.data_class, drift.reason)
    return drift.reason


def registration_changed_record(run: Run, data_class: str, reason: str) -> None:
    """Store why the class disposes of nothing more, in the run's rules of the class."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        report = dict(locked.report) if isinstance(locked.report, dict) else {}
        stored = dict(report.get("rules") or {})
        entry = dict(stored.get(data_class) or {})
        if entry.get("registration_changed"):
            run.report = report
            return
        entry["registration_changed"] = reason
        stored[data_class] = entry
        report["rules"] = stored
        Run.objects.filter(pk=run.pk).update(report=report)
    run.report = report
    logger.warning(
        "data class %s: no more rows are disposed of in run %s: %s",
        data_class,
        run.pk,
        reason,
        extra={"run_id": str(run.pk)},
    )


def run_scope(run: Run) -> RecordQuerySet:
    """The records a run may touch: its classes, its tenant, its records."""
    qs: RecordQuerySet = RetentionRecord.objects.filter(data_class__in=run.data_classes)
    if run.tenant_id:
        qs = qs.filter(tenant_id=run.tenant_id)
    record_ids = run.report.get("record_ids") if isinstance(run.report, dict) else None
    if record_ids:
        qs = qs.filter(pk__in=record_ids)
    if run.mode == RunMode.ERASE:
        qs = qs.filter(erase_records_q(run))
    return qs


def expired_q(run: Run) -> Q:
    q = Q(pk__in=[])
    for name in run.data_classes:
        q |= Q(data_class=name, expires_at__lte=class_cutoff(run, name))
    return q


def expired_pending(run: Run) -> RecordQuerySet:
    """What the run owes: pending records of its scope expired at its cutoffs."""
    return run_scope(run).pending().filter(expired_q(run))
