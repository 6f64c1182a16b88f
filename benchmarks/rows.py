"""How fast does an enforcing run dispose of model rows, next to a bare delete loop? (issue 14)

On a fresh PostgreSQL database, with the tests' host models
(``tests.rowhost``: ``RequestLog``, a log with an indexed ``created_at``, and
``Account``, personal fields and an indexed ``closed_at``) registered as data
classes, a policy of batch size 1,000 and no rate limit:

1. Deleting, each variant on a fresh seed of the same table (truncated, the
   same ``--rows`` rows past a 30-day period and 5 % younger ones that must
   stay, written by SQL in ``created_at`` order, VACUUM ANALYZE, CHECKPOINT),
   back to back in this process:

   (a) the limit: a bare loop of keyset-selected pages of 1,000 ids, each
       ``DELETE ... WHERE id = ANY(%s)`` in its own transaction;
   (b) an enforcing run (``run_start`` + ``run_execute``) with
       ``evidence="per_batch"``: one event per tenant of a page;
   (c) the same with ``evidence="per_row"``: one event per row (a page event
       per tenant carrying its rows, and each row's key in ``RowEventKey``).

   Targets: (b) at least 0.7 and (c) at least 0.4 of (a)'s rows/s.
2. Redacting: an enforcing run over ``--redactions`` closed accounts
   (``name`` a constant, ``email`` a digest, ``phone`` masked), their
   ``closed_at`` in no relation to the heap order, with 5 % open accounts
   that must stay untouched. Its rows/s is printed; no target.
3. Claiming a page at scale (``--scale-sizes``; target: the last size's
   median at most 1.5 times the first's): the engine's page select
   (``select_page``: keyset on ``(time, pk)``, ``FOR UPDATE SKIP LOCKED``)
   timed over successive pages, each disposed of outside the timer, with
   the ``EXPLAIN (ANALYZE, BUFFERS)`` of one more (rolled back).

   Deleting: a log of that many due rows, the run half-way through it (the
   first half deleted and not vacuumed, as within a run); the plan of the
   next page. A scan that does not start at the cursor is noted, not
   failed: the dead entries it walks show in its buffers and the ratio.
   Redacting: that many already-redacted accounts behind the class's mark
   (``RowMark``) and ``--backlog`` due ones after it; the plan of the first
   page, with exactly that many redacted rows behind the mark. It must be
   an index scan on the ``closed_at`` index starting at the mark (a lower
   bound in its index condition) visiting at most two pages' worth of
   rows, never the redacted ones.

Peak RSS of this process is measured around each enforcing run (its
high-water mark reset before it through ``/proc/self/clear_refs``), target
under 300 MB. Every run is checked: the rows left in the table, the run's
counts and events, the redacted values, and the hash chain at the end. Exit
status 1 when a target is missed, 2 when a check fails; everything is
printed first.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe_bench python benchmarks/rows.py
    ... benchmarks/rows.py --rows 20000 --redactions 5000 --scale-sizes 10000 50000  # a quick look
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import common  # noqa: E402

# Not setdefault: without these settings the host models' tables do not exist.
SETTINGS = "benchmarks.settings_rows"
os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
common.setup_django(SETTINGS)

from django.db import DatabaseError, connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from retention import api, redaction  # noqa: E402
from retention.engine import run_execute, run_finish, run_start  # noqa: E402
from retention.engine.rows.redact import row_mark  # noqa: E402
from retention.engine.rows.select import RowCursor, page_timeouts, rows_due, select_page  # noqa: E402
from retention.models import (  # noqa: E402
    DeletionEvent,
    EventOutcome,
    RowEventKey,
    RowMark,
    Run,
    RunStatus,
)
from retention.rows.checks import check_row_classes  # noqa: E402
from retention.rows.registry import RowClass  # noqa: E402
from retention.selectors.run_rules import run_rules  # noqa: E402
from tests.rowhost.models import Account, RequestLog  # noqa: E402

BATCH_SIZE = 1000
TARGET_PER_BATCH = 0.7
TARGET_PER_ROW = 0.4
TARGET_SCALE = 1.5
TARGET_RSS_BYTES = 300 * 1000 * 1000
TENANTS = 40
LOG_PERIOD = timedelta(days=30)
ACCOUNT_PERIOD = timedelta(days=90)
# Rows that are not due, 1 in 20 of what is: a run that deletes or redacts them fails.
YOUNG_SHARE = 20

LOGS_PER_BATCH = "bench.logs-per-batch"
LOGS_PER_ROW = "bench.logs-per-row"
ACCOUNTS = "bench.accounts"
REDACTED_NAME = "[redacted]"


@dataclass
class Result:
    label: str
    rows: int
    seconds: float
    seeded_in: float
    peak_rss: int | None = None
    details: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


@dataclass
class ScaleStage:
    kind: str
    rows: int
    timings: list[float]
    plan: str
    problems: list[str]
    notes: list[str]
    table: str

    @property
    def median(self) -> float:
        return statistics.median(self.timings)

    @property
    def walked(self) -> str:
        return f"{scan_walk(self.plan, self.table)[0]:,} rows visited"


# --------------------------------------------------------------------------
# Memory


def peak_rss_reset() -> bool:
    """Reset this process's RSS high-water mark (Linux: clear_refs 5); False if not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    """The RSS high-water mark since the last reset (else since the process started)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def rss_watch(result: Result) -> Iterator[None]:
    reset = peak_rss_reset()
    yield
    result.peak_rss = peak_rss_bytes()
    if not reset:
        result.details.append("peak RSS since the process started (no clear_refs)")


