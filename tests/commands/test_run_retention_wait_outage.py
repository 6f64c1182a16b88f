"""``run_retention --enqueue --wait`` through a database restart, on a real qcluster (issue 26).

A private PostgreSQL cluster (tests/subprocesses.py, ``private_postgres``) so that
restarting it touches no other test's database, and a ``qcluster`` on the ORM
broker working the queued run:

- ``pg_ctl restart -m fast`` while ``--wait`` follows the run: it waits the
  restart out and follows the run to its end, exit 0, every expired object
  deleted;
- the workers killed mid-run: the run's lease lapses, the next trigger closes
  it ``abandoned``, and ``--wait`` exits non-zero saying so.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.subprocesses import (
    PrivatePostgres,
    Qcluster,
    assert_all_deleted,
    env_for,
    manage_py,
    queue_env,
    seed,
    start_run,
    wait_until_deleting,
)

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(150)]

# Short leases, so that a dead run's lease lapses within seconds; a queue of this module's own.
QUEUED = queue_env("lethe-wait", RETENTION_RUN_LEASE_SECONDS="6")


@pytest.fixture
def workers(cluster: PrivatePostgres, tmp_path: Path) -> Iterator[Qcluster]:
    env = env_for(cluster, **QUEUED)
    qcluster = Qcluster(env=env, log=tmp_path / "qcluster.log")
    qcluster.start()
    yield qcluster
    qcluster.stop()


def follow(cluster: PrivatePostgres, data_class: str) -> subprocess.Popen[str]:
    return start_run(cluster, data_class, "--enqueue", "--wait", **QUEUED)


def test_run_retention_wait__follows_a_queued_run_through_a_postgres_restart_to_its_end(
    cluster: PrivatePostgres, workers: Qcluster
) -> None:
    data_class = seed(cluster, count=120, rate=20)  # 10 records a page, about 6 s
    started = time.monotonic()
    waiter = follow(cluster, data_class)
    try:
        wait_until_deleting(cluster, data_class, waiter)
        cluster.restart()
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
        waiter.communicate()

    assert waiter.returncode == 0, f"{err}\n{workers.logs()}"
    assert "Traceback" not in err
    assert '"status": "finished"' in out
    assert_all_deleted(cluster, data_class, 120)
    assert time.monotonic() - started < 75


def test_run_retention_wait__exits_non_zero_when_the_followed_run_ends_abandoned(
    cluster: PrivatePostgres, workers: Qcluster
) -> None:
    data_class = seed(cluster, count=120, rate=20)
    waiter = follow(cluster, data_class)
    try:
        wait_until_deleting(cluster, data_class, waiter)
        workers.kill_9()
        # Triggers until one finds the run's lease lapsed and closes it abandoned.
        deadline = time.monotonic() + 40
        while waiter.poll() is None:
            assert time.monotonic() < deadline, "--wait did not end within 40 s"
            manage_py(
                env_for(cluster, **QUEUED), "run_retention", "--data-class", data_class, timeout=60
            )
            time.sleep(1)
        out, err = waiter.communicate(timeout=10)
    finally:
        waiter.kill()
        waiter.communicate()

    assert waiter.returncode == 1, err
    assert "Traceback" not in err
    assert "ended abandoned: lease expired" in err
    assert '"status": "abandoned"' in out
