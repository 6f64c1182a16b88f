"""Is a dry run's memory flat in the table size? (SPEC §5)

On a fresh PostgreSQL database, seeds 1,000,000 tracked rows with SQL (the
shape of ``benchmarks/seed_sql.py``: four data classes, one report-only, 40
tenants, two years of history, holds), then runs the real command as a
subprocess, ``manage.py run_retention --dry-run --json``, and reads its peak
resident set size from the kernel (``wait4``'s ``ru_maxrss``, the child's own
high-water mark). Prints the peak (target: under 300 MB), the wall time, the
run's counts, and for scale the peak of the same command stopped right after
start-up (Django and the app imported, no query). Several ``--rows`` values
show whether memory grows with the table. Exit status 1 when the target is
missed; then, or with ``--profile``, the dry run is repeated in this process
under tracemalloc and the allocation sites at its peak are printed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe_bench python benchmarks/memory.py
    ... benchmarks/memory.py --rows 100000 1000000 --profile
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import common  # noqa: E402

common.setup_django()

from django.utils import timezone  # noqa: E402

from benchmarks import seed_sql  # noqa: E402

TARGET_BYTES = 300 * 1000 * 1000


def run_command(args: list[str], *, database: str) -> common.Measured:
    """Run ``manage.py`` with ``args`` against ``database``; its own peak RSS."""
    env = {
        **os.environ,
        "DATABASE_URL": common.database_url(database),
        "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"],
    }
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, str(common.REPO_ROOT / "manage.py"), *args],
            stdout=subprocess.PIPE,
            stderr=errors,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=common.REPO_ROOT,
        )
        assert process.stdout is not None
        stdout = process.stdout.read().decode()
        process.stdout.close()
        # wait4, not wait: its rusage is this child's alone.
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    # Linux reports ru_maxrss in KiB.
    return common.Measured(usage.ru_maxrss * 1024, seconds, process.returncode, stdout, stderr)


def profile(top: int) -> None:
    """The dry run in this process under tracemalloc; allocation sites at its peak."""
    from retention.engine import run_execute, run_start
    from retention.models import RunMode, RunTrigger

    tracemalloc.start(10)
    peak: dict[str, Any] = {"bytes": 0, "snapshot": None}
    done = threading.Event()

    def watch() -> None:
        # A snapshot whenever the traced size passes its previous high by 5 MB.
        while not done.wait(0.05):
            current, _ = tracemalloc.get_traced_memory()
            if current > peak["bytes"] + 5_000_000:
                peak["bytes"] = current
                peak["snapshot"] = tracemalloc.take_snapshot()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run = run_start(mode=RunMode.DRY_RUN, trigger=RunTrigger.COMMAND, now=timezone.now())
        run_execute(run=run)
    finally:
        done.set()
        watcher.join()
        _, traced_peak = tracemalloc.get_traced_memory()
        final = tracemalloc.take_snapshot()
        tracemalloc.stop()
    snapshot = peak["snapshot"] or final
    where = "nearest the peak" if peak["snapshot"] else "at the end (never 5 MB above the start)"
    print(
        f"\ntracemalloc: Python allocations peaked at {traced_peak / 1e6:.1f} MB; "
        f"top {top} sites in the snapshot {where}:"
    )
    for stat in snapshot.statistics("traceback")[:top]:
        print(f"  {stat.size / 1e6:8.1f} MB in {stat.count:,} blocks")
        for line in stat.traceback.format(limit=4, most_recent_first=True):
            print(f"      {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument(
        "--profile", action="store_true", help="Profile with tracemalloc even when under target."
    )
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    if common.not_postgresql():
        return 2

    now = timezone.now().replace(microsecond=0)
    failures = []
    with common.fresh_database() as name:
        print(f"database: {name} (fresh; dropped at the end)")
        for line in common.machine_description():
            print(line)
        # Start-up floor: the command refuses its arguments before any query.
        floor = run_command(["run_retention", "--dry-run", "--limit", "0"], database=name)
        print(
            f"start-up only (Django and the app imported): peak RSS {floor.peak_bytes / 1e6:.1f} MB"
        )
        versions = seed_sql.bench_policies(now=now)
        for rows in args.rows:
            print(f"\n== {rows:,} tracked rows ==")
            seconds = seed_sql.seed(rows, versions=versions, now=now, progress=print)
            print(f"seeded in {seconds:.1f} s (SQL, holds, VACUUM ANALYZE):")
            for line in seed_sql.describe(now=now):
                print(line)
            measured = run_command(["run_retention", "--dry-run", "--json"], database=name)
            if measured.returncode != 0:
                print(measured.stderr, file=sys.stderr)
                raise SystemExit(f"the dry run exited with status {measured.returncode}")
            result = json.loads(measured.stdout)
            met = measured.peak_bytes < TARGET_BYTES
            print(
                f"dry run: peak RSS {measured.peak_bytes / 1e6:.1f} MB "
                f"(target: under {TARGET_BYTES / 1e6:.0f} MB) {'met' if met else 'MISSED'}; "
                f"wall time {measured.seconds:.1f} s; status {result['status']}"
            )
            counts = ", ".join(f"{k} {v:,}" for k, v in result["counts"].items())
            print(f"counts: {counts}; oldest eligible {result['oldest_eligible_at']}")
            if not met:
                failures.append(f"{rows:,} rows: peak RSS {measured.peak_bytes / 1e6:.1f} MB")
        if failures or args.profile:
            profile(args.top)
    for failure in failures:
        print(f"target missed: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
