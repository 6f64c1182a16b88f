"""One migrated PostgreSQL data directory per session, copied by ``private_postgres``.

Each module that restarts or stops a PostgreSQL server gets a cluster of its
own (tests/subprocesses.py). initdb and migrate took ~10-20 s for each; a copy of
a cleanly stopped, migrated data directory takes well under a second and
starts as fresh, with no other module's rows.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from pathlib import Path

_TEMPLATE: list[Path] = []


def postgres_root(as_postgres: list[str]) -> Path:
    # Not under pytest's own (private) temporary directory: the postgres user must reach it.
    root = Path(tempfile.mkdtemp(prefix="lethe-pg-"))
    if as_postgres:
        shutil.chown(root, user="postgres")
    sockets = root / "sock"
    sockets.mkdir()
    if as_postgres:
        shutil.chown(sockets, user="postgres")
    return root


def migrated_template(initdb: str, pg_ctl: str, as_postgres: list[str]) -> Path:
    """The data directory of a fresh cluster with the ``lethe`` database migrated, stopped."""
    if _TEMPLATE:
        return _TEMPLATE[0]
    root = postgres_root(as_postgres)
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    data = root / "data"
    subprocess.run(
        [*as_postgres, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    from tests.motoserver import free_port
    from tests.subprocesses import PrivatePostgres, manage

    template = PrivatePostgres(data, root / "sock", free_port(), pg_ctl, as_postgres)
    template.start()
    try:
        import psycopg

        with psycopg.connect(
            f"postgres://postgres@127.0.0.1:{template.port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE lethe")
        manage(template, "migrate", "--no-input", timeout=180)
    finally:
        # A clean shutdown: a copy then starts without crash recovery.
        template.ctl("-m", "fast", "stop")
    _TEMPLATE.append(data)
    return data
