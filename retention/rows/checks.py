"""System checks of the host models registered as data classes (retention.E016-E024, W004).

A registration is made in ``ready()`` and cannot be refused there without
hiding every problem behind the first: these checks look at each one against
its model's fields and name all that cannot work, each with its own id, at
``manage.py check``. They read ``_meta``; W004 also reads the migrations on
disk (an index a host creates on another app's table with
``retention.migration_ops.AddIndexOnModel``) and, when the checks are given
databases (``check --database``, ``migrate``), the indexes those databases
really have.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.apps import AppConfig
from django.apps import apps as django_apps
from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import DatabaseError, connections, models
from django.db.migrations.loader import MigrationLoader

from retention import redaction
from retention.conf import settings
from retention.migration_ops import AddIndexOnModel
from retention.models import data_class_validator
from retention.rows.registry import RowClass, row_classes

# (table, column): the first column of some index of the table.
Leading = set[tuple[str, str]]


@register("retention", Tags.models)
def check_row_classes(
    app_configs: Iterable[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    apps = None if app_configs is None else set(app_configs)
    rows = [
        row
        for row in sorted(row_classes().values(), key=lambda r: str(r.data_class))
        if apps is None or row.model._meta.app_config in apps
    ]
    leading: Leading | None = None
    messages: list[CheckMessage] = []
    for row in rows:
        messages += _data_class(row)
        if leading is None and _needs_index_lookup(row):
            leading = _planned_indexes() | _database_indexes(rows, kwargs.get("databases"))
        messages += _time_fields(row, leading or set())
        messages += _field_paths(row)
        messages += _redact(row)
        messages += _files(row)
    return messages


def _who(row: RowClass) -> str:
    return f"{row.label} (data class {row.data_class!r})"


def _column(model: type[models.Model], name: str) -> models.Field[Any, Any] | None:
    """The field named ``name`` when it is a column of the model's table (or many-to-many)."""
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return None
    if not isinstance(field, models.Field):
        return None  # a reverse relation: its rows are in another table
    if not field.concrete and not field.many_to_many:
        return None
    return field


def _unknown(row: RowClass, option: str, name: str, model: type[models.Model]) -> Error:
    columns = ", ".join(f.name for f in model._meta.concrete_fields)
    return Error(
        f"{_who(row)}: {option} names {name!r}, which is not a column of {model._meta.label}.",
        hint=f"Columns of {model._meta.label}: {columns}.",
        id="retention.E016",
    )


def _data_class(row: RowClass) -> list[CheckMessage]:
    try:
        if not isinstance(row.data_class, str):
            raise ValidationError(f"expected a string, not {type(row.data_class).__name__}")
        data_class_validator(row.data_class)
    except ValidationError as exc:
        return [
            Error(
                f"{row.label}: the data class name {row.data_class!r} is refused: "
                f"{' '.join(exc.messages)}",
                hint="A data class is lower-case letters, digits, '.', '_' or '-', "
                "e.g. 'crm.accounts'.",
                id="retention.E023",
            )
        ]
    return []


def _time_fields(row: RowClass, leading: Leading) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    for option, name in (("age_field", row.age_field), ("expires_field", row.expires_field)):
        if name is None:
            continue
        field = _column(row.model, name)
        if field is None:
            messages.append(_unknown(row, option, name, row.model))
        elif not isinstance(field, models.DateField):
            messages.append(
                Error(
                    f"{_who(row)}: {option} {name!r} is a {type(field).__name__}; "
                    "rows are compared with a run's cutoff by a date or a timestamp.",
                    hint=f"Name a DateTimeField (or DateField) of {row.label}.",
                    id="retention.E017",
                )
            )
        elif not _indexed(row.model, field) and not _accepted(row):
            table = row.model._meta.db_table
            if (table, field.column) not in leading:
                messages.append(_missing_index(row, option, field))
    return messages


def _indexed(model: type[models.Model], field: models.Field[Any, Any]) -> bool:
    """True when some index of the table starts with ``field``'s column."""
    if getattr(field, "db_index", False) or field.unique:
        return True
    meta = model._meta
    firsts = [index.fields[0].lstrip("-") for index in meta.indexes if index.fields]
    firsts += [
        c.fields[0] for c in meta.constraints if isinstance(c, models.UniqueConstraint) and c.fields
    ]
    firsts += [together[0] for together in meta.unique_together if together]
    return field.name in firsts or field.attname in firsts


