"""Migration operations a host puts in its own app's migrations.

A class registered on another app's model (django-q2's task table,
``django.contrib.sessions``) needs an index on its date column
(``retention.W004``), and a host cannot add a migration to a package it did
not write: the next release of that package would not know it. The operation
here lives in a migration of the host's own app and creates the index on the
other app's table, without adding it to that app's model state, so the other
app's ``makemigrations`` sees no change.

    # myapp/migrations/0007_index_django_q_task.py
    from django.db import migrations
    from retention.migration_ops import AddIndexOnModel

    class Migration(migrations.Migration):
        atomic = False  # PostgreSQL builds the index CONCURRENTLY
        dependencies = [("myapp", "0006_..."), ("django_q", "0018_task_success_index")]
        operations = [
            AddIndexOnModel("django_q", "task", fields=["stopped", "id"],
                            name="django_q_ta_stopped_365dfc_idx"),
        ]

A leaf module: it imports nothing of ``retention``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import NotSupportedError, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState

__all__ = ["AddIndexOnModel"]


class AddIndexOnModel(Operation):
    """Create an index on another app's table from a migration of the host's app.

    On PostgreSQL ``CREATE INDEX CONCURRENTLY IF NOT EXISTS`` (writes go on
    while it builds; the migration needs ``atomic = False``), elsewhere
    ``CREATE INDEX IF NOT EXISTS``. Idempotent: an index of that name already
    there is kept (on PostgreSQL an invalid one, left by an interrupted
    concurrent build, is dropped and built again). Reversible: backwards drops
    it. The other app's model state is left as it is.
    """

    reversible = True
    reduces_to_sql = True

    def __init__(self, app_label: str, model_name: str, *, fields: Sequence[str], name: str):
        if not fields:
            raise ValueError("AddIndexOnModel needs at least one field.")
        if not name:
            raise ValueError("AddIndexOnModel needs an index name.")
        self.app_label = app_label
        self.model_name = model_name.lower()
        self.fields = list(fields)
        self.name = name

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (
            self.__class__.__name__,
            [self.app_label, self.model_name],
            {"fields": self.fields, "name": self.name},
        )

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        """Nothing: the index is not the other app's to declare."""

    def describe(self) -> str:
        return (
            f"Create index {self.name} on {self.app_label}.{self.model_name} "
            f"({', '.join(self.fields)})"
        )

    @property
    def migration_name_fragment(self) -> str:
        return f"index_{self.app_label}_{self.model_name}".lower()

    def _model(
        self, state: ProjectState, schema_editor: BaseDatabaseSchemaEditor
    ) -> type[models.Model] | None:
        """The model at ``state``; None where the database router keeps it off this database."""
        try:
            model = state.apps.get_model(self.app_label, self.model_name)
        except LookupError as exc:
            raise LookupError(
                f"AddIndexOnModel: no model {self.app_label}.{self.model_name} at this "
                f"migration: add a dependency on the {self.app_label!r} migration that "
                "creates it to the migration's dependencies."
            ) from exc
        return model if self.allow_migrate_model(schema_editor.connection.alias, model) else None

    def _index(self, model: type[models.Model]) -> models.Index:
        return models.Index(fields=self.fields, name=self.name)

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        model = self._model(to_state, schema_editor)
        if model is None:
            return
        quote = schema_editor.quote_name
        columns = ", ".join(
            quote(_column(model, name.lstrip("-"))) + (" DESC" if name.startswith("-") else "")
            for name in self.fields
        )
        table = quote(model._meta.db_table)
        index = quote(self.name)
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            _not_in_transaction(schema_editor, "AddIndexOnModel")
            if _postgres_index_valid(schema_editor, self.name) is False:
                schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
            schema_editor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON {table} ({columns})"
            )
        elif vendor == "sqlite":
            schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {table} ({columns})")
        elif not _index_exists(schema_editor, model._meta.db_table, self.name):
            schema_editor.add_index(model, self._index(model))

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        model = self._model(from_state, schema_editor)
        if model is None:
            return
        index = schema_editor.quote_name(self.name)
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            _not_in_transaction(schema_editor, "AddIndexOnModel")
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
        elif vendor == "sqlite":
            schema_editor.execute(f"DROP INDEX IF EXISTS {index}")
        elif _index_exists(schema_editor, model._meta.db_table, self.name):
            schema_editor.remove_index(model, self._index(model))


def _column(model: type[models.Model], name: str) -> str:
    field = model._meta.get_field(name)
    column = getattr(field, "column", None)
    if not isinstance(column, str):
        raise ValueError(f"{model._meta.label}.{name} is not a column.")
    return column


def _not_in_transaction(schema_editor: BaseDatabaseSchemaEditor, what: str) -> None:
    if schema_editor.connection.in_atomic_block:
        raise NotSupportedError(
            f"{what} builds the index CONCURRENTLY on PostgreSQL, which cannot run in a "
            "transaction: set atomic = False on the migration."
        )


def _postgres_index_valid(schema_editor: BaseDatabaseSchemaEditor, name: str) -> bool | None:
    """True or False for an index of that name (False: a failed concurrent build), else None."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
            [schema_editor.quote_name(name)],
        )
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


def _index_exists(schema_editor: BaseDatabaseSchemaEditor, table: str, name: str) -> bool:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        return name in connection.introspection.get_constraints(cursor, table)
