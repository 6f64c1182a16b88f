"""Processes a test starts beside itself: ``manage.py`` commands, a ``qcluster``, a
PostgreSQL cluster of its own.

The outage tests restart or stop a database, kill workers or take the broker
away; they run the commands they watch as subprocesses against a private
PostgreSQL cluster (``private_postgres``), so nothing they do touches
another test's database. ``Qcluster`` is also the real cluster of
tests/queue/ on the test database.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.motoserver import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]

PRIVATE_SEED = """
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


def postgres_tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


@dataclass
class PrivatePostgres:
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
        self.ctl("-o", self._options, "start")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: a second or three without a database."""
        self.ctl("-m", "fast", "restart", "-o", self._options)

    def stop(self) -> None:
        self.ctl("-m", "fast", "stop")

    @property
    def _options(self) -> str:
        return f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1"

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return list(conn.execute(sql).fetchall())


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster of the test's own (initdb, pg_ctl as the postgres user), migrated.

    Restarting or stopping it touches no other test's database (NOTES.md).
    Each starts from a copy of one migrated template (fresh, with no other
    cluster's rows). Skips when initdb/pg_ctl are missing, fails under CI=true.
    """
    initdb, pg_ctl = postgres_tool("initdb"), postgres_tool("pg_ctl")
    if initdb is None or pg_ctl is None:
        message = "initdb/pg_ctl not found: the database outage tests need a private cluster"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    from tests.pg_template import migrated_template, postgres_root

    template = migrated_template(initdb, pg_ctl, as_postgres)
    root = postgres_root(as_postgres)
    data = root / "data"
    # cp -a keeps the owner and the 0700 mode PostgreSQL insists on.
    subprocess.run(["cp", "-a", str(template), str(data)], check=True, timeout=120)
    running = PrivatePostgres(data, root / "sock", free_port(), pg_ctl, as_postgres)
    try:
        running.start()
        yield running
    finally:
        subprocess.run(
            [*as_postgres, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


def subprocess_env(*, database_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a ``manage.py`` subprocess on tests.qcluster_settings.

    Without what would choose other settings, another database or a broker
    (``REDIS_URL`` only when ``extra`` names it).
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.qcluster_settings",
            "DATABASE_URL": database_url,
            "LETHE_VAR_DIR": str(var_dir),
            **extra,
        }
    )
    return env


def env_for(cluster: PrivatePostgres, **extra: str) -> dict[str, str]:
    return subprocess_env(
        database_url=cluster.url,
        var_dir=cluster.data.parent / "var",
        **{"RETENTION_DIGEST_KEY": "outage-test-digest-key", **extra},
    )


def queue_env(name: str, **extra: str) -> dict[str, str]:
    """A django-q2 queue of the test's own (``Q_CLUSTER_NAME``), with short leases.

    Two workers, tasks retried after 25 s, row and dispatcher leases of 8 and
    6 s: a dead worker's claims lapse within seconds; ``extra`` overrides.
    """
    return {
        "Q_CLUSTER_NAME": f"{name}-{uuid.uuid4().hex[:8]}",
        "Q_WORKERS": "2",
        "Q_TIMEOUT": "20",
        "Q_RETRY": "25",
        "RETENTION_LEASE_SECONDS": "8",
        "RETENTION_RUN_LEASE_SECONDS": "30",
        "RETENTION_DISPATCHER_LEASE_SECONDS": "6",
        **extra,
    }


def manage_py(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``manage.py *args`` as a subprocess from the repository root, its output captured."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def example_setting(name: str, var_dir: Path, **environ: str | None) -> str:
    """``config.settings.<name>`` as a fresh interpreter reads it, each of ``environ`` set
    (or unset, for None)."""
    env = {key: value for key, value in os.environ.items() if key not in environ}
    env["LETHE_VAR_DIR"] = str(var_dir)
    env.update({key: value for key, value in environ.items() if value is not None})
    done = subprocess.run(
        [sys.executable, "-c", f"import config.settings as s; print(s.{name})"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def manage(
    cluster: PrivatePostgres, *args: str, timeout: float = 60, **extra: str
) -> subprocess.CompletedProcess[str]:
    done = manage_py(env_for(cluster, **extra), *args, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def seed(cluster: PrivatePostgres, count: int, rate: int) -> str:
    data_class = f"outage{uuid.uuid4().hex[:6]}.scan"
    script = cluster.data.parent / f"seed-{data_class}.py"
    script.write_text(PRIVATE_SEED.format(data_class=data_class, count=count, rate=rate))
    manage(cluster, "shell", "-c", f"exec(open({str(script)!r}).read())")
    return data_class


def start_run(
    cluster: PrivatePostgres, data_class: str, *options: str, **extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_retention", "--data-class", data_class, "--json"]
        + list(options),
        cwd=REPO_ROOT,
        env=env_for(cluster, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def deleted_so_far(cluster: PrivatePostgres, data_class: str) -> int:
    try:
        rows = cluster.query(
            "SELECT count(*) FROM retention_retentionrecord "
            f"WHERE data_class = '{data_class}' AND state = 'deleted'"
        )
    except Exception:
        return 0
    return int(rows[0][0])


def wait_until_deleting(
    cluster: PrivatePostgres, data_class: str, process: subprocess.Popen[str]
) -> None:
    deadline = time.monotonic() + 30
    while deleted_so_far(cluster, data_class) < 10:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run deleted nothing in 30 s"
        time.sleep(0.2)


def states(cluster: PrivatePostgres, data_class: str) -> dict[str, int]:
    return dict(
        cluster.query(
            "SELECT state, count(*) FROM retention_retentionrecord "
            f"WHERE data_class = '{data_class}' GROUP BY state"
        )
    )


def files_left(cluster: PrivatePostgres, data_class: str) -> list[Path]:
    return list((cluster.data.parent / "var" / "media" / data_class).glob("*"))


def assert_all_deleted(cluster: PrivatePostgres, data_class: str, count: int) -> None:
    """All ``count`` records of ``data_class`` deleted, their files gone, every run's counts
    equal to its events."""
    assert states(cluster, data_class) == {"deleted": count}
    assert files_left(cluster, data_class) == []
    verified = manage(cluster, "retention_verify", "--runs")
    assert "Run counts agree with their events." in verified.stdout


@dataclass
class Qcluster:
    """A ``qcluster`` subprocess in a session of its own (so ``kill_9`` takes every worker)."""

    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"],
                cwd=REPO_ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill_9(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # One SIGINT to the main process only (NOTES.md), SIGKILL as fallback.
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
