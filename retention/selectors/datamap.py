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

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.apps import apps
from django.conf import settings as django_settings
from django.db import DatabaseError, connection, models, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Min
from django.utils import timezone
from django.utils.duration import duration_iso_string

from retention.conf import settings
from retention.durations import format_duration
from retention.models import Policy, PolicyVersion, RetentionRecord, RunMode
from retention.rows.registry import RowClass, row_classes
from retention.selectors.policies import version_in_force
from retention.selectors.reconcile_health import StorageReconciliation, reconciliations_last
from retention.selectors.runs import runs_covering

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
# Words of a field's name that suggest personal data; RETENTION_PERSONAL_FIELD_NAMES adds more.
PERSONAL_FIELD_NAMES: tuple[str, ...] = (
    "name",
    "phone",
    "address",
    "birth",
    "ip",
    "user agent",
    "token",
)
# A word of at least this many letters also matches inside a longer word
# ("username", "telephone", "dateofbirth"); a shorter one ("ip") only whole.
_INSIDE_MIN = 4
# Stores that hold the project's code assets, not data.
_NOT_DATA_STORES = frozenset({"staticfiles"})


@dataclass(frozen=True, slots=True)
class PersonalField:
    """A field that looks like it holds personal data, and why it looks so."""

    name: str
    why: str


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
    # Not yet part of a registration or a version: shown as "—".
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
# Personal-looking fields


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [word for word in re.split(r"[^a-z0-9]+", spaced.lower()) if word]


def _name_matches(words: list[str], phrase: str) -> bool:
    wanted = _words(phrase)
    if not wanted:
        return False
    if len(wanted) > 1:
        size = len(wanted)
        joined = "".join(wanted)
        return joined in words or any(
            words[i : i + size] == wanted for i in range(len(words) - size + 1)
        )
    (word,) = wanted
    if len(word) < _INSIDE_MIN:
        return word in words
    return any(w.startswith(word) or w.endswith(word) for w in words)


def personal_field_names() -> tuple[str, ...]:
    """The built-in words and the host's (``RETENTION_PERSONAL_FIELD_NAMES``)."""
    return tuple(dict.fromkeys((*PERSONAL_FIELD_NAMES, *settings.PERSONAL_FIELD_NAMES)))


def personal_fields(model: type[models.Model]) -> tuple[PersonalField, ...]:
    """The model's columns that look personal: by type (subclasses too), then by name."""
    names = personal_field_names()
    found = []
    for f in model._meta.concrete_fields:
        kind = type(f).__name__
        if isinstance(f, models.EmailField):
            why = f"email address ({kind})"
        elif isinstance(f, models.GenericIPAddressField):
            why = f"IP address ({kind})"
        elif isinstance(f, models.ImageField):
            why = f"image file ({kind})"
        elif isinstance(f, models.FileField):
            why = f"file ({kind})"
        else:
            words = _words(f.name)
            matched = next((phrase for phrase in names if _name_matches(words, phrase)), None)
            if matched is None:
                continue
            why = f"name matches {matched!r}"
        found.append(PersonalField(name=f.name, why=why))
    return tuple(found)


# --------------------------------------------------------------------------
# Counting without reading the tables


def _on_postgres() -> bool:
    return connection.vendor == "postgresql"


