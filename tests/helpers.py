"""Small builders shared by tests: write an object, track it, run the engine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command

from retention import engine, services
from retention.models import (
    ChainHead,
    DeletionEvent,
    EventBatch,
    RetentionRecord,
    Run,
    RunBatch,
    RunLease,
    RunMode,
)
from retention.selectors.evidence import VerifyResult, chain_verify
from tests.motoserver import free_port


def put_tracked(
    *,
    tenant_id: str = "acme",
    data_class: str = "idv.photo",
    key: str | None = None,
    now: datetime,
    storage: str = "default",
    body: bytes = b"x",
) -> RetentionRecord:
    key = key or f"{tenant_id}/{data_class}/{now.timestamp():.0f}-{RetentionRecord.objects.count()}"
    saved = storages[storage].save(key, ContentFile(body))
    return services.record_track(
        tenant_id=tenant_id, data_class=data_class, object_key=saved, now=now, storage=storage
    )


def put_expired(count: int, now: datetime, **kwargs: Any) -> list[RetentionRecord]:
    """``count`` tracked objects 40 days old: past the usual 30-day period at ``now``."""
    return [put_tracked(now=now - timedelta(days=40), **kwargs) for _ in range(count)]


def exists(record: RetentionRecord) -> bool:
    return storages[record.storage].exists(record.object_key)


def enforce(*, now: datetime, clock: Any = None, **kwargs: Any) -> Run:
    run = engine.run_start(mode=RunMode.ENFORCE, now=now, **kwargs.pop("start", {}))
    return engine.run_execute(run=run, clock=clock or (lambda: now), **kwargs)


def dry_run(*, now: datetime, **kwargs: Any) -> Run:
    run = engine.run_start(mode=RunMode.DRY_RUN, now=now, **kwargs)
    return engine.run_execute(run=run, clock=lambda: now)


def add_s3_storage(settings: Any, alias: str, endpoint_url: str, bucket: str) -> str:
    """Add a django-storages S3 alias pointing at the test S3 server."""
    settings.STORAGES = {
        **settings.STORAGES,
        alias: {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": endpoint_url,
                "access_key": "testing",
                "secret_key": "testing",
                "region_name": "us-east-1",
            },
        },
    }
    return alias


def chain_ok() -> None:
    """The whole hash chain verifies."""
    (verdict,) = [item for item in chain_verify() if isinstance(item, VerifyResult)]
    assert verdict.ok, verdict.broken


def database_dump(path: Path) -> Path:
    """A logical backup of the app's tables (``dumpdata``), the same on PostgreSQL and SQLite."""
    call_command("dumpdata", "retention", output=str(path), stdout=StringIO())
    return path


def database_restore(path: Path) -> None:
    """What a restore of ``database_dump`` does to the ledger: rows written since are gone."""
    for model in (DeletionEvent, EventBatch, RunBatch, RunLease, Run):
        model.objects.all().delete()
    RetentionRecord.objects.all().delete()
    ChainHead.objects.all().delete()
    call_command("loaddata", str(path), stdout=StringIO())


class RowEvent:
    """One row's event, whatever its shape: a per-row page event's row, or an event.

    Reads as the event it belongs to, with the row's own ``key_digest`` and
    ``expires_at`` (RFC 3339) in place of the page event's.
    """

    def __init__(self, event: DeletionEvent, key_digest: str, expires_at: str) -> None:
        self.event, self.key_digest, self.expires_at = event, key_digest, expires_at

    def __getattr__(self, name: str) -> Any:
        return getattr(self.event, name)


def row_events(events: Any) -> list[RowEvent]:
    """``events`` (a queryset or list) with each per-row page event spread into its rows."""
    from retention import evidence
    from retention.selectors.evidence import row_subjects

    spread: list[RowEvent] = []
    for event in events:
        subjects = row_subjects(event)
        if subjects:
            spread.extend(RowEvent(event, s.key_digest, s.expires_at) for s in subjects)
        else:
            spread.append(RowEvent(event, event.key_digest, evidence.timestamp(event.expires_at)))
    return spread


# A private PostgreSQL cluster, and commands run against it as subprocesses.

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
        self.ctl("-o", f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1", "start")

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, connect_timeout=5) as conn:
            return list(conn.execute(sql).fetchall())


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster of the test's own (initdb, pg_ctl as the postgres user), migrated.

    Restarting or stopping it touches no other test's database (NOTES.md).
    Skips when initdb/pg_ctl are missing, fails under CI=true.
    """
    initdb, pg_ctl = postgres_tool("initdb"), postgres_tool("pg_ctl")
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
    running = PrivatePostgres(data, sockets, free_port(), pg_ctl, as_postgres)
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


def env_for(cluster: PrivatePostgres, **extra: str) -> dict[str, str]:
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
    cluster: PrivatePostgres, *args: str, timeout: float = 60, **extra: str
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
