"""Does a reconciliation's memory stay flat in the number of objects? (SPEC §2, §5)

``retention_reconcile`` merges a store's listing with the records in key
order, one page of each at a time, so its peak memory should not depend on
how many objects the store holds. For each ``--sizes`` value N this script
starts from a fresh PostgreSQL database (named after DATABASE_URL's, plus
the size) and a bucket of its own on a moto server, and seeds a scenario of
the same shape (not timed):

- N objects of 64 bytes, keys tenant-first (``t07/00001234.bin``, 40
  tenants), the kinds of finding interleaved in key order;
- about 90 % of them tracked by an active record of an enforced class;
- about 3 % tracked by a deleted record (``reappeared``);
- the rest with no record (``orphans``);
- about 3 % of N more active records whose object was never put (``missing``).

Records are one bulk insert (``key_digests`` once for all keys), then
VACUUM ANALYZE. The real command runs as a child process per size,
``manage.py retention_reconcile --storage default --json``, with the
project's settings pointing the default storage at that size's bucket
(AWS_STORAGE_BUCKET_NAME, AWS_S3_ENDPOINT_URL): it lists the bucket, merges,
takes a second look (HEAD) at each missing object, closes the missing
records and puts the reappeared ones back in the claim queue. Its peak RSS
is the kernel's (``wait4``'s ``ru_maxrss``, that process's own high-water
mark); its wall time includes the interpreter's start-up and Django's
checks, printed apart as the peak and time of the same command refused
before any query. Its ``--json`` counts must equal the scenario's, and the
records and events it left must say the same (exit status 2 otherwise).
The command is started through a bare interpreter (``PEAK_LAUNCHER``): a
direct child's ``ru_maxrss`` would start from this script's own peak, which
grows with the seed.

Targets: peak RSS at the largest size at most 1.25 x the smallest's, and
every peak under 300 MB. Exit status 1 when one is missed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe_bench_reconcile \\
        python benchmarks/reconcile.py
    ... benchmarks/reconcile.py --sizes 2000 10000 --keep   # a quick look; databases kept
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import common  # noqa: E402

DATA_CLASS = "bench.reconcile"
TARGET_BYTES = 300 * 1000 * 1000
TARGET_RATIO = 1.25
TENANTS = 40
# Out of every 100 keys: the kind of each, spread through the key order.
ACTIVE, REAPPEARED, ORPHAN, MISSING = "active", "reappeared", "orphan", "missing"
PATTERN = [ACTIVE] * 87 + [REAPPEARED] * 3 + [ORPHAN] * 7 + [MISSING] * 3
PATTERN_ORDER = [PATTERN[(i * 37) % 100] for i in range(100)]  # 37 is prime to 100
COUNTS = ("orphans", "missing", "reappeared", "leftover_versions", "listed", "tracked", "adopted")


@dataclass
class Scenario:
    objects: int
    keys: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, objects: int) -> Scenario:
        """Keys of each kind until ``objects`` keys have an object in the bucket."""
        keys: dict[str, list[str]] = {kind: [] for kind in (ACTIVE, REAPPEARED, ORPHAN, MISSING)}
        placed = index = 0
        while placed < objects:
            kind = PATTERN_ORDER[index % 100]
            keys[kind].append(f"t{index % TENANTS:02d}/{index:08d}.bin")
            placed += kind != MISSING
            index += 1
        return cls(objects, keys)

    def in_bucket(self) -> list[str]:
        return self.keys[ACTIVE] + self.keys[REAPPEARED] + self.keys[ORPHAN]

    def expected(self) -> dict[str, int]:
        return {
            "orphans": len(self.keys[ORPHAN]),
            "missing": len(self.keys[MISSING]),
            "reappeared": len(self.keys[REAPPEARED]),
            "leftover_versions": 0,
            "listed": self.objects,
            "tracked": sum(len(self.keys[k]) for k in (ACTIVE, REAPPEARED, MISSING)),
            "adopted": 0,
        }


@dataclass
class Row:
    objects: int
    peak_bytes: int
    seconds: float
    counts: dict[str, int]

    @property
    def rate(self) -> float:
        return self.objects / self.seconds if self.seconds else 0.0


# Spawns argv[2:] and writes its ru_maxrss (KiB) to the file argv[1]. A child's
# ru_maxrss starts from its parent's high-water mark (Linux carries the mm of
# the fork into the exec'd process's maxrss), and this script's own peak
# grows with the seed: the command is therefore the grandchild of a bare
# interpreter (-S, about 10 MB), whose peak is the floor instead.
PEAK_LAUNCHER = """\
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_command(args: list[str], env: dict[str, str]) -> common.Measured:
    """``manage.py`` with ``args`` in a process of its own; that process's peak RSS."""
    with tempfile.TemporaryFile() as errors, tempfile.NamedTemporaryFile("r") as peak:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-S", "-c", PEAK_LAUNCHER, peak.name, sys.executable]
            + [str(common.REPO_ROOT / "manage.py"), *args],
            stdout=subprocess.PIPE,
            stderr=errors,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=common.REPO_ROOT,
            check=False,
        )
        seconds = time.perf_counter() - started
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
        kib = peak.read().strip()
    if not kib:
        raise SystemExit(f"the peak RSS launcher failed (status {done.returncode}):\n{stderr}")
    # Linux reports ru_maxrss in KiB.
    return common.Measured(int(kib) * 1024, seconds, done.returncode, done.stdout.decode(), stderr)


