"""The data map: every model and every store of the host, and what governs it (SPEC §2).

A governance owner's first question is whether the host holds data no
policy governs. Each model of the project (third-party and auto-created
through tables included) is ``governed`` (a registered data class of model
rows), ``exempt`` (``RETENTION_EXEMPT_MODELS``, with a written reason),
``internal`` (Lethe's and Django's bookkeeping, ``INTERNAL_MODELS``) or
``ungoverned``, with its personal-looking fields flagged. Tracked-object
classes and the stores they live in come after, each store with what its
last reconciliation found.

Nothing here loads a table to count it: on PostgreSQL the figures are the
planner's estimates (``pg_class.reltuples``, ``EXPLAIN``), marked as such;
elsewhere ``COUNT(*)``. The oldest row of a governed class is one ``MIN()``
over its age or expiry column, which a registration is expected to index.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta

from django.apps import apps
from django.conf import settings as django_settings
from django.db import connection, models
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Min
from django.utils import timezone

from retention.conf import settings
from retention.models import Policy, PolicyVersion, RetentionRecord, RunMode
from retention.rows.registry import RowClass, row_classes
from retention.selectors.personal_fields import PersonalField, personal_fields
from retention.selectors.policies import version_in_force
from retention.selectors.reconcile_health import StorageReconciliation, reconciliations_last
from retention.selectors.runs import runs_covering
from retention.selectors.table_counts import (
    distinct_storages,
    exact_count,
    on_postgres,
    planner_rows,
    table_estimates,
)

GOVERNED = "governed"
EXEMPT = "exempt"
INTERNAL = "internal"
UNGOVERNED = "ungoverned"
STATUSES = (GOVERNED, EXEMPT, INTERNAL, UNGOVERNED)

# Apps whose every model is Lethe's own bookkeeping: policies, records, the ledger, keys.
INTERNAL_APPS: dict[str, str] = {
    "retention": "Lethe's own tables: policies, records, runs and the evidence chain",
    "retention_rest": "Lethe's own tables: the tenants' API keys",
}
# Django's bookkeeping tables, by label (django_migrations is no app's model).
INTERNAL_MODELS: dict[str, str] = {
    "migrations.Migration": "Django's record of applied migrations",
    "contenttypes.ContentType": "Django's content types",
    "auth.Permission": "Django's permissions",
}
# Stores that hold the project's code assets, not data.
_NOT_DATA_STORES = frozenset({"staticfiles"})


@dataclass(frozen=True, slots=True)
class LastRun:
    run_id: str
    mode: str
    status: str
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class Governance:
    """What one data class does to a model's rows (or to tracked objects)."""

    data_class: str
    policy_id: int | None
    version: int | None  # the approved version's number; None: none approved
    retention_period: timedelta | None
    disposition: str | None
    tenant_field: str | None
    time_field: str | None  # the age or expiry column, for model rows
    by_expiry: bool
    oldest_row_at: datetime | None
    last_run: LastRun | None
    # The rows' data subject column (register_model(subject_field=)) and what an
    # erasure request does to the class (the version in force's on_erasure).
    subject_field: str | None = None
    on_erasure: str | None = None

    @property
    def note(self) -> str:
        if self.policy_id is None:
            return "no policy yet"
        if self.version is None:
            return "no approved version"
        return ""


@dataclass(frozen=True, slots=True)
class ModelEntry:
    label: str
    table: str
    status: str
    reason: str  # exempt or internal: why; empty otherwise
    note: str  # a proxy, an auto-created table, an exemption a registration overrides
    personal_fields: tuple[PersonalField, ...]
    rows: int | None  # None: unknown (never analysed, or no table)
    rows_estimated: bool
    governance: tuple[Governance, ...] = ()

    @property
    def ungoverned_personal(self) -> bool:
        return self.status == UNGOVERNED and bool(self.personal_fields)


@dataclass(frozen=True, slots=True)
class TrackedClass:
    """A class of tracked objects in one store, with its records not yet deleted."""

    storage: str
    records: int | None
    records_estimated: bool
    governance: Governance

    @property
    def data_class(self) -> str:
        return self.governance.data_class


@dataclass(frozen=True, slots=True)
class Store:
    alias: str
    backend: str
    reconciliation: StorageReconciliation | None

    @property
    def orphans(self) -> int | None:
        return None if self.reconciliation is None else self.reconciliation.counts["orphans"]