# --------------------------------------------------------------------------
# Seeding (SQL)


def sql(statement: str, params: list[Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def scalar(statement: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()[0]


def vacuum_and_checkpoint() -> None:
    """Start every timed part from vacuumed tables and flushed seed writes."""
    for model in (RequestLog, Account):
        sql(f"VACUUM ANALYZE {model._meta.db_table}")
    for table in ("retention_deletionevent", "retention_eventbatch", "retention_rowmark"):
        sql(f"VACUUM ANALYZE {table}")
    try:
        sql("CHECKPOINT")
    except DatabaseError as exc:
        print(f"(no CHECKPOINT: {exc}; figures may include the seed's flush)")


def young_count(due: int) -> int:
    return max(due // YOUNG_SHARE, 100)


def seed_logs(due: int, *, now: datetime) -> tuple[int, float]:
    """A fresh log: ``due`` rows 60 to 400 days old, then the young ones (last 7 days).

    Rows are written in ``created_at`` order, as a log is appended; returns
    (young rows, seconds).
    """
    table = RequestLog._meta.db_table
    young = young_count(due)
    started = time.perf_counter()
    sql(f"TRUNCATE {table} RESTART IDENTITY")
    statement = (
        f"INSERT INTO {table} (tenant_id, path, status, payload, created_at) "
        "SELECT 't' || lpad((i %% %s)::text, 2, '0'), "
        "'/api/v1/items/' || (i %% 5000) || '/events', "
        "CASE WHEN i %% 50 = 0 THEN 500 WHEN i %% 10 = 0 THEN 404 ELSE 200 END, "
        "jsonb_build_object('method', 'GET', 'ms', i %% 700, 'agent', 'bench/1.0'), "
        "%s::timestamptz + (i - 1) * %s * interval '1 microsecond' "
        "FROM generate_series(1, %s) AS i"
    )
    for start, span, count in (
        (now - timedelta(days=400), timedelta(days=340), due),
        (now - timedelta(days=7), timedelta(days=7), young),
    ):
        step = span / timedelta(microseconds=1) / count
        sql(statement, [TENANTS, start, step, count])
    return young, time.perf_counter() - started


def _stride(count: int) -> int:
    """A prime that does not divide ``count``: i * stride mod count permutes the rows."""
    return next(p for p in (7919, 7927, 7933, 7937) if count % p)


def seed_accounts(due: int, *, redacted: int, now: datetime) -> tuple[int, float]:
    """Fresh accounts: ``due`` closed 100 to 2,000 days ago, then open ones.

    ``closed_at`` is a permutation of the due rows (accounts close in no
    relation to when they were created); the ``redacted`` earliest-closed
    rows already hold redacted values, as a past run left them. Returns
    (open accounts, seconds).
    """
    table = Account._meta.db_table
    young = young_count(due)
    started = time.perf_counter()
    sql(f"TRUNCATE {table} RESTART IDENTITY CASCADE")
    start = now - timedelta(days=2000)
    step = timedelta(days=1900) / timedelta(microseconds=1) / due
    sql(
        f"INSERT INTO {table} (tenant_id, name, email, phone, profile, avatar, closed_at) "
        "SELECT 't' || lpad((i %% %s)::text, 2, '0'), "
        "CASE WHEN r < %s THEN %s ELSE 'Person ' || i END, "
        "CASE WHEN r < %s THEN md5('a:' || i) || md5('b:' || i) "
        "ELSE 'person' || i || '@example.test' END, "
        "CASE WHEN r < %s THEN '**********' || lpad((i %% 100)::text, 2, '0') "
        "ELSE '+4420' || lpad((i %% 100000000)::text, 8, '0') END, "
        "'{}'::jsonb, '', %s::timestamptz + r * %s * interval '1 microsecond' "
        "FROM (SELECT i, (i::bigint * %s) %% %s AS r FROM generate_series(1, %s) AS i) AS s",
        [TENANTS, redacted, REDACTED_NAME, redacted, redacted, start, step, _stride(due), due, due],
    )
    sql(
        f"INSERT INTO {table} (tenant_id, name, email, phone, profile, avatar, closed_at) "
        "SELECT 't' || lpad((i %% %s)::text, 2, '0'), 'Person ' || i, "
        "'person' || i || '@example.test', '+4420' || lpad((i %% 100000000)::text, 8, '0'), "
        "'{}'::jsonb, '', NULL FROM generate_series(%s, %s) AS i",
        [TENANTS, due + 1, due + young],
    )
    if redacted:
        # Everything up to the last redacted row is settled, as the run that
        # redacted them left the mark.
        at, pk = (
            Account.objects.filter(closed_at__isnull=False)
            .order_by("closed_at", "pk")
            .values_list("closed_at", "pk")[redacted - 1]
        )
        RowMark.objects.update_or_create(
            data_class=ACCOUNTS,
            defaults={"through_time": at, "through_pk": str(pk), "updated_at": now},
        )
    else:
        RowMark.objects.filter(data_class=ACCOUNTS).delete()
    return young, time.perf_counter() - started


# --------------------------------------------------------------------------
# Registrations and policies


def register(*, now: datetime) -> dict[str, RowClass]:
    # The same log table twice, one class per evidence granularity.
    rows = {
        data_class: api.register_model(
            RequestLog,
            data_class=data_class,
            age_field="created_at",
            tenant_field="tenant_id",
            evidence=evidence,
        )
        for data_class, evidence in ((LOGS_PER_BATCH, "per_batch"), (LOGS_PER_ROW, "per_row"))
    }
    rows |= {
        ACCOUNTS: api.register_model(
            Account,
            data_class=ACCOUNTS,
            age_field="closed_at",
            tenant_field="tenant_id",
            redact={
                "name": redaction.Constant(REDACTED_NAME),
                "email": redaction.Digest(),
                "phone": redaction.Mask(keep_last=2),
            },
        ),
    }
    problems = check_row_classes()
    if problems:
        raise SystemExit(
            "the registrations fail the system checks:\n" + "\n".join(map(str, problems))
        )
    for name in (LOGS_PER_BATCH, LOGS_PER_ROW):
        common.enforced_policy(name, now=now, retention_period=LOG_PERIOD, batch_size=BATCH_SIZE)
    common.enforced_policy(
        ACCOUNTS,
        now=now,
        retention_period=ACCOUNT_PERIOD,
        batch_size=BATCH_SIZE,
        disposition="redact",
    )
    return rows


# --------------------------------------------------------------------------
# Deleting: the bare loop and the enforcing runs


def bare_loop(rows: int, *, now: datetime) -> Result:
    young, seeded = seed_logs(rows, now=now)
    vacuum_and_checkpoint()
    table = RequestLog._meta.db_table
    cutoff = now - LOG_PERIOD
    first = (
        f"SELECT id, created_at FROM {table} WHERE created_at <= %s "
        "ORDER BY created_at, id LIMIT %s"
    )
    after = (
        f"SELECT id, created_at FROM {table} WHERE created_at <= %s "
        "AND (created_at, id) > (%s, %s) ORDER BY created_at, id LIMIT %s"
    )
    deleted = pages = 0
    cursor_at: tuple[datetime, int] | None = None
    result = Result("(a) bare loop: keyset page + DELETE ... WHERE id = ANY(%s)", rows, 0.0, seeded)
    with rss_watch(result):
        started = time.perf_counter()
        while True:
            with transaction.atomic(), connection.cursor() as cursor:
                if cursor_at is None:
                    cursor.execute(first, [cutoff, BATCH_SIZE])
                else:
                    cursor.execute(after, [cutoff, *cursor_at, BATCH_SIZE])
                page = cursor.fetchall()
                if not page:
                    break
                cursor.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [[r[0] for r in page]])
                deleted += cursor.rowcount
            pages += 1
            cursor_at = (page[-1][1], page[-1][0])
        result.seconds = time.perf_counter() - started
    result.details.append(f"{pages:,} pages, one transaction each")
    if deleted != rows:
        result.problems.append(f"deleted {deleted:,} rows, not {rows:,}")
    check_logs_left(result, young)
    return result


def check_logs_left(result: Result, young: int) -> None:
    left = RequestLog.objects.count()
    result.details.append(f"{left:,} rows left")
    if left != young:
        result.problems.append(f"{left:,} rows left in the table, not the {young:,} young ones")
    elif RequestLog.objects.filter(created_at__lte=timezone.now() - LOG_PERIOD).exists():
        result.problems.append("rows past the period are left")


def enforcing_run(data_class: str, rows: int, *, label: str, now: datetime) -> Result:
    young, seeded = seed_logs(rows, now=now)
    vacuum_and_checkpoint()
    result = Result(label, rows, 0.0, seeded)
    keys_before = RowEventKey.objects.count()
    run = timed_run(data_class, result, now=now)
    check_run(run, result, column="deleted")
    events = DeletionEvent.objects.filter(run_id=run.pk, outcome=EventOutcome.DELETED)
    check_row_events(result, events, rows, RowEventKey.objects.count() - keys_before)
    check_logs_left(result, young)
    return result


def check_row_events(result: Result, events: Any, rows: int, keys: int) -> None:
    """Page events cover every row once; per row, each row is an event with its key.

    (That each per-row page event's stored rows hash to it is checked by the
    chain's verification at the end.)
    """
    counted = sum(n or 0 for n in events.values_list("row_count", flat=True))
    per_row = events.filter(evidence="per_row").count()
    if per_row:
        result.details.append(
            f"{counted:,} row events in {per_row:,} page events, {keys:,} row keys"
        )
        if keys != rows:
            result.problems.append(f"{keys:,} row event keys recorded, not {rows:,}")
    else:
        result.details.append(f"{events.count():,} page events covering {counted:,} rows")
    if counted != rows:
        result.problems.append(f"the events cover {counted:,} rows, not {rows:,}")


def timed_run(data_class: str, result: Result, *, now: datetime) -> Run:
    """An enforcing run of one class (``run_start`` + ``run_execute``), timed, with its peak RSS."""
    with rss_watch(result):
        started = time.perf_counter()
        run = run_start(mode="enforce", data_classes=[data_class], now=now)
        begun = time.perf_counter()
        run = run_execute(run=run)
        result.seconds = time.perf_counter() - started
    result.details.append(f"run_start {begun - started:.2f} s")
    return run


def check_run(run: Run, result: Result, *, column: str) -> None:
    run.refresh_from_db()
    done = getattr(run, column)
    result.details.append(f"run {run.status}: eligible {run.eligible:,}, {column} {done:,}")
    if run.status != RunStatus.FINISHED:
        result.problems.append(f"run ended {run.status}: {run.status_reason}")
    if done != result.rows:
        result.problems.append(f"run {column} {done:,}, not {result.rows:,}")


# --------------------------------------------------------------------------
# Redacting


def redaction_run(rows: int, *, now: datetime) -> Result:
    young, seeded = seed_accounts(rows, redacted=0, now=now)
    vacuum_and_checkpoint()
    result = Result("(d) enforcing run, redact (name, email, phone), per_row", rows, 0.0, seeded)
    keys_before = RowEventKey.objects.count()
    run = timed_run(ACCOUNTS, result, now=now)
    check_run(run, result, column="redacted")
    events = DeletionEvent.objects.filter(run_id=run.pk, outcome=EventOutcome.REDACTED)
    check_row_events(result, events, rows, RowEventKey.objects.count() - keys_before)
    redacted = Account.objects.filter(name=REDACTED_NAME, closed_at__isnull=False)
    done = redacted.count()
    untouched = Account.objects.filter(closed_at__isnull=True, name__startswith="Person ").count()
    clear = redacted.filter(email__contains="@").count()
    result.details.append(f"{done:,} rows redacted, {untouched:,} open untouched")
    if done != rows:
        result.problems.append(f"{done:,} rows hold the redacted name, not {rows:,}")
    if clear:
        result.problems.append(f"{clear:,} redacted rows still hold an e-mail address")
    if untouched != young:
        result.problems.append(f"{untouched:,} open accounts untouched, not {young:,}")
    last = (
        Account.objects.filter(closed_at__isnull=False)
        .order_by("-closed_at", "-pk")
        .values("pk")[0]
    )
    mark = RowMark.objects.filter(data_class=ACCOUNTS).first()
    if mark is None or mark.through_pk != str(last["pk"]):
        result.problems.append(f"the mark is {mark}, not at the last closed account {last['pk']}")
    return result


# --------------------------------------------------------------------------
# Claiming at scale


def explain(statement: str) -> str:
    # EXPLAIN ANALYZE runs the SELECT ... FOR UPDATE: roll back its row locks.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {statement}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    return plan


def page_select_sql(due: Any, row: RowClass, cursor: RowCursor | None) -> str:
    """The SQL of the engine's next page select from ``cursor`` (run once, rolled back)."""
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        select_page(due, row, cursor, BATCH_SIZE)
        transaction.set_rollback(True)
    return next(q["sql"] for q in queries.captured_queries if "SKIP LOCKED" in q["sql"])


def index_on(model: Any, column: str) -> str:
    name = scalar(
        "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
        [model._meta.db_table, f"%({column})"],
    )
    if not name:
        raise SystemExit(f"no index on {model._meta.db_table}.{column}")
    return str(name)


@dataclass
class PlanNode:
    line: str
    details: list[str]

    def figure(self, pattern: str) -> int:
        found = [re.search(pattern, d) for d in self.details]
        return sum(int(m.group(1)) for m in found if m)


def plan_nodes(plan: str) -> list[PlanNode]:
    """The plan's nodes, each with the lines under it up to its first child."""
    lines = plan.splitlines()
    nodes = []
    for i, line in enumerate(lines):
        if i and "->" not in line:
            continue
        depth = len(line) - len(line.lstrip(" ->"))
        details = []
        for detail in lines[i + 1 :]:
            if "->" in detail or len(detail) - len(detail.lstrip()) < depth:
                break
            details.append(detail.strip())
        nodes.append(PlanNode(line.strip(" ->"), details))
    return nodes


def scan_walk(plan: str, table: str) -> tuple[int, list[str]]:
    """Rows the plan's scans of ``table`` visited (returned + removed by a
    filter), and the lines saying how it scanned."""
    visited = 0
    shown: list[str] = []
    for node in plan_nodes(plan):
        if not re.search(rf"(Scan|Scan using \S+) on {table}\b|Bitmap Index Scan", node.line):
            continue
        if re.search(rf" on {table}\b", node.line):
            match = re.search(r"actual time=\S+ rows=(\d+) loops=(\d+)", node.line)
            if match:
                visited += int(match.group(1)) * int(match.group(2))
            visited += node.figure(r"Rows Removed by (?:Filter|Index Recheck): (\d+)")
        shown.append(node.line.split("  (cost")[0])
        shown += [
            f"  {d}"
            for d in node.details
            if any(k in d for k in ("Cond:", "Filter", "Buffers:", "Heap Blocks"))
        ]
    return visited, shown


def plan_problems(
    plan: str, *, table: str, index: str, column: str, start: str, start_required: bool
) -> tuple[list[str], list[str]]:
    """Why the page select is not an index range scan from ``start`` (the cursor,
    the mark): the problems, and the notes (not starting there, when not required)."""
    problems: list[str] = []
    notes: list[str] = []
    if re.search(rf"Seq Scan on {table}\b", plan):
        problems.append(f"sequential scan of {table}")
    scans = [
        n
        for n in plan_nodes(plan)
        if f"using {index} on {table}" in n.line or f"Bitmap Index Scan on {index}" in n.line
    ]
    if not scans:
        problems.append(f"no scan of the index {index}")
    conditions = [d for n in scans for d in n.details if d.startswith("Index Cond:")]
    # Each scan of the index must begin at the cursor, not at the index's first entry.
    if scans and not all(re.search(rf"\({column} (>|>=|=) ", c) for c in conditions):
        (problems if start_required else notes).append(
            f"the index scan does not start at {start} (no lower bound on {column})"
        )
    visited, _ = scan_walk(plan, table)
    if visited > 2 * BATCH_SIZE:
        problems.append(f"its scans visit {visited:,} rows for a page of {BATCH_SIZE:,}")
    return problems, notes


def scale_delete(rows: int, *, repetitions: int, row: RowClass, now: datetime) -> ScaleStage:
    """A log of ``rows`` due rows, a run half-way through it: pages after the cursor."""
    print(f"\n-- deleting pages, {rows:,} due log rows, the run half-way through --")
    _, seeded = seed_logs(rows, now=now)
    table = RequestLog._meta.db_table
    half = rows // 2
    # Rows are in (created_at, id) order: the first half is what earlier pages
    # of the run deleted, dead and not yet vacuumed, as within a run.
    sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    vacuum_and_checkpoint()
    cursor: RowCursor = (RequestLog.objects.get(pk=half).created_at, half)
    sql(f"DELETE FROM {table} WHERE id <= %s", [half])
    sql("CHECKPOINT")
    print(f"seeded in {seeded:.1f} s; the first {half:,} rows deleted (not vacuumed)")
    # The timed pages, a warm-up and the plan's page come from the second
    # half: a small size times fewer.
    repetitions = min(repetitions, (rows - half) // BATCH_SIZE - 2)
    if repetitions < 3:
        raise SystemExit(f"{rows:,} rows: too few for 3 timed pages of {BATCH_SIZE:,}")
    run = run_start(mode="enforce", data_classes=[row.data_class], now=now)
    try:
        due = rows_due(row, run_rules(run)[row.data_class], run)
        timings: list[float] = []
        for i in range(repetitions + 1):
            with transaction.atomic():
                page_timeouts()
                started = time.perf_counter()
                page = select_page(due, row, cursor, BATCH_SIZE)
                elapsed = time.perf_counter() - started
                # The page's rows go, outside the timer, as the engine's page would.
                sql(f"DELETE FROM {table} WHERE id = ANY(%s)", [[r[0] for r in page]])
            if len(page) != BATCH_SIZE:
                raise SystemExit(f"a page took {len(page)} rows, not {BATCH_SIZE}")
            cursor = (page[-1][1], page[-1][0])
            if i:  # the first page warms up (and walks the dead rows' entries first)
                timings.append(elapsed)
        plan = explain(page_select_sql(due, row, cursor))
    finally:
        run_finish(run, RunStatus.FINISHED, "", now)
        sql(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
    index = index_on(RequestLog, "created_at")
    # Rows behind a delete's cursor are gone: walking their dead entries is
    # noted, not a missed target (the run's rate and the claim's ratio show it).
    problems, notes = plan_problems(
        plan,
        table=table,
        index=index,
        column="created_at",
        start="the run's cursor",
        start_required=False,
    )
    deleted_before = half + (repetitions + 1) * BATCH_SIZE
    label = f"the next page, {deleted_before:,} rows deleted before it"
    stage = ScaleStage("deleting", rows, timings, plan, problems, notes, table)
    return report_stage(stage, label)


def scale_redact(
    rows: int, *, backlog: int, repetitions: int, row: RowClass, now: datetime
) -> ScaleStage:
    """``rows`` redacted accounts behind the mark, ``backlog`` due ones after it."""
    print(
        f"\n-- redacting pages, {rows:,} redacted rows behind the mark, {backlog:,} due after it --"
    )
    _, seeded = seed_accounts(rows + backlog, redacted=rows, now=now)
    vacuum_and_checkpoint()
    print(f"seeded in {seeded:.1f} s")
    table = Account._meta.db_table
    repetitions = min(repetitions, backlog // BATCH_SIZE - 1)
    if repetitions < 3:
        raise SystemExit(f"a backlog of {backlog:,} is too small for 3 timed pages")
    run = run_start(mode="enforce", data_classes=[row.data_class], now=now)
    try:
        due = rows_due(row, run_rules(run)[row.data_class], run)
        # The plan first: exactly ``rows`` redacted rows behind the mark.
        plan = explain(page_select_sql(due, row, row_mark(row)))
        timings: list[float] = []
        for i in range(repetitions + 1):
            with transaction.atomic():
                page_timeouts()
                mark = row_mark(row)
                started = time.perf_counter()
                page = select_page(due, row, mark, BATCH_SIZE)
                elapsed = time.perf_counter() - started
                if len(page) != BATCH_SIZE:
                    raise SystemExit(f"a page took {len(page)} rows, not {BATCH_SIZE}")
                # Settled, outside the timer: the mark moves past the page.
                RowMark.objects.filter(data_class=row.data_class).update(
                    through_time=page[-1][1], through_pk=str(page[-1][0])
                )
            if i:
                timings.append(elapsed)
    finally:
        run_finish(run, RunStatus.FINISHED, "", now)
    index = index_on(Account, "closed_at")
    problems, notes = plan_problems(
        plan, table=table, index=index, column="closed_at", start="the mark", start_required=True
    )
    label = f"the first page, {rows:,} redacted rows behind the mark"
    stage = ScaleStage("redacting", rows, timings, plan, problems, notes, table)
    return report_stage(stage, label)


def report_stage(stage: ScaleStage, label: str) -> ScaleStage:
    timings, table = stage.timings, stage.table
    visited, shown = scan_walk(stage.plan, table)
    print(
        f"page select ({stage.kind}): median {stage.median * 1000:.2f} ms (min "
        f"{min(timings) * 1000:.2f}, max {max(timings) * 1000:.2f}) over {len(timings)} "
        f"successive pages; the plan's scans of {table} visit {visited:,} rows:"
    )
    for line in shown:
        print(f"    {line}")
    print(f"EXPLAIN (ANALYZE, BUFFERS) of the page select ({label}; rolled back):")
    print("\n".join(f"    {line}" for line in stage.plan.splitlines()))
    for problem in stage.problems:
        print(f"    PLAN: {problem}")
    for note in stage.notes:
        print(f"    plan note: {note}")
    sys.stdout.flush()
    return stage


# --------------------------------------------------------------------------


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="due log rows per variant")
    parser.add_argument("--redactions", type=int, default=100_000, help="accounts to redact")
    parser.add_argument(
        "--scale-sizes",
        type=int,
        nargs="+",
        default=[100_000, 1_000_000],
        help="rows of the page-claim stages; the last is compared with the first",
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=20_000,
        help="due rows after the mark in the redacting claim stages (the same at every size)",
    )
    parser.add_argument("--repetitions", type=int, default=15, help="timed pages per size")
    parser.add_argument("--skip-scale", action="store_true", help="leave out the claim stages")
    args = parser.parse_args()
    if common.not_postgresql():
        return 2
    if args.rows < BATCH_SIZE or args.redactions < BATCH_SIZE:
        parser.error(f"--rows and --redactions need at least {BATCH_SIZE} rows")

    now = timezone.now().replace(microsecond=0)
    load_before = common.load_average()
    failures: list[str] = []
    with common.fresh_database() as name:
        print(
            f"database: {name} (fresh; dropped at the end); batch size {BATCH_SIZE}; "
            f"no rate limit; {args.rows:,} due log rows per variant (+{young_count(args.rows):,} "
            f"young), {args.redactions:,} accounts to redact; seeding not timed"
        )
        for line in common.machine_description():
            print(line)
        print(f"PostgreSQL shared_buffers: {scalar('SHOW shared_buffers')}")
        print(
            f"peak RSS before the runs (Django, the new database): {peak_rss_bytes() / 1e6:.1f} MB"
        )
        sys.stdout.flush()
        registered = register(now=now)
        results: dict[str, Result] = {}

        def report(key: str, result: Result) -> None:
            results[key] = result
            rss = f"; peak RSS {result.peak_rss / 1e6:.1f} MB" if result.peak_rss else ""
            common.print_result(
                f"{result.label}: {result.rate:,.0f} rows/s  ({result.rows:,} in "
                f"{result.seconds:.2f} s; seeded in {result.seeded_in:.1f} s{rss}; ",
                result.details,
                result.problems,
            )

        print("\n== Deleting ==")
        report("bare", bare_loop(args.rows, now=now))
        report(
            "per_batch",
            enforcing_run(
                LOGS_PER_BATCH,
                args.rows,
                label="(b) enforcing run, evidence per_batch",
                now=now,
            ),
        )
        report(
            "per_row",
            enforcing_run(
                LOGS_PER_ROW, args.rows, label="(c) enforcing run, evidence per_row", now=now
            ),
        )
        print("\n== Redacting ==")
        report("redact", redaction_run(args.redactions, now=now))

        stages: dict[str, list[ScaleStage]] = {"deleting": [], "redacting": []}
        if not args.skip_scale:
            print("\n== Claiming a page at scale ==")
            for size in args.scale_sizes:
                stages["deleting"].append(
                    scale_delete(
                        size,
                        repetitions=args.repetitions,
                        row=registered[LOGS_PER_BATCH],
                        now=now,
                    )
                )
            for size in args.scale_sizes:
                stages["redacting"].append(
                    scale_redact(
                        size,
                        backlog=args.backlog,
                        repetitions=args.repetitions,
                        row=registered[ACCOUNTS],
                        now=now,
                    )
                )

        started = time.perf_counter()
        chain = chain_result()
        print(f"\nhash chain: {chain} ({time.perf_counter() - started:.1f} s)")
        chain_ok = chain.startswith("ok")

    print("\n== Summary ==")
    bare = results["bare"].rate
    for key, target in (("per_batch", TARGET_PER_BATCH), ("per_row", TARGET_PER_ROW)):
        ratio = results[key].rate / bare if bare else 0.0
        met = ratio >= target
        print(
            f"{key}: {results[key].rate:,.0f} rows/s = {ratio:.2f} of the bare loop's "
            f"{bare:,.0f} rows/s (target at least {target}): {verdict(met)}"
        )
        if not met:
            failures.append(f"{key} at {ratio:.2f} of the bare loop, below {target}")
    print(f"redactions: {results['redact'].rate:,.0f} rows/s ({results['redact'].rows:,} rows)")
    for kind, measured in stages.items():
        if not measured:
            continue
        for stage in measured:
            plan = "; ".join(stage.problems) if stage.problems else f"index scan, {stage.walked}"
            if stage.notes:
                plan += f" (note: {'; '.join(stage.notes)})"
            print(
                f"claim ({kind}) at {stage.rows:>10,} rows: median {stage.median * 1000:.2f} ms; "
                f"plan: {plan}"
            )
            failures += [f"{kind} plan at {stage.rows:,} rows: {p}" for p in stage.problems]
        if len(measured) > 1:
            first, last = measured[0], measured[-1]
            ratio = last.median / first.median if first.median else 0.0
            met = ratio <= TARGET_SCALE
            print(
                f"claim ({kind}) {last.rows:,} / {first.rows:,} rows: {ratio:.2f} "
                f"(target at most {TARGET_SCALE}): {verdict(met)}"
            )
            if not met:
                failures.append(f"{kind} claim ratio {ratio:.2f} above {TARGET_SCALE}")
    enforcing = [results[k] for k in ("per_batch", "per_row", "redact")]
    peak = max(r.peak_rss or 0 for r in enforcing)
    met = peak < TARGET_RSS_BYTES
    print(
        f"peak RSS during the enforcing runs: {peak / 1e6:.1f} MB "
        f"({', '.join(f'{r.peak_rss / 1e6:.1f}' for r in enforcing if r.peak_rss)} MB; "
        f"target under {TARGET_RSS_BYTES / 1e6:.0f} MB): {verdict(met)}"
    )
    if not met:
        failures.append(f"peak RSS {peak / 1e6:.1f} MB")
    print(f"load average before: {load_before}; after: {common.load_average()}")
    checks_failed = not chain_ok or any(r.problems for r in results.values())
    for failure in failures:
        print(f"target missed: {failure}", file=sys.stderr)
    if checks_failed:
        print("a check failed (CHECK FAILED above, or the hash chain)", file=sys.stderr)
        return 2
    return 1 if failures else 0


def chain_result() -> str:
    from retention.selectors.evidence import VerifyResult, chain_verify

    verdicts = [item for item in chain_verify() if isinstance(item, VerifyResult)]
    chain = verdicts[-1] if verdicts else None
    if chain is None:
        return "BROKEN (nothing to verify)"
    state = "ok" if chain.ok else f"BROKEN: {chain.broken}"
    return f"{state}, {chain.batches:,} batches, {chain.events:,} events"


if __name__ == "__main__":
    sys.exit(main())
