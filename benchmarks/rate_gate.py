"""Does the shared rate gate hold its rate across worker processes? (SPEC §5)

Starts an S3-compatible server (moto in server mode), seeds it, then runs N
worker processes, each with its own database connection, each disposing of
its own share of the keys through ``ObjectDisposer`` and one shared gate
(a data class's ``rate_limit``) for a fixed time. Every DeleteObjects request
is timed where it is sent. Prints the configured and measured rates, the
largest number of deletes in any sliding one-second window, and each
process's share. Seeding happens before the timed window.

Targets: measured within 10% of the configured rate; no one-second window
above 1.2 times the rate. The exit status is 1 when a target is missed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe python benchmarks/rate_gate.py
    ... benchmarks/rate_gate.py --rate 200 --seconds 60 --workers 4
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import common  # noqa: E402

# Dummy credentials and no profile: nothing here can reach the real AWS.
common.aws_dummy_environment()
common.setup_django()

from django.conf import settings  # noqa: E402
from django.db import connection, connections  # noqa: E402

from retention.storage import KeyResult  # noqa: E402

DATA_CLASS = "bench.rate"
BUCKET = "lethe-rate-gate-bench"


class TimedAdapter:
    """Passes deletes on, noting when each request was sent and how many keys it had."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.alias = inner.alias
        self.requests: list[tuple[float, int]] = []

    def check(self) -> None:
        self.inner.check()

    def delete_many(
        self, keys: Sequence[str], *, erase_versions: bool = False, probe: Collection[str] = ()
    ) -> dict[str, KeyResult]:
        self.requests.append((time.time(), len(keys)))
        result: dict[str, KeyResult] = self.inner.delete_many(
            keys, erase_versions=erase_versions, probe=probe
        )
        return result


def seed(endpoint_url: str, keys: Sequence[str]) -> None:
    client = common.s3_client(endpoint_url)
    common.create_bucket(client, BUCKET)
    common.seed_objects(client, BUCKET, keys, threads=8)


# --------------------------------------------------------------------------
# A worker process


def worker(
    index: int,
    keys: Sequence[str],
    *,
    endpoint_url: str,
    database_name: str,
    rate: float,
    seconds: float,
    page: int,
    ready: Any,
    go: Any,
    start_at: Any,
    results: Any,
) -> None:
    from retention.engine.disposal import DisposalItem, ObjectDisposer
    from retention.engine.pacing import gate_for
    from retention.storage.s3 import S3Adapter

    settings.DATABASES["default"]["NAME"] = database_name
    connections["default"].settings_dict["NAME"] = database_name
    adapter = TimedAdapter(S3Adapter("bench", common.s3_client(endpoint_url), BUCKET))
    disposer = ObjectDisposer(lambda alias: adapter)
    gate = gate_for(data_class=DATA_CLASS, rate_limit=rate)
    # Connect and warm up before the window opens.
    connection.ensure_connection()
    adapter.check()
    ready.wait()
    go.wait()  # the parent has set start_at in between
    time.sleep(max(0.0, start_at.value - time.time()))
    deadline = start_at.value + seconds
    outcomes: Counter[str] = Counter()
    for offset in range(0, len(keys), page):
        if time.time() >= deadline:
            break
        items = [
            DisposalItem(record_id=offset + i, storage="bench", object_key=key, probe=False)
            for i, key in enumerate(keys[offset : offset + page])
        ]
        for result in disposer.dispose(items, erase_versions=False, gate=gate).values():
            outcomes[str(result.outcome)] += 1
    else:
        outcomes["ran_out_of_keys"] += 1
    connections.close_all()
    results.put((index, adapter.requests, dict(outcomes)))


# --------------------------------------------------------------------------
# Analysis