@dataclass(frozen=True, slots=True)
class DataMap:
    generated_at: datetime
    estimated: bool  # the counts are the planner's estimates
    models: tuple[ModelEntry, ...]
    tracked: tuple[TrackedClass, ...]
    stores: tuple[Store, ...]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ungoverned_personal(self) -> tuple[ModelEntry, ...]:
        """Ungoverned models with personal-looking fields: what ``--strict`` fails on."""
        return tuple(entry for entry in self.models if entry.ungoverned_personal)


# --------------------------------------------------------------------------
# What governs a data class


def _last_run(data_class: str) -> LastRun | None:
    run = (
        runs_covering(data_class)
        .filter(mode__in=[RunMode.DRY_RUN, RunMode.ENFORCE])
        .order_by("-started_at")
        .first()
    )
    if run is None:
        return None
    return LastRun(
        run_id=str(run.pk),
        mode=run.mode,
        status=run.status,
        started_at=run.started_at,
        finished_at=run.finished_at,
    )


def _governance(
    data_class: str,
    policies: dict[str, Policy],
    in_force: dict[str, PolicyVersion],
    row: RowClass | None = None,
) -> Governance:
    policy = policies.get(data_class)
    version = in_force.get(data_class)
    oldest = None
    if row is not None and row.time_field:
        oldest = row.queryset().aggregate(oldest=Min(row.time_field))["oldest"]
        if oldest is not None and not isinstance(oldest, datetime):
            # A date column: its day starts at midnight in the project's zone.
            oldest = timezone.make_aware(datetime.combine(oldest, time.min))
    return Governance(
        data_class=data_class,
        policy_id=policy.pk if policy is not None else None,
        version=version.number if version is not None else None,
        retention_period=version.retention_period if version is not None else None,
        disposition=version.disposition if version is not None else None,
        on_erasure=version.on_erasure if version is not None else None,
        tenant_field=row.tenant_field if row is not None else None,
        subject_field=row.subject_field if row is not None else None,
        time_field=row.time_field if row is not None else None,
        by_expiry=row.by_expiry if row is not None else False,
        oldest_row_at=oldest,
        last_run=_last_run(data_class),
    )


# --------------------------------------------------------------------------
# The map


def _all_models() -> list[type[models.Model]]:
    found = list(apps.get_models(include_auto_created=True))
    found.append(MigrationRecorder.Migration)
    return sorted(found, key=lambda m: m._meta.label_lower)


def _internal_reason(label: str, app_label: str) -> str:
    return INTERNAL_MODELS.get(label) or INTERNAL_APPS.get(app_label, "")


def _note(model: type[models.Model]) -> str:
    opts = model._meta
    if opts.proxy and opts.concrete_model is not None:
        return f"proxy of {opts.concrete_model._meta.label}"
    owner = opts.auto_created
    if isinstance(owner, type) and issubclass(owner, models.Model):
        return f"many-to-many table of {owner._meta.label}"
    if not opts.managed:
        return "unmanaged"
    return ""


def _exempt_by_label() -> dict[str, str]:
    """RETENTION_EXEMPT_MODELS by lower-case label: ``auth.user`` and ``auth.User`` agree."""
    return {label.lower(): reason for label, reason in settings.EXEMPT_MODELS.items()}


