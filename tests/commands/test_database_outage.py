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

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

SEED = """
from datetime import timedelta
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.utils import timezone
from retention import services
from retention.models import DataClassMode, Policy
from tests.factories import UserFactory, approver_user

DATA_CLASS = {data_class!r}
now = timezone.now()
author = UserFactory(username=DATA_CLASS + "-author")
approver = approver_user(DATA_CLASS + "-approver")
when = now - timedelta(days=400)
version = services.policy_version_propose(
    data_class=DATA_CLASS, retention_period=timedelta(days=30), author=author, now=when,
    batch_size=10, rate_limit={rate},
)
services.policy_version_submit(version=version, by=author, now=when)
services.policy_version_approve(version=version, approver=approver, now=when)
Policy.objects.filter(data_class=DATA_CLASS).update(mode=DataClassMode.ENFORCE)
for number in range({count}):
    key = storages["default"].save(f"{{DATA_CLASS}}/{{number:04d}}.bin", ContentFile(b"x"))
    services.record_track(
        tenant_id="acme", data_class=DATA_CLASS, object_key=key, now=now - timedelta(days=31)
    )
"""


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Cluster:
    data: Path
    sockets: Path
    port: int
    pg_ctl: str
    as_postgres: list[str]

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/lethe"

    def ctl(self, *args: str) -> None:
        # The server logs to a file: with pipes, it would hold them open.
        log = str(self.data.parent / "postgres.log")
        subprocess.run(
            [*self.as_postgres, self.pg_ctl, "-D", str(self.data), "-l", log, "-w", "-t", "30"]
            + list(args),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )

    def start(self) -> None:
        self.ctl("-o", f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1", "start")

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return list(conn.execute(sql).fetchall())


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    initdb, pg_ctl = _tool("initdb"), _tool("pg_ctl")
    if initdb is None or pg_ctl is None:
        message = "initdb/pg_ctl not found: the database outage tests need a private cluster"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    # Not under pytest's own (private) temporary directory: the postgres user must reach it.
    root = Path(tempfile.mkdtemp(prefix="lethe-pg-"))
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_postgres:
        shutil.chown(root, user="postgres")
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    if as_postgres:
        shutil.chown(sockets, user="postgres")
    subprocess.run(
        [*as_postgres, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    running = Cluster(data, sockets, _free_port(), pg_ctl, as_postgres)
    try:
        running.start()
        import psycopg

        with psycopg.connect(
            f"postgres://postgres@127.0.0.1:{running.port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE lethe")
        manage(running, "migrate", "--no-input", timeout=180)
        yield running
    finally:
        subprocess.run(
            [*as_postgres, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


def env_for(cluster: Cluster, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.qcluster_settings",
            "DATABASE_URL": cluster.url,
            "LETHE_VAR_DIR": str(cluster.data.parent / "var"),
            "RETENTION_DIGEST_KEY": "outage-test-digest-key",
            **extra,
        }
    )
    return env


def manage(
    cluster: Cluster, *args: str, timeout: float = 60, **extra: str
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env_for(cluster, **extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def seed(cluster: Cluster, count: int, rate: int) -> str:
    data_class = f"outage{uuid.uuid4().hex[:6]}.scan"
    script = cluster.data.parent / f"seed-{data_class}.py"
    script.write_text(SEED.format(data_class=data_class, count=count, rate=rate))
    manage(cluster, "shell", "-c", f"exec(open({str(script)!r}).read())")
    return data_class


def start_run(cluster: Cluster, data_class: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_retention", "--data-class", data_class, "--json"],
        cwd=REPO_ROOT,
        env=env_for(cluster, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def deleted_so_far(cluster: Cluster, data_class: str) -> int:
    try:
        rows = cluster.query(
            "SELECT count(*) FROM retention_retentionrecord "
            f"WHERE data_class = '{data_class}' AND state = 'deleted'"
        )
    except Exception:
        return 0
    return int(rows[0][0])


def wait_until_deleting(cluster: Cluster, data_class: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while deleted_so_far(cluster, data_class) < 10:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run deleted nothing in 30 s"
        time.sleep(0.2)


def states(cluster: Cluster, data_class: str) -> dict[str, int]:
    return dict(
        cluster.query(
            "SELECT state, count(*) FROM retention_retentionrecord "
            f"WHERE data_class = '{data_class}' GROUP BY state"
        )
    )


def files_left(cluster: Cluster, data_class: str) -> list[Path]:
    return list((cluster.data.parent / "var" / "media" / data_class).glob("*"))


def test_run_retention__a_postgres_restart_mid_run_is_waited_out_and_the_run_finishes(
    cluster: Cluster,
) -> None:
    data_class = seed(cluster, count=120, rate=20)  # 10 records a page, about 6 s
    started = time.monotonic()
    process = start_run(cluster, data_class)
    wait_until_deleting(cluster, data_class, process)

    cluster.ctl("-m", "fast", "restart", "-o", f"-p {cluster.port} -k {cluster.sockets}")
    try:
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()

    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert '"status": "finished"' in out
    assert states(cluster, data_class) == {"deleted": 120}
    assert files_left(cluster, data_class) == []
    verified = manage(cluster, "retention_verify", "--runs")
    assert "Run counts agree with their events." in verified.stdout
    assert time.monotonic() - started < 60


def test_run_retention__a_database_away_too_long_stops_with_one_line_and_the_next_run_goes_at_once(
    cluster: Cluster,
) -> None:
    data_class = seed(cluster, count=120, rate=20)
    started = time.monotonic()
    process = start_run(cluster, data_class, RETENTION_DATABASE_RETRY_SECONDS="3")
    wait_until_deleting(cluster, data_class, process)

    cluster.ctl("-m", "fast", "stop")
    try:
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        cluster.start()

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
    assert states(cluster, data_class) == {"deleted": 120}
    assert files_left(cluster, data_class) == []
    verified = manage(cluster, "retention_verify", "--runs")
    assert "Run counts agree with their events." in verified.stdout
    assert time.monotonic() - started < 60