def _table_estimates() -> dict[str, int | None]:
    """PostgreSQL: the planner's row estimate of every table on the search path.

    ``reltuples`` is -1 for a table never vacuumed nor analysed: unknown.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.reltuples FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND n.nspname = ANY(current_schemas(false))"
        )
        return {name: (int(tuples) if tuples >= 0 else None) for name, tuples in cursor.fetchall()}


def _exact_count(queryset: models.QuerySet[Any]) -> int | None:
    try:
        with transaction.atomic():
            return queryset.count()
    except DatabaseError:  # an unmanaged model without its table
        return None


def _planner_rows(queryset: models.QuerySet[Any]) -> int | None:
    """PostgreSQL: how many rows the planner expects ``queryset`` to return."""
    try:
        with transaction.atomic():
            plan = json.loads(queryset.explain(format="json"))
    except (DatabaseError, ValueError):
        return None
    try:
        return int(plan[0]["Plan"]["Plan Rows"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None


def _distinct_storages() -> list[str]:
    """PostgreSQL: the stores records are in, one index probe each (a skip scan).

    The unique index on (storage, object_key) leads with the store, so each
    step asks it for the next store after the last: cheap however many
    records there are.
    """
    table = connection.ops.quote_name(RetentionRecord._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE s(storage) AS ("  # noqa: S608 (a quoted table name)
            f" (SELECT storage FROM {table} ORDER BY storage LIMIT 1)"
            f" UNION ALL SELECT (SELECT storage FROM {table} WHERE storage > s.storage"
            f" ORDER BY storage LIMIT 1) FROM s WHERE s.storage IS NOT NULL"
            f") SELECT storage FROM s WHERE storage IS NOT NULL"
        )
        return [row[0] for row in cursor.fetchall()]


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
        tenant_field=row.tenant_field if row is not None else None,
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
    estimated = _on_postgres()
    estimates = _table_estimates() if estimated else {}

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
            rows = _exact_count(model._base_manager.using(connection.alias).all())
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
    several, the planner splits it by the stores' shares.
    """
    if not names:
        return
    live = RetentionRecord.objects.filter(data_class__in=names, deleted_at__isnull=True)
    if estimated:
        storages = _distinct_storages()
        for name in names:
            governance = _governance(name, policies, in_force)
            if not storages:
                yield TrackedClass("", 0, False, governance)
            for storage in storages:
                records = _planner_rows(
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
# How people and machines read it


def when_text(value: datetime | None) -> str:
    """An instant as people read it: '2026-12-03 08:02 UTC'; '—' for none."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def rows_text(value: int | None, *, estimated: bool) -> str:
    if value is None:
        return "unknown"
    return f"~{value}" if estimated else str(value)


def period_text(governance: Governance) -> str:
    if governance.retention_period is None:
        return "—"
    return format_duration(governance.retention_period)


def _rfc3339(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _governance_json(g: Governance) -> dict[str, Any]:
    return {
        "data_class": g.data_class,
        "policy_version": g.version,
        "retention_period": (
            duration_iso_string(g.retention_period) if g.retention_period is not None else None
        ),
        "disposition": g.disposition,
        "on_erasure": g.on_erasure,
        "subject_field": g.subject_field,
        "tenant_field": g.tenant_field,
        "time_field": g.time_field,
        "oldest_row_at": _rfc3339(g.oldest_row_at),
        "last_run": (
            None
            if g.last_run is None
            else {
                "id": g.last_run.run_id,
                "mode": g.last_run.mode,
                "status": g.last_run.status,
                "started_at": _rfc3339(g.last_run.started_at),
                "finished_at": _rfc3339(g.last_run.finished_at),
            }
        ),
        "note": g.note or None,
    }


def data_map_as_json(found: DataMap) -> dict[str, Any]:
    """The map for machines (``--json``, the admin's JSON export)."""
    return {
        "generated_at": _rfc3339(found.generated_at),
        "counts_are_estimates": found.estimated,
        "statuses": found.counts,
        "models": [
            {
                "model": e.label,
                "table": e.table,
                "status": e.status,
                "reason": e.reason or None,
                "note": e.note or None,
                "personal_fields": [{"field": p.name, "why": p.why} for p in e.personal_fields],
                "rows": e.rows,
                "rows_estimated": e.rows_estimated,
                "data_classes": [_governance_json(g) for g in e.governance],
            }
            for e in found.models
        ],
        "tracked_classes": [
            {
                **_governance_json(t.governance),
                "storage": t.storage or None,
                "records": t.records,
                "records_estimated": t.records_estimated,
            }
            for t in found.tracked
        ],
        "stores": [
            {
                "storage": s.alias,
                "backend": s.backend or None,
                "last_reconciliation": (
                    None
                    if s.reconciliation is None
                    else {
                        "run_id": s.reconciliation.run_id,
                        "finished_at": _rfc3339(s.reconciliation.finished_at),
                        "dry_run": s.reconciliation.dry_run,
                        "orphans": s.reconciliation.counts["orphans"],
                    }
                ),
            }
            for s in found.stores
        ],
        "ungoverned": [
            {"model": e.label, "fields": [p.name for p in e.personal_fields]}
            for e in found.ungoverned_personal
        ],
    }


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
