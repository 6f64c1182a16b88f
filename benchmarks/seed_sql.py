"""A realistic retention table of any size, written by SQL, not the ORM.

``claim_scale.py`` and ``memory.py`` need 100,000 to 1,000,000 tracked rows;
the ORM would take minutes to write them, ``INSERT ... SELECT ... FROM
generate_series`` takes seconds. Every column is a pure function of the row id
(``hashint8extended`` as the dice), so a given size always gives the same
table. The policies and the holds go through the services, as a governance
owner's would.

The shape, relative to ``now``:

- four data classes: ``pod.scan`` (45% of rows, kept 180 days),
  ``logs.integration`` (25%, 30 days), ``idv.photo`` (20%, 90 days), all three
  enforced, and ``support.transcript`` (10%, 90 days), still report-only, so
  its expired rows are never swept and stay in the due index;
- 40 tenants, skewed (the largest has ~16% of the rows);
- ``created_at`` uniform over the last two years and increasing with the id
  (rows are inserted as they are created), ``expires_at`` computed once from
  it: most rows are expired;
- earlier runs swept what expired more than a year ago (``deleted``), except
  held rows and the 1% that failed for review; the last year is a backlog:
  mostly ``active``, 1% ``failed`` and due for retry, 0.5% ``deleting`` under
  a lease that has expired, 1% failed for review;
- legal holds: one whole tenant, one tenant within ``pod.scan``, a released
  tenant hold (ignored), and ten single records per enforced class among the
  first 10,000 rows a claim would take.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class BenchClass:
    name: str
    share: float
    period: timedelta
    enforced: bool


CLASSES = (
    BenchClass("pod.scan", 0.45, timedelta(days=180), enforced=True),
    BenchClass("logs.integration", 0.25, timedelta(days=30), enforced=True),
    BenchClass("idv.photo", 0.20, timedelta(days=90), enforced=True),
    BenchClass("support.transcript", 0.10, timedelta(days=90), enforced=False),
)
TENANTS = 40
HISTORY = timedelta(days=730)
SWEPT_BEFORE = timedelta(days=365)
HELD_TENANT = "t07"
HELD_TENANT_IN_CLASS = ("t03", "pod.scan")
RELEASED_HOLD_TENANT = "t01"
RECORD_HOLDS_PER_CLASS = 10
CHUNK = 250_000

TABLE = "retention_retentionrecord"

# u1 picks the class, u2 the tenant (squared: skewed), u4 the state. Ids are
# in creation order, as in a real table: row g of n was created (n - g + u3) / n
# of the history ago, so one expiry window's rows share heap pages.
SEED_SQL = """
WITH classes (name, lo, hi, period, version_id, enforced) AS (VALUES {classes}),
dice AS (
    SELECT g,
        (hashint8extended(g, 1) & 2147483647)::float8 / 2147483648 AS u1,
        (hashint8extended(g, 2) & 2147483647)::float8 / 2147483648 AS u2,
        (hashint8extended(g, 4) & 2147483647)::float8 / 2147483648 AS u4,
        -- The fraction is taken first: interval * (rows - g) overflows past ~2.9M rows.
        %(now)s::timestamptz - %(history)s::interval * ((
            (%(rows)s - g)::float8
            + (hashint8extended(g, 3) & 2147483647)::float8 / 2147483648
        ) / %(rows)s) AS created_at
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g
),
drawn AS (
    SELECT d.g, d.u4, c.name AS data_class, c.version_id, c.enforced,
        't' || lpad(floor(%(tenants)s * d.u2 * d.u2)::int::text, 2, '0') AS tenant_id,
        d.created_at, d.created_at + c.period AS expires_at
    FROM dice d JOIN classes c ON d.u1 >= c.lo AND d.u1 < c.hi
),
judged AS (
    SELECT drawn.*,
        (enforced AND expires_at <= %(now)s AND u4 < 0.01) AS for_review,
        (tenant_id = %(held_tenant)s
            OR (tenant_id = %(held_class_tenant)s AND data_class = %(held_class)s)) AS held
    FROM drawn
),
placed AS (
    SELECT judged.*,
        CASE
            WHEN NOT enforced OR expires_at > %(now)s THEN 'active'
            WHEN for_review THEN 'failed'
            WHEN expires_at <= %(swept)s AND NOT held THEN 'deleted'
            WHEN expires_at <= %(swept)s THEN 'active'
            WHEN u4 < 0.02 THEN 'failed'
            WHEN u4 < 0.025 THEN 'deleting'
            ELSE 'active'
        END AS state
    FROM judged
)
INSERT INTO retention_retentionrecord (
    id, tenant_id, data_class, storage, object_key, key_digest, policy_version_id,
    created_at, expires_at, state, row_version, lease_owner, lease_expires_at,
    disposal_started_at, attempts, retryable, next_attempt_at, last_error,
    deleted_at, renewed_at
)
SELECT
    g, tenant_id, data_class, 'default',
    'bench/' || data_class || '/' || tenant_id || '/' || g || '.bin',
    encode(sha256(int8send(g)), 'hex'),
    version_id, created_at, expires_at, state, 1,
    CASE WHEN state = 'deleting' THEN md5(g::text)::uuid END,
    CASE WHEN state = 'deleting' THEN %(now)s::timestamptz - interval '1 hour' END,
    NULL,
    CASE state WHEN 'active' THEN 0 WHEN 'failed' THEN
        CASE WHEN for_review THEN 5 ELSE 2 END ELSE 1 END,
    NOT for_review,
    CASE WHEN state = 'failed' AND NOT for_review
        THEN %(now)s::timestamptz - interval '1 hour' END,
    CASE WHEN state = 'failed' THEN 'bench: 503 SlowDown' ELSE '' END,
    CASE WHEN state = 'deleted' THEN expires_at + interval '1 day' END,
    NULL