def data_map(*, now: datetime) -> DataMap:
    """The whole map. Raises ImproperlyConfigured for an exemption without a reason."""
    exempt = _exempt_by_label()
    by_model: dict[type[models.Model], list[RowClass]] = {}
    for row in row_classes().values():
        by_model.setdefault(row.model, []).append(row)
    policies = {p.data_class: p for p in Policy.objects.all()}
    in_force = {
        name: version
        for name in policies
        if (version := version_in_force(data_class=name)) is not None
    }
    estimated = on_postgres()
    estimates = table_estimates() if estimated else {}

    entries = []
    for model in _all_models():
        opts = model._meta
        label = opts.label
        internal = _internal_reason(label, opts.app_label)
        rows_here = by_model.get(model, [])
        note = _note(model)
        if internal:
            status, reason = INTERNAL, internal
        elif rows_here:
            status, reason = GOVERNED, ""
            if opts.label_lower in exempt:
                note = "; ".join(filter(None, [note, "also in RETENTION_EXEMPT_MODELS"]))
        elif opts.label_lower in exempt:
            status, reason = EXEMPT, exempt[opts.label_lower]
        else:
            status, reason = UNGOVERNED, ""
        if estimated:
            rows = estimates.get(opts.db_table)
        else:
            rows = exact_count(model._base_manager.using(connection.alias).all())
        governance = tuple(
            _governance(row.data_class, policies, in_force, row)
            for row in sorted(rows_here, key=lambda r: r.data_class)
        )
        entries.append(
            ModelEntry(
                label=label,
                table=opts.db_table,
                status=status,
                reason=reason,
                note=note,
                personal_fields=personal_fields(model),
                rows=rows,
                rows_estimated=estimated,
                governance=governance,
            )
        )

    row_class_names = set(row_classes())
    tracked_names = sorted(name for name in policies if name not in row_class_names)
    tracked = tuple(_tracked(tracked_names, policies, in_force, estimated=estimated))
    stores = tuple(_stores(t.storage for t in tracked))
    counts = {status: sum(1 for e in entries if e.status == status) for status in STATUSES}
    return DataMap(
        generated_at=now,
        estimated=estimated,
        models=tuple(entries),
        tracked=tracked,
        stores=stores,
        counts=counts,
    )


def _tracked(
    names: list[str],
    policies: dict[str, Policy],
    in_force: dict[str, PolicyVersion],
    *,
    estimated: bool,
) -> Iterable[TrackedClass]:
    """Each class of tracked objects per store, with its records not yet deleted.

    Elsewhere one grouped ``COUNT``. On PostgreSQL, the stores in use come
    from a skip scan and each (class, store) figure is the planner's: with
    one store (the usual case) the class's estimate is the store's; with
    several, the planner splits it by the stores' shares. A class with no
    record waiting for its deadline shows 0, exactly.
    """
    if not names:
        return
    live = RetentionRecord.objects.filter(data_class__in=names, deleted_at__isnull=True)
    if estimated:
        storages = distinct_storages()
        for name in names:
            governance = _governance(name, policies, in_force)
            # The planner never estimates 0: a class with no record in the
            # claim index (retention_record_due, one probe) has none to show.
            due = live.filter(data_class=name, retryable=True)
            if not storages or not due.exists():
                yield TrackedClass("", 0, False, governance)
                continue
            for storage in storages:
                records = planner_rows(
                    RetentionRecord.objects.filter(
                        data_class=name, storage=storage, deleted_at__isnull=True
                    )
                )
                yield TrackedClass(storage, records, True, governance)
        return
    counts: dict[str, dict[str, int]] = {}
    for row in (
        live.values("data_class", "storage").annotate(n=models.Count("id")).order_by("storage")
    ):
        counts.setdefault(row["data_class"], {})[row["storage"]] = row["n"]
    for name in names:
        governance = _governance(name, policies, in_force)
        per_store = counts.get(name) or {"": 0}
        for storage, records in per_store.items():
            yield TrackedClass(storage, records, False, governance)


def _stores(in_use: Iterable[str]) -> Iterable[Store]:
    """Every store of the project that may hold data, with its last reconciliation."""
    configured = getattr(django_settings, "STORAGES", {})
    last = {r.storage: r for r in reconciliations_last()}
    aliases = {a for a in configured if a not in _NOT_DATA_STORES}
    aliases |= set(settings.STORAGE_ADAPTERS) | set(last) | {a for a in in_use if a}
    for alias in sorted(aliases):
        backend = str(configured.get(alias, {}).get("BACKEND", ""))
        yield Store(alias=alias, backend=backend, reconciliation=last.get(alias))


# --------------------------------------------------------------------------
# For the system checks: no database needed


def unknown_exempt_labels() -> list[str]:
    """Labels of RETENTION_EXEMPT_MODELS that name no model of the project."""
    known = {m._meta.label_lower for m in _all_models()}
    return [label for label in settings.EXEMPT_MODELS if label.lower() not in known]


def ungoverned_personal_models() -> list[tuple[str, tuple[PersonalField, ...]]]:
    """Ungoverned models with personal-looking fields, from the code alone."""
    exempt = _exempt_by_label()
    governed = {row.model for row in row_classes().values()}
    found = []
    for model in _all_models():
        opts = model._meta
        label = opts.label
        if (
            _internal_reason(label, opts.app_label)
            or model in governed
            or opts.label_lower in exempt
        ):
            continue
        fields = personal_fields(model)
        if fields:
            found.append((label, fields))
    return found
