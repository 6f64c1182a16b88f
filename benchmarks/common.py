"""Pieces the benchmark scripts share, so that each script is about its figure.

An S3-compatible server (moto in server mode on a free loopback port,
started by the launcher the tests use, ``tests/motoserver.py``), buckets and
parallel seeding of objects; Django set up against a fresh PostgreSQL
database named by DATABASE_URL; an approved, enforced policy and expired
records to sweep; and the description of the machine a figure was measured
on.

A script puts the repository on ``sys.path``, imports this module and calls
``setup_django()`` before importing anything that needs the app registry::

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import common  # noqa: E402

    common.aws_dummy_environment()
    common.setup_django()
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests import motoserver
from tests.motoserver import AWS_ENV, AWS_ENV_REMOVED, DUMMY_CREDENTIALS, REGION, MotoServer

REPO_ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------
# Environment and Django


def aws_dummy_environment() -> None:
    """Dummy AWS credentials for this process and every subprocess it starts.

    Call it before ``setup_django()``: the project's settings read AWS_* once.
    """
    os.environ.update(AWS_ENV)
    for name in AWS_ENV_REMOVED:
        os.environ.pop(name, None)


def setup_django(settings_module: str = "config.settings") -> None:
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings_module)
    # As in production: the example project defaults to DEBUG, which logs every
    # query a run makes (time and memory the figures must not include). The
    # subprocesses a benchmark starts inherit it.
    os.environ.setdefault("DJANGO_DEBUG", "0")
    # Benchmarks sweep tens of thousands at once, on purpose: no volume breaker
    # (the subprocesses inherit it too).
    os.environ.setdefault("RETENTION_BREAKER_ENABLED", "0")
    import django

    django.setup()


def not_postgresql() -> bool:
    """True, after saying why on stderr, when the configured database is not PostgreSQL.

    Each script's ``main`` then returns 2 before measuring anything.
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        return False
    print(
        f"DATABASE_URL must name a PostgreSQL database (the figures of SPEC §5 are "
        f"PostgreSQL's), got {connection.vendor}; e.g. "
        "DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe_bench",
        file=sys.stderr,
    )
    return True


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A new, migrated database ("test_" + the configured name), dropped after.

    Yields its name; the default connection points at it meanwhile.
    """
    from django.db import connection

    original_name = connection.settings_dict["NAME"]
    test_name: str = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        yield test_name
    finally:
        connection.creation.destroy_test_db(original_name, verbosity=0)


def database_url(name: str | None = None) -> str:
    """A DATABASE_URL for subprocesses (qcluster, manage.py) on the same server."""
    from django.db import connection

    db = connection.settings_dict
    user = urllib.parse.quote(db.get("USER") or "", safe="")
    password = db.get("PASSWORD") or ""
    credentials = f"{user}:{urllib.parse.quote(password, safe='')}" if password else user
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{credentials}@{host}:{port}/{name or db['NAME']}"


class Rates:
    """``rate`` and ``ledger_rate`` of a figure with ``objects``, ``seconds`` and
    ``ledger_seconds`` (the run's own span in the ledger): 0 when not measured."""

    objects: int
    seconds: float
    ledger_seconds: float

    @property
    def rate(self) -> float:
        return self.objects / self.seconds if self.seconds else 0.0

    @property
    def ledger_rate(self) -> float:
        return self.objects / self.ledger_seconds if self.ledger_seconds else 0.0


@dataclass
class Measured:
    """One ``manage.py`` command run in a process of its own: its peak RSS and output.

    ``memory.py`` and ``reconcile.py`` measure their commands this way.
    """

    peak_bytes: int
    seconds: float
    returncode: int
    stdout: str
    stderr: str


# --------------------------------------------------------------------------
# The S3 server


def start_moto(log_path: Path | None = None) -> MotoServer:
    """Start ``moto_server`` (tests/motoserver.py) on a free port; exit if it cannot."""
    if log_path is None:
        log_path = Path(tempfile.mkdtemp(prefix="lethe-bench-moto-")) / "moto_server.log"
    try:
        return motoserver.start(log_path)
    except motoserver.MotoDidNotStart as exc:
        raise SystemExit(str(exc)) from None


stop_moto = motoserver.stop


@contextlib.contextmanager
def moto_server(log_path: Path | None = None) -> Iterator[MotoServer]:
    server = start_moto(log_path)
    try:
        yield server
    finally:
        stop_moto(server)


def s3_client(endpoint_url: str, *, max_pool_connections: int = 10) -> Any:
    """A boto3 client with the engine's timeouts and retries.

    ``max_pool_connections`` at least the number of threads sharing it, or
    urllib3 discards (and reopens) connections.
    """
    import boto3
    from botocore.config import Config

    from retention.storage.s3 import client_config

    config = client_config().merge(Config(max_pool_connections=max_pool_connections))
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=DUMMY_CREDENTIALS,
        aws_secret_access_key=DUMMY_CREDENTIALS,
        config=config,
    )


def create_bucket(client: Any, name: str) -> str:
    client.create_bucket(Bucket=name)
    return name