FROM placed
"""


def bench_policies(*, now: datetime) -> dict[str, int]:
    """Approved versions for the bench classes; return their ids by class.

    Call once per database, before ``seed``.
    """
    from django.contrib.auth import get_user_model

    from benchmarks import common
    from retention import services

    versions = {}
    for bench_class in CLASSES:
        version = common.enforced_policy(
            bench_class.name, now=now, retention_period=bench_class.period, batch_size=1000
        )
        versions[bench_class.name] = version.pk
        if not bench_class.enforced:
            approver = get_user_model().objects.get(username="bench-approver")
            services.enforcement_disable(data_class=bench_class.name, by=approver, now=now)
    return versions


def seed(
    rows: int,
    *,
    versions: dict[str, int],
    now: datetime,
    progress: Callable[[str], None] | None = None,
) -> float:
    """Replace every record and hold with ``rows`` new records; return seconds.

    Ends with VACUUM ANALYZE, as autovacuum would leave a table between runs.
    """
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE retention_legalhold, retention_deletionevent, "
            f"{TABLE} RESTART IDENTITY CASCADE"
        )
    values, params = _classes_values(versions)
    sql = SEED_SQL.replace("{classes}", values)
    held_class_tenant, held_class = HELD_TENANT_IN_CLASS
    for first in range(1, rows + 1, CHUNK):
        last = min(first + CHUNK - 1, rows)
        with connection.cursor() as cursor:
            cursor.execute(
                sql,
                {
                    **params,
                    "first": first,
                    "last": last,
                    "rows": rows,
                    "tenants": TENANTS,
                    "now": now,
                    "history": HISTORY,
                    "swept": now - SWEPT_BEFORE,
                    "held_tenant": HELD_TENANT,
                    "held_class_tenant": held_class_tenant,
                    "held_class": held_class,
                },
            )
        if progress:
            progress(f"  seeded {last:,} / {rows:,} rows ({time.perf_counter() - started:.0f} s)")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{TABLE}', 'id'), (SELECT max(id) FROM {TABLE}))"
        )
    _place_holds(now=now)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {TABLE}")
        cursor.execute("VACUUM ANALYZE retention_legalhold")
    return time.perf_counter() - started


def _classes_values(versions: dict[str, int]) -> tuple[str, dict[str, Any]]:
    rows, params, lo = [], {}, 0.0
    for i, bench_class in enumerate(CLASSES):
        hi = 1.0 if i == len(CLASSES) - 1 else lo + bench_class.share
        rows.append(
            f"(%(c{i}_name)s::varchar, %(c{i}_lo)s::float8, %(c{i}_hi)s::float8, "
            f"%(c{i}_period)s::interval, %(c{i}_version)s::bigint, %(c{i}_enforced)s::boolean)"
        )
        params.update(
            {
                f"c{i}_name": bench_class.name,
                f"c{i}_lo": lo,
                f"c{i}_hi": hi,
                f"c{i}_period": bench_class.period,
                f"c{i}_version": versions[bench_class.name],
                f"c{i}_enforced": bench_class.enforced,
            }
        )
        lo = hi
    return ", ".join(rows), params


def _place_holds(*, now: datetime) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from retention import services
    from retention.models import RetentionRecord

    by = get_user_model().objects.get(username="bench-approver")
    services.legal_hold_place(
        reason="bench: litigation", placed_by=by, now=now, tenant_id=HELD_TENANT
    )
    tenant, data_class = HELD_TENANT_IN_CLASS
    services.legal_hold_place(
        reason="bench: audit", placed_by=by, now=now, tenant_id=tenant, data_class=data_class
    )
    released = services.legal_hold_place(
        reason="bench: settled", placed_by=by, now=now, tenant_id=RELEASED_HOLD_TENANT
    )
    services.legal_hold_release(hold=released, released_by=by, reason="bench: settled", now=now)
    # One held record in each of a claim's first pages, so the hold check
    # inside the claimed range has something to find.
    for bench_class in CLASSES:
        if not bench_class.enforced:
            continue
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                SELECT id FROM (
                    SELECT id, row_number() OVER (ORDER BY expires_at, id) AS n
                    FROM {TABLE}
                    WHERE data_class = %s AND state = 'active' AND expires_at <= %s
                ) ranked
                WHERE n %% 1000 = 500 ORDER BY n LIMIT %s
                """,
                [bench_class.name, now, RECORD_HOLDS_PER_CLASS],
            )
            ids = [row[0] for row in cursor.fetchall()]
        for record in RetentionRecord.objects.filter(pk__in=ids):
            services.legal_hold_place(
                reason="bench: one record", placed_by=by, now=now, record=record
            )