def max_window(events: Sequence[tuple[float, int]], width: float = 1.0) -> tuple[int, float]:
    """The most deletes sent in any window [t, t + width); and where it starts."""
    best, best_at, total, left = 0, events[0][0] if events else 0.0, 0, 0
    for t, n in events:
        total += n
        while events[left][0] <= t - width:
            total -= events[left][1]
            left += 1
        if total > best:
            best, best_at = total, events[left][0]
    return best, best_at


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="deletes per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the timed window")
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--page", type=int, default=100, help="keys per dispose() call")
    args = parser.parse_args()

    if connection.vendor != "postgresql":
        print("The gate is shared through the database: set DATABASE_URL to PostgreSQL.")
        return 2
    needed = int(args.rate * args.seconds * 1.15) + args.workers * args.page
    keys = [f"bench/{i:07d}" for i in range(needed)]
    original_name = connection.settings_dict["NAME"]
    test_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    connection.close()
    moto = common.start_moto()
    endpoint_url = moto.endpoint_url
    try:
        started = time.perf_counter()
        seed(endpoint_url, keys)
        seeding = time.perf_counter() - started

        spawn = multiprocessing.get_context("spawn")
        ready = spawn.Barrier(args.workers + 1)
        go = spawn.Barrier(args.workers + 1)
        start_at = spawn.Value("d", 0.0)
        results = spawn.Queue()
        processes = [
            spawn.Process(
                target=worker,
                args=(index, keys[index :: args.workers]),
                kwargs={
                    "endpoint_url": endpoint_url,
                    "database_name": test_name,
                    "rate": args.rate,
                    "seconds": args.seconds,
                    "page": args.page,
                    "ready": ready,
                    "go": go,
                    "start_at": start_at,
                    "results": results,
                },
            )
            for index in range(args.workers)
        ]
        for process in processes:
            process.start()
        # Every worker is connected and warmed up before the window opens.
        ready.wait()
        start_at.value = time.time() + 0.2
        go.wait()
        collected = [results.get(timeout=args.seconds + 120) for _ in processes]
        for process in processes:
            process.join(timeout=30)
    finally:
        common.stop_moto(moto)
        connection.creation.destroy_test_db(original_name, verbosity=0)

    window_start, window_end = start_at.value, start_at.value + args.seconds
    events = sorted((t, n) for _, requests, _ in collected for t, n in requests)
    in_window = [(t, n) for t, n in events if window_start <= t < window_end]
    deleted = sum(n for _, n in in_window)
    measured = deleted / args.seconds
    burst, burst_at = max_window(events)
    buckets: Counter[int] = Counter()
    for t, n in in_window:
        buckets[int(t - window_start)] += n
    per_second = [buckets.get(second, 0) for second in range(int(args.seconds))]
    outcomes: Counter[str] = Counter()
    for _, _, counts in collected:
        outcomes.update(counts)
    error = (measured - args.rate) / args.rate * 100
    within = abs(error) <= 10
    calm = burst <= 1.2 * args.rate

    print(
        f"database: {connection.vendor}; workers: {args.workers}; window: {args.seconds:g} s; "
        f"keys seeded: {len(keys):,} in {seeding:.0f} s; page: {args.page} keys"
    )
    print(f"configured rate:  {args.rate:g} deletes/s")
    print(
        f"measured rate:    {measured:.1f} deletes/s over the window "
        f"({deleted:,} deletes in {len(in_window):,} requests; {error:+.1f}%)"
    )
    print(
        f"largest 1 s window: {burst} deletes ({burst / args.rate:.2f}x the rate), "
        f"starting {burst_at - window_start:+.2f} s into the window"
    )
    sizes = Counter(n for _, n in in_window)
    print(
        f"per-second counts: min {min(per_second)}, median {statistics.median(per_second):g}, "
        f"max {max(per_second)}; request sizes (keys x requests): "
        + ", ".join(f"{size}x{count}" for size, count in sorted(sizes.items()))
    )
    for index, requests, _ in sorted(collected):
        mine = sum(n for t, n in requests if window_start <= t < window_end)
        print(f"  worker {index}: {mine:,} deletes ({mine / max(deleted, 1) * 100:.1f}%)")
    print(f"outcomes: {dict(sorted(outcomes.items()))}")
    print(
        f"target: within 10% of the rate: {'yes' if within else 'NO'}; "
        f"no 1 s window above 1.2x: {'yes' if calm else 'NO'}"
    )
    return 0 if within and calm else 1


if __name__ == "__main__":
    sys.exit(main())