def seed_objects(
    client: Any,
    bucket: str,
    keys: Iterable[str],
    *,
    threads: int = 8,
    body: bytes = b"x" * 64,
) -> float:
    """Put one small object per key from ``threads`` threads; return the seconds.

    The client must allow ``threads`` pooled connections (``s3_client``).
    On 2 cores moto takes ~250 puts/s: it, not the client, is the limit.
    """

    def put(key: str) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=body)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for _ in pool.map(put, keys):
            pass
    return time.perf_counter() - started


def count_objects(client: Any, bucket: str, prefix: str = "") -> int:
    total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        total += page.get("KeyCount", 0)
    return total


class NullAdapter:
    """A storage adapter that reports every key deleted and touches nothing.

    For figures that isolate the database work: point an alias at it with
    ``RETENTION_STORAGE_ADAPTERS = {alias: "benchmarks.common.NullAdapter"}``.
    """

    def __init__(self, alias: str, storage: Any = None) -> None:
        self.alias = alias

    def check(self) -> None:
        return None

    def delete_many(
        self, keys: Sequence[str], *, erase_versions: bool = False, probe: Collection[str] = ()
    ) -> dict[str, Any]:
        from retention.storage import KeyResult, Outcome

        return {key: KeyResult(key, Outcome.DELETED) for key in keys}


# --------------------------------------------------------------------------
# Policies and records


def enforced_policy(
    data_class: str,
    *,
    now: datetime,
    retention_period: timedelta = timedelta(days=30),
    **rules: Any,
) -> Any:
    """An approved policy version (four-eyes) with its data class enforced.

    ``rules`` go to ``policy_version_propose`` (batch_size, rate_limit...).
    """
    from django.contrib.auth import get_user_model

    from retention import services
    from retention.models import DataClassMode, Policy

    user = get_user_model()
    author, _ = user.objects.get_or_create(username="bench-author")
    approver, _ = user.objects.get_or_create(
        username="bench-approver", defaults={"is_superuser": True}
    )
    since = now - timedelta(days=400)
    version = services.policy_version_propose(
        data_class=data_class,
        retention_period=retention_period,
        author=author,
        now=since,
        **rules,
    )
    services.policy_version_submit(version=version, by=author, now=since)
    services.policy_version_approve(version=version, approver=approver, now=since)
    Policy.objects.filter(data_class=data_class).update(mode=DataClassMode.ENFORCE)
    version.refresh_from_db()
    return version


def seed_records(
    version: Any,
    keys: Sequence[str],
    *,
    now: datetime,
    storage: str = "default",
    tenants: int = 50,
    expired_by: timedelta = timedelta(days=1),
) -> None:
    """Retention records for ``keys``, expired ``expired_by`` before ``now``.

    A bulk insert with real key digests, as ``record_track`` would write them
    (it is not called: one INSERT per record would dominate the seeding).
    """
    from retention.digest import key_digest
    from retention.models import RetentionRecord

    expires = now - expired_by
    created = expires - version.retention_period
    RetentionRecord.objects.bulk_create(
        (
            RetentionRecord(
                tenant_id=f"t{i % tenants}",
                data_class=version.policy.data_class,
                storage=storage,
                object_key=key,
                key_digest=key_digest(key),
                policy_version=version,
                created_at=created,
                expires_at=expires,
            )
            for i, key in enumerate(keys)
        ),
        batch_size=5000,
    )


def print_result(head: str, details: Sequence[str], problems: Sequence[str]) -> None:
    """One variant's figure: ``head``, its details and ``)`` on a line, each failed check under it.

    Flushed, so a long benchmark shows each variant as it finishes.
    """
    print(head + "; ".join(details) + ")")
    for problem in problems:
        print(f"    CHECK FAILED: {problem}")
    sys.stdout.flush()


# --------------------------------------------------------------------------
# The machine


def _memory_total() -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return "unknown"


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of all cores so far, from /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat") as stat:
            fields = [float(n) for n in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_share(
    before: tuple[float, float] | None, after: tuple[float, float] | None
) -> float | None:
    """The machine's busy share of CPU time between two ``cpu_times`` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def cpu_busy_since(before: tuple[float, float] | None) -> str:
    """The machine's share of CPU time busy since ``before`` (all processes, all cores)."""
    share = busy_share(before, cpu_times())
    return "CPU busy: unknown" if share is None else f"CPU busy {100 * share:.0f}%"


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def machine_description() -> list[str]:
    """Lines naming what a figure depends on: cores, memory, versions, load."""
    import django
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            database = f"PostgreSQL {cursor.fetchone()[0]}"
    else:
        database = f"{connection.vendor} {connection.Database.sqlite_version}"
    return [
        f"machine: {os.cpu_count()} cores, {_memory_total()} memory, "
        f"{platform.system()} {platform.machine()}; load average {load_average()}",
        f"versions: Python {platform.python_version()}, Django {django.get_version()}, "
        f"{database}, moto {_version('moto')}, boto3 {_version('boto3')}, "
        f"django-q2 {_version('django-q2')}",
    ]
