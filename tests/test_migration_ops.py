"""retention.migration_ops.AddIndexOnModel: an index on another app's table from the host's
own migrations (issue 25), on django-q2's real task table."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import NotSupportedError, connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState
from django.db.migrations.writer import MigrationWriter
from django_q.models import Task

from retention.migration_ops import AddIndexOnModel

NAME = "django_q_ta_stopped_h5_idx"


def _op() -> AddIndexOnModel:
    return AddIndexOnModel("django_q", "task", fields=["stopped", "id"], name=NAME)


def _state() -> Any:
    return MigrationLoader(None, ignore_no_migrations=True).project_state()


def _indexes() -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Task._meta.db_table)
    return {name: info["columns"] for name, info in constraints.items() if info["index"]}


def _forwards(op: AddIndexOnModel, *, atomic: bool = False) -> None:
    state = _state()
    with connection.schema_editor(atomic=atomic) as editor:
        op.database_forwards("rowhost", editor, state, state.clone())


def _backwards(op: AddIndexOnModel) -> None:
    state = _state()
    with connection.schema_editor(atomic=False) as editor:
        op.database_backwards("rowhost", editor, state.clone(), state)


def test_add_index_on_model__leaves_the_other_apps_model_state_alone():
    before = _state()
    after = before.clone()

    _op().state_forwards("rowhost", after)

    assert after.models["django_q", "task"].options.get("indexes", []) == (
        before.models["django_q", "task"].options.get("indexes", [])
    )
    assert after.models == before.models


def test_add_index_on_model__is_written_into_a_migration_file_as_it_was_given():
    text, imports = MigrationWriter.serialize(_op())

    assert "retention.migration_ops.AddIndexOnModel(" in text
    assert "'django_q'" in text and "'task'" in text and f"name='{NAME}'" in text
    assert "import retention.migration_ops" in imports
    assert _op().describe() == f"Create index {NAME} on django_q.task (stopped, id)"


@pytest.mark.django_db(transaction=True)
def test_add_index_on_model__creates_the_index_is_idempotent_and_reversible():
    op = _op()
    assert NAME not in _indexes()

    _forwards(op)
    _forwards(op)  # already there: kept, no error

    assert _indexes()[NAME] == ["stopped", "id"]

    _backwards(op)
    _backwards(op)  # already gone: no error

    assert NAME not in _indexes()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_add_index_on_model__is_concurrent_on_postgres_and_refuses_a_transaction():
    op = _op()

    with pytest.raises(NotSupportedError, match="atomic = False"):
        _forwards(op, atomic=True)
    assert NAME not in _indexes()

    with connection.cursor() as cursor:
        # What an interrupted CONCURRENTLY build leaves: an index marked invalid.
        cursor.execute(f'CREATE INDEX "{NAME}" ON django_q_task (stopped, id)')
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)",
            [f'"{NAME}"'],
        )

    _forwards(op)

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [f'"{NAME}"']
        )
        assert cursor.fetchone() == (True,)
    _backwards(op)
    assert NAME not in _indexes()


@pytest.mark.django_db(transaction=True)
def test_add_index_on_model__a_migration_without_the_dependency_is_told_to_add_it():
    empty = ProjectState()
    op = _op()

    with (
        pytest.raises(LookupError, match="add a dependency on the 'django_q' migration"),
        connection.schema_editor(atomic=False) as editor,
    ):
        op.database_forwards("rowhost", editor, empty, empty.clone())


@pytest.mark.django_db(transaction=True)
def test_add_index_on_model__runs_from_a_host_migration_forwards_and_back(settings):
    """The migration of tests/rows/index_migrations, as ``migrate`` runs it (atomic = False)."""
    from django.db.migrations.executor import MigrationExecutor

    settings.MIGRATION_MODULES = {"rowhost": "tests.rows.index_migrations"}
    name = "django_q_t_stopped_h5test_idx"
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([("rowhost", "0001_index_django_q_task")])

        assert _indexes()[name] == ["stopped", "id"]
        # The other app's state is as its own migrations leave it.
        state = executor.loader.project_state()
        assert state.models["django_q", "task"].options.get("indexes", []) == (
            MigrationLoader(None, ignore_no_migrations=True)
            .project_state()
            .models["django_q", "task"]
            .options.get("indexes", [])
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate([("rowhost", None)])

    assert name not in _indexes()
