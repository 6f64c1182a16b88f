"""A database restart during a run ends cleanly (issue 26, point 3).

On a private PostgreSQL cluster of its own (initdb and pg_ctl as the
postgres user, on another port: NOTES.md), so that restarting it touches no
other test's database. ``run_retention`` runs as a subprocess, paced so that
the restart lands mid-run:

- ``pg_ctl restart -m fast`` (1-3 s without a database): the run waits for
  it and finishes, everything deleted, the chain intact;
- the database away for longer than ``RETENTION_DATABASE_RETRY_SECONDS``:
  the run stops with one line, ``database unavailable: …``, and exit status
  1; once the database is back the next trigger closes it ``abandoned`` at
  once (not after its lease) and finishes the work.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

from tests.subprocesses import (
    PrivatePostgres,
    assert_all_deleted,
    manage,
    seed,
    start_run,
    wait_until_deleting,
)

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


def _outage_mid_run(
    cluster: PrivatePostgres,
    data_class: str,
    outage: Callable[[], object],
    *,
    timeout: float,
    restore: Callable[[], object] = lambda: None,
    **extra: str,
) -> tuple[subprocess.Popen[str], str, str]:
    """``run_retention`` as a subprocess, ``outage`` once it deletes; its output at its
    end. ``restore`` brings the database back once the run has ended (or timed out)."""
    process = start_run(cluster, data_class, **extra)
    wait_until_deleting(cluster, data_class, process)
    outage()
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        process.kill()
        restore()
    return process, out, err


def test_run_retention__a_postgres_restart_mid_run_is_waited_out_and_the_run_finishes(
    cluster: PrivatePostgres,
) -> None:
    data_class = seed(cluster, count=120, rate=20)  # 10 records a page, about 6 s
    started = time.monotonic()
    process, out, err = _outage_mid_run(cluster, data_class, cluster.restart, timeout=60)

    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert '"status": "finished"' in out
    assert_all_deleted(cluster, data_class, 120)
    assert time.monotonic() - started < 60


def test_run_retention__a_database_away_too_long_stops_with_one_line_and_the_next_run_goes_at_once(
    cluster: PrivatePostgres,
) -> None:
    data_class = seed(cluster, count=120, rate=20)
    started = time.monotonic()
    process, out, err = _outage_mid_run(
        cluster,
        data_class,
        cluster.stop,
        timeout=30,
        restore=cluster.start,
        RETENTION_DATABASE_RETRY_SECONDS="3",
    )

    assert process.returncode == 1
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("database unavailable: "), err
    assert "could not record" not in err

    # The next trigger, right away: the dead run's lease (300 s) has not lapsed.
    again = manage(cluster, "run_retention", "--data-class", data_class, "--json")
    assert '"status": "finished"' in again.stdout
    ((status, reason),) = cluster.query(
        "SELECT status, status_reason FROM retention_run "
        f"WHERE data_classes::text LIKE '%{data_class}%' ORDER BY started_at LIMIT 1"
    )
    assert status == "abandoned" and reason.startswith("database unavailable")
    assert_all_deleted(cluster, data_class, 120)
    assert time.monotonic() - started < 60