def child_env(database: str, bucket: str, endpoint_url: str) -> dict[str, str]:
    from django.conf import settings

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "RETENTION_STORAGE_ADAPTERS")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=common.database_url(database),
        RETENTION_DIGEST_KEY=settings.RETENTION_DIGEST_KEY,
        AWS_STORAGE_BUCKET_NAME=bucket,
        AWS_S3_ENDPOINT_URL=endpoint_url,
        AWS_S3_REGION_NAME=common.REGION,
    )
    return env


@contextlib.contextmanager
def database_for(suffix: str, *, keep: bool) -> Iterator[str]:
    """A new, migrated database named after the configured one; dropped after unless ``keep``."""
    from django.db import connection

    original = connection.settings_dict["NAME"]
    connection.settings_dict["TEST"]["NAME"] = f"{original}_{suffix}"
    name: str = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        yield name
    finally:
        connection.creation.destroy_test_db(original, verbosity=0, keepdb=keep)


def seed_records(version: Any, scenario: Scenario, *, now: datetime) -> None:
    """One bulk insert of the scenario's records, as ``record_track`` would write them."""
    from django.db import connection

    from retention.digest import key_digests
    from retention.models import RecordState, RetentionRecord

    # In key order, whatever their kind.
    rows = sorted(
        (key, kind) for kind in (ACTIVE, REAPPEARED, MISSING) for key in scenario.keys[kind]
    )
    digests = key_digests(key for key, _ in rows)
    live_since = now - timedelta(days=10)
    deleted_since = now - timedelta(days=40)
    records = []
    for (key, kind), digest in zip(rows, digests, strict=True):
        deleted = kind == REAPPEARED
        created = deleted_since if deleted else live_since
        records.append(
            RetentionRecord(
                tenant_id=key.partition("/")[0],
                data_class=DATA_CLASS,
                storage="default",
                object_key=key,
                key_digest=digest,
                policy_version=version,
                created_at=created,
                expires_at=created + timedelta(days=30),
                state=RecordState.DELETED if deleted else RecordState.ACTIVE,
                deleted_at=created + timedelta(days=31) if deleted else None,
            )
        )
    RetentionRecord.objects.bulk_create(records, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE retention_retentionrecord")


def left_behind(run_id: str, scenario: Scenario) -> list[str]:
    """What differs between the records and events the run left and the scenario."""
    from django.db.models import Count

    from retention.models import DeletionEvent, EventOutcome, RecordState, RetentionRecord

    states = dict(RetentionRecord.objects.values_list("state").annotate(n=Count("id")).order_by())
    outcomes = dict(
        DeletionEvent.objects.filter(run_id=run_id)
        .values_list("outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    want_states = {
        RecordState.ACTIVE: len(scenario.keys[ACTIVE]),
        RecordState.MISSING: len(scenario.keys[MISSING]),
        # Reappeared objects of an enforced class go back to the claim queue.
        RecordState.FAILED: len(scenario.keys[REAPPEARED]),
    }
    want_outcomes = {
        EventOutcome.MISSING: len(scenario.keys[MISSING]),
        EventOutcome.REAPPEARED: len(scenario.keys[REAPPEARED]),
    }
    problems = []
    if {k: v for k, v in states.items() if v} != {k: v for k, v in want_states.items() if v}:
        problems.append(f"records by state {states}, expected {want_states}")
    if outcomes != {k: v for k, v in want_outcomes.items() if v}:
        problems.append(f"the run's events by outcome {outcomes}, expected {want_outcomes}")
    return problems


def measure_size(
    args: argparse.Namespace, moto: common.MotoServer, client: Any, size: int
) -> tuple[Row, list[str]]:
    now = datetime.now(UTC)
    scenario = Scenario.build(size)
    bucket = common.create_bucket(client, f"lethe-reconcile-{size}")
    print(f"\n== {size:,} objects (bucket {bucket}) ==")
    sys.stdout.flush()
    put_seconds = common.seed_objects(
        client, bucket, scenario.in_bucket(), threads=args.seed_threads
    )
    with database_for(str(size), keep=args.keep) as database:
        started = time.perf_counter()
        version = common.enforced_policy(DATA_CLASS, now=now)
        seed_records(version, scenario, now=now)
        record_seconds = time.perf_counter() - started
        expected = scenario.expected()
        print(
            f"seeded in {put_seconds:.0f} s ({size / put_seconds:,.0f} puts/s, "
            f"{args.seed_threads} threads) and {record_seconds:.1f} s (records, database "
            f"{database}{', kept' if args.keep else ''}): "
            + ", ".join(f"{k} {v:,}" for k, v in expected.items() if k != "adopted")
        )
        sys.stdout.flush()
        measured = run_command(
            ["retention_reconcile", "--storage", "default", "--json"],
            child_env(database, bucket, moto.endpoint_url),
        )
        if measured.returncode != 0:
            print(measured.stdout + measured.stderr, file=sys.stderr)
            raise SystemExit(f"retention_reconcile exited with status {measured.returncode}")
        result = json.loads(measured.stdout)
        counts = {name: int(result["counts"][name]) for name in COUNTS}
        problems = [
            f"{size:,} objects: {name} {counts[name]:,}, expected {expected[name]:,}"
            for name in COUNTS
            if counts[name] != expected[name]
        ]
        if result["status"] != "finished":
            problems.append(f"{size:,} objects: the run ended {result['status']}")
        problems += [f"{size:,} objects: {p}" for p in left_behind(result["run_id"], scenario)]
    row = Row(size, measured.peak_bytes, measured.seconds, counts)
    print(
        f"retention_reconcile: peak RSS {row.peak_bytes / 1e6:.1f} MB, {row.seconds:.1f} s, "
        f"{row.rate:,.0f} objects/s; run {result['run_id']} {result['status']}; counts "
        + ("as seeded" if not problems else "WRONG")
    )
    for problem in problems:
        print(f"    CHECK FAILED: {problem}")
    sys.stdout.flush()
    return row, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--seed-threads", type=int, default=8, help="threads putting objects")
    parser.add_argument(
        "--keep", action="store_true", help="keep each size's database (the buckets go with moto)"
    )
    args = parser.parse_args()
    if any(size < 100 for size in args.sizes):
        parser.error("--sizes: at least 100 objects each")

    common.aws_dummy_environment()
    common.setup_django()
    if common.not_postgresql():
        return 2
    load_before = common.load_average()
    rows: list[Row] = []
    problems: list[str] = []
    with common.moto_server() as moto:
        client = common.s3_client(moto.endpoint_url, max_pool_connections=args.seed_threads)
        print(
            f"S3: moto at {moto.endpoint_url}, a bucket per size; PostgreSQL: a fresh "
            "database per size; seeding not timed"
        )
        # Start-up floor: the command refuses its arguments before any query.
        with database_for("startup", keep=False) as database:
            for line in common.machine_description():
                print(line)
            floor = run_command(
                ["retention_reconcile", "--tenant-pattern", "{tenant}/{rest}"],
                child_env(database, "lethe-reconcile-none", moto.endpoint_url),
            )
        print(
            f"start-up only (Django, the app and the checks; refused before any query): "
            f"peak RSS {floor.peak_bytes / 1e6:.1f} MB, {floor.seconds:.1f} s"
        )
        for size in args.sizes:
            row, found = measure_size(args, moto, client, size)
            rows.append(row)
            problems += found

    print(
        f"\n{'objects':>9}  {'peak RSS MB':>11}  {'above start-up':>14}  {'seconds':>7}  "
        f"{'objects/s':>9}  counts"
    )
    for row in rows:
        counts = ", ".join(f"{k} {v:,}" for k, v in row.counts.items())
        print(
            f"{row.objects:>9,}  {row.peak_bytes / 1e6:>11.1f}  "
            f"{(row.peak_bytes - floor.peak_bytes) / 1e6:>+14.1f}  {row.seconds:>7.1f}  "
            f"{row.rate:>9,.0f}  {counts}"
        )
    smallest = min(rows, key=lambda r: r.objects)
    largest = max(rows, key=lambda r: r.objects)
    ratio = largest.peak_bytes / smallest.peak_bytes
    ratio_met = ratio <= TARGET_RATIO
    print(
        f"peak RSS at {largest.objects:,} / at {smallest.objects:,} objects = {ratio:.2f} "
        f"(target at most {TARGET_RATIO}): {'yes' if ratio_met else 'NO'}"
    )
    highest = max(rows, key=lambda r: r.peak_bytes)
    under = highest.peak_bytes < TARGET_BYTES
    print(
        f"highest peak RSS {highest.peak_bytes / 1e6:.1f} MB at {highest.objects:,} objects "
        f"(target under {TARGET_BYTES / 1e6:.0f} MB): {'yes' if under else 'NO'}"
    )
    print(f"load average before: {load_before}; after: {common.load_average()}")
    for problem in problems:
        print(f"check failed: {problem}", file=sys.stderr)
    if problems:
        return 2
    return 0 if ratio_met and under else 1


if __name__ == "__main__":
    sys.exit(main())