def _needs_index_lookup(row: RowClass) -> bool:
    """True when W004 may fire for the class: its time column has no index in ``_meta``."""
    field = _column(row.model, row.time_field)
    return (
        isinstance(field, models.DateField)
        and not _indexed(row.model, field)
        and not _accepted(row)
    )


def _accepted(row: RowClass) -> bool:
    """The host said, with a reason, that the class does without an index."""
    reason = settings.ACCEPT_UNINDEXED.get(row.data_class)
    return isinstance(reason, str) and bool(reason.strip())


def _planned_indexes() -> Leading:
    """Indexes that ``AddIndexOnModel`` operations in the migrations on disk create."""
    modules = getattr(django_settings, "MIGRATION_MODULES", {}) or {}
    return _planned_indexes_in(tuple(sorted((k, str(v)) for k, v in modules.items())))


@functools.lru_cache(maxsize=4)
def _planned_indexes_in(modules: tuple[tuple[str, str], ...]) -> Leading:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    found: Leading = set()
    for migration in loader.disk_migrations.values():
        for operation in migration.operations:
            if not isinstance(operation, AddIndexOnModel):
                continue
            try:
                model = django_apps.get_model(operation.app_label, operation.model_name)
                first = model._meta.get_field(operation.fields[0].lstrip("-"))
            except (LookupError, FieldDoesNotExist):
                continue
            column = getattr(first, "column", None)
            if column:
                found.add((model._meta.db_table, column))
    return found


def _database_indexes(rows: list[RowClass], databases: Any) -> Leading:
    """The first column of each real index of the classes' tables, in the databases given.

    Without databases (a plain ``manage.py check``) nothing is asked; a
    database that cannot be reached is passed over: the check then knows
    the model's and the migrations' indexes only.
    """
    found: Leading = set()
    tables = {row.model._meta.db_table for row in rows}
    for alias in databases or ():
        connection = connections[alias]
        try:
            with connection.cursor() as cursor:
                existing = set(connection.introspection.table_names(cursor))
                for table in tables & existing:
                    constraints = connection.introspection.get_constraints(cursor, table)
                    for info in constraints.values():
                        columns = info.get("columns") or []
                        if columns and columns[0] and not info.get("foreign_key"):
                            found.add((table, columns[0]))
        except DatabaseError:
            continue
    return found


def _installed_package(model: type[models.Model]) -> bool:
    """True for a model of an app the host did not write (an installed package, Django's own)."""
    config = model._meta.app_config
    if config is None:
        return False
    if config.name.startswith("django."):
        return True
    parts = Path(config.path).parts
    return "site-packages" in parts or "dist-packages" in parts


def _missing_index(row: RowClass, option: str, field: models.Field[Any, Any]) -> Warning:
    model = row.model
    concrete = model._meta.concrete_model or model
    meta = concrete._meta
    pk = meta.pk.name if meta.pk is not None else "id"
    index = models.Index(fields=[field.name, pk])
    index.set_name_with_model(concrete)
    fields = f'["{field.name}", "{pk}"]'
    sharing = sorted(
        other.data_class
        for other in row_classes().values()
        if other.data_class != row.data_class
        and other.model._meta.db_table == meta.db_table
        and other.time_field == field.name
    )
    shared = (
        f" One index serves every class on {meta.db_table}: it also serves "
        f"{', '.join(repr(name) for name in sharing)}."
        if sharing
        else ""
    )
    accept = (
        f" Or, if scanning the table is acceptable, say why in "
        f'RETENTION_ACCEPT_UNINDEXED = {{"{row.data_class}": "<reason>"}}.'
    )
    operation = (
        f'retention.migration_ops.AddIndexOnModel("{meta.app_label}", "{meta.model_name}", '
        f'fields={fields}, name="{index.name}")'
    )
    if _installed_package(model):
        hint = (
            f"{meta.label} belongs to the installed app {meta.app_label!r}: do not edit it "
            "or add a migration to it. Add this operation to a migration of one of your "
            f"own apps (with atomic = False, depending on {meta.app_label!r}'s latest "
            f"migration): {operation}.{shared}{accept}"
        )
    else:
        hint = (
            f"Add db_index=True to {row.label}.{field.name} and run makemigrations, or add "
            f'models.Index(fields={fields}, name="{index.name}") to its Meta.indexes; the '
            f'migration: migrations.AddIndex(model_name="{meta.model_name}", '
            f'index=models.Index(fields={fields}, name="{index.name}")). If {meta.label} '
            f"is not yours to edit, put {operation} in a migration of your own app "
            f"(atomic = False).{shared}{accept}"
        )
    return Warning(
        f"{_who(row)}: {option} {field.name!r} has no index: every page of a run "
        f"would scan {meta.db_table}.",
        hint=hint,
        id="retention.W004",
    )