def describe(*, now: datetime) -> list[str]:
    """One line per class: rows, expired, deleted, failed, held, claimable."""
    from django.db.models import Count, Q

    from retention.models import RecordState, RetentionRecord

    expired = Q(expires_at__lte=now)
    per_class = RetentionRecord.objects.values("data_class").annotate(
        rows=Count("id"),
        expired=Count("id", filter=expired),
        deleted=Count("id", filter=Q(state=RecordState.DELETED)),
        failed=Count("id", filter=Q(state=RecordState.FAILED)),
    )
    held = dict(
        RetentionRecord.objects.held()
        .filter(expired)
        .exclude(state=RecordState.DELETED)
        .values_list("data_class")
        .annotate(n=Count("id"))
    )
    claimable = dict(
        RetentionRecord.objects.claimable(cutoff=now, now=now)
        .not_held()
        .values_list("data_class")
        .annotate(n=Count("id"))
    )
    enforced = {c.name: c.enforced for c in CLASSES}
    lines = []
    for row in sorted(per_class, key=lambda r: -r["rows"]):
        name = row["data_class"]
        mode = "enforced" if enforced.get(name) else "report-only"
        lines.append(
            f"  {name:<19} {row['rows']:>9,} rows, {row['expired']:>9,} expired, "
            f"{row['deleted']:>9,} deleted, {row['failed']:>6,} failed, "
            f"{held.get(name, 0):>6,} expired+held, {claimable.get(name, 0):>9,} claimable "
            f"({mode})"
        )
    return lines
