"""What hash-chaining the audit trail costs the engine.

Runs enforce sweeps over N expired records with and without chaining (the
unchained variant writes the same events with a plain bulk insert), on a
fresh test database, alternating the two, and prints objects/s for each and
the overhead. Storage is a no-op adapter so the figure isolates the database
work, where chaining lives: against a real store the network dominates and
the relative cost is smaller.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe python benchmarks/chain_cost.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


def seed(count: int, version: Any, offset: int) -> None:
    from retention.models import RetentionRecord

    created = NOW - timedelta(days=31)
    RetentionRecord.objects.bulk_create(
        (
            RetentionRecord(
                tenant_id=f"t{i % 50}",
                data_class="bench.class",
                storage="default",
                object_key=f"bench/{offset}/{i}",
                key_digest=f"{i:064d}",
                policy_version=version,
                created_at=created,
                expires_at=created + timedelta(days=30),
            )
            for i in range(count)
        ),
        batch_size=5000,
    )


def unchained_append(events: Any, *, run_id: Any, now: datetime, **_: Any) -> list[Any]:
    # The same insert as the chained path (COPY on PostgreSQL), without the
    # batch, the hashing and the chain head.
    from retention.chain.events import _insert

    _insert(events)
    return list(events)


def sweep(chained: bool) -> tuple[float, int]:
    from retention import engine
    from retention.engine import finalize
    from retention.models import RunMode

    # The finalize writes every deletion's event (the inline claim is its re-check).
    original = finalize.events_append
    finalize.events_append = original if chained else unchained_append
    try:
        started = time.perf_counter()
        run = engine.run_start(mode=RunMode.ENFORCE, now=NOW)
        run = engine.run_execute(run=run, clock=lambda: NOW)
        elapsed = time.perf_counter() - started
    finally:
        finalize.events_append = original
    return elapsed, run.deleted


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args()

    settings.RETENTION_DIGEST_KEY = "bench"
    settings.RETENTION_STORAGE_ADAPTERS = {"default": "benchmarks.common.NullAdapter"}
    original_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        from django.contrib.auth import get_user_model

        from retention import services
        from retention.models import DataClassMode, Policy

        user = get_user_model()
        author = user.objects.create(username="bench-author")
        approver = user.objects.create(username="bench-approver", is_superuser=True)
        version = services.policy_version_propose(
            data_class="bench.class",
            retention_period=timedelta(days=30),
            author=author,
            now=NOW - timedelta(days=400),
            batch_size=args.batch_size,
        )
        services.policy_version_submit(version=version, by=author, now=NOW)
        services.policy_version_approve(version=version, approver=approver, now=NOW)
        Policy.objects.filter(data_class="bench.class").update(mode=DataClassMode.ENFORCE)

        rates: dict[bool, list[float]] = {True: [], False: []}
        offset = 0
        for round_no in range(args.rounds):
            for chained in (round_no % 2 == 0, round_no % 2 != 0):
                offset += 1
                seed(args.records, version, offset)
                elapsed, deleted = sweep(chained)
                assert deleted == args.records, (deleted, args.records)
                rates[chained].append(deleted / elapsed)
                # Both variants start from a vacuumed table, as autovacuum
                # would leave it between nightly runs.
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute("VACUUM ANALYZE retention_retentionrecord")
        chained_rate = statistics.median(rates[True])
        plain_rate = statistics.median(rates[False])
        overhead = (plain_rate - chained_rate) / plain_rate * 100
        print(
            f"database: {connection.vendor}; records per sweep: {args.records}; "
            f"batch size: {args.batch_size}; rounds: {args.rounds}"
        )
        print(
            f"without chaining: {plain_rate:,.0f} objects/s  (runs: "
            f"{', '.join(f'{r:,.0f}' for r in rates[False])})"
        )
        print(
            f"with chaining:    {chained_rate:,.0f} objects/s  (runs: "
            f"{', '.join(f'{r:,.0f}' for r in rates[True])})"
        )
        print(f"chaining overhead: {overhead:.1f}% of throughput (target: at most 10%)")
    finally:
        connection.creation.destroy_test_db(original_name, verbosity=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