def _field_paths(row: RowClass) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    for option, path in (("tenant_field", row.tenant_field), ("subject_field", row.subject_field)):
        if path is not None:
            messages += _field_path(row, option, path)
    return messages


def _field_path(row: RowClass, option: str, path: str) -> list[CheckMessage]:
    """A column of the model, or a path of relations to one (tenant_field, subject_field)."""
    model = row.model
    *hops, last = path.split("__")
    for hop in hops:
        try:
            relation = model._meta.get_field(hop)
        except FieldDoesNotExist:
            relation = None
        target = getattr(relation, "related_model", None)
        if not (isinstance(target, type) and issubclass(target, models.Model)):
            return [
                Error(
                    f"{_who(row)}: {option} {path!r} goes through {hop!r}, "
                    f"which is not a relation of {model._meta.label}.",
                    hint="Give a column of the model, or a path of relations to one, "
                    "e.g. 'account__tenant_id'.",
                    id="retention.E016",
                )
            ]
        model = target
    field = _column(model, last)
    if field is None or field.many_to_many:
        return [_unknown(row, f"{option} {path!r}", last, model)]
    return []


def _redact(row: RowClass) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    for name, strategy in row.redact.items():
        field = _column(row.model, name)
        if field is None:
            messages.append(_unknown(row, "redact", name, row.model))
            continue
        where = f"{_who(row)}: redact[{name!r}] = {strategy!r}"
        text = redaction.problem(strategy, field)
        allowed = redaction.strategies_for(field)
        if field.many_to_many:
            messages.append(
                Error(
                    f"{where}: {name!r} is a many-to-many field, which takes no strategy.",
                    hint="Remove it from redact; its links go with the row when the "
                    "class deletes (or clear them in the host's own code).",
                    id="retention.E020",
                )
            )
        elif allowed is not None and not isinstance(strategy, allowed):
            meant = " or ".join(f"{cls.__name__}()" for cls in allowed)
            messages.append(
                Error(
                    f"{where}: {text}.",
                    hint=f"{type(field).__name__} {name!r} takes only {meant}.",
                    id="retention.E021",
                )
            )
        elif text and isinstance(strategy, redaction.Null):
            messages.append(
                Error(
                    f"{where}: {name!r} is NOT NULL (null=False), so it cannot be set to NULL.",
                    hint="Use Empty() or Constant(...), or make the column nullable "
                    "(null=True) and run makemigrations.",
                    id="retention.E018",
                )
            )
        elif text:
            messages.append(
                Error(
                    f"{where}: {text}.",
                    hint="See retention.redaction for which strategy fits which column.",
                    id="retention.E024",
                )
            )
        elif _unique(row.model, field) and not redaction.unique_safe(strategy):
            messages.append(
                Error(
                    f"{where}: {name!r} is unique, and {strategy!r} gives distinct rows "
                    "the same value: the second redacted row would violate the constraint.",
                    hint="Use Digest() (distinct values stay distinct) or Null() on a "
                    "nullable column; a callable that keeps values distinct may say so "
                    "with f.unique_safe = True.",
                    id="retention.E019",
                )
            )
    return messages


def _unique(model: type[models.Model], field: models.Field[Any, Any]) -> bool:
    """True when the column alone is unique: the field, or a one-column constraint."""
    if field.unique:
        return True
    alone = (field.name,)
    meta = model._meta
    return any(
        isinstance(c, models.UniqueConstraint) and tuple(c.fields) == alone
        for c in meta.constraints
    ) or any(tuple(together) == alone for together in meta.unique_together)


def _files(row: RowClass) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    for name in row.files:
        field = _column(row.model, name)
        if field is None:
            messages.append(_unknown(row, "files", name, row.model))
        elif not isinstance(field, models.FileField):
            messages.append(
                Error(
                    f"{_who(row)}: files names {name!r}, a {type(field).__name__}; only a "
                    "FileField (or ImageField) names a file to delete with the row.",
                    hint="List only the model's FileFields in files=.",
                    id="retention.E022",
                )
            )
    return messages
