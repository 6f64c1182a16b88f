"""How many SQL statements does an inline run send per 1,000 deleted objects? (SPEC §5)

Per-row statements are what make a sweep slow long before the database is
busy: each is a round trip. This script seeds N expired records of one
enforced data class (batch size 1000) on a fresh PostgreSQL database, runs
``run_retention`` inline (the command, full audit trail) under Django's
``CaptureQueriesContext`` and prints the statements per 1,000 deleted objects
(target: at most 20, i.e. batched), the run's fixed costs (start, measure,
end) apart from the per-page cost, and a breakdown by statement kind (first
word and table) to show which ones to batch. Transaction control (BEGIN,
COMMIT, SAVEPOINT, RELEASE) counts: each is a round trip too.

The objects live behind a no-op storage adapter (``common.NullAdapter``):
the statements the engine sends do not depend on the store, and without a
network the run takes seconds. Exit status 1 when the target is missed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe_bench python benchmarks/queries.py
    ... benchmarks/queries.py --records 3000 --show-page   # and the SQL of one page
"""

from __future__ import annotations

import argparse
import collections
import importlib
import io
import json
import re
import statistics
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import common  # noqa: E402

common.setup_django()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

DATA_CLASS = "bench.queries"
BATCH_SIZE = 1000
TARGET = 20
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
# Functions of the engine whose calls mark where one phase ends and the next
# begins, by the module whose globals the caller looks them up in (a missing
# one merges phases).
MARKERS = (
    ("retention.engine.inline", "run_measure", "measure"),
    ("retention.engine.claims", "records_claim", "page"),
    ("retention.engine.inline", "run_finish", "end"),
)

_PARENTHESIZED = re.compile(r"\([^()]*\)")
_TIMES = re.compile(r"^\d+ times: ")
_MAIN_OF_WITH = re.compile(r"\bAS\s+(SELECT|INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


def statement_kind(sql: str) -> str:
    """``UPDATE retention_run``, ``SELECT retention_retentionrecord FOR UPDATE``..."""
    text = _TIMES.sub("", sql.strip())
    words = text.split(None, 2)
    first = words[0].upper() if words else "?"
    if first in ("SAVEPOINT", "RELEASE", "ROLLBACK", "BEGIN", "COMMIT"):
        return "ROLLBACK TO SAVEPOINT" if text.upper().startswith("ROLLBACK TO") else first
    # Subqueries and function arguments out of the way: the FROM, INTO or
    # UPDATE left is the statement's own table.
    flat = text
    while True:
        shorter = _PARENTHESIZED.sub(" ", flat)
        if shorter == flat:
            break
        flat = shorter
    prefix = ""
    if first == "WITH":
        # WITH picked AS (...) UPDATE ...: named after its main statement.
        main = _MAIN_OF_WITH.search(flat)
        if main:
            prefix, first, flat = "WITH+", main.group(1).upper(), flat[main.start(1) :]
    pattern = {
        "SELECT": r"\bFROM\s+\"?(\w+)",
        "INSERT": r"\bINTO\s+\"?(\w+)",
        "UPDATE": r"^UPDATE\s+\"?(\w+)",
        "DELETE": r"\bFROM\s+\"?(\w+)",
        "COPY": r"^COPY\s+\"?(\w+)",
    }.get(first)
    match = re.search(pattern, flat, re.IGNORECASE) if pattern else None
    kind = f"{prefix}{first} {match.group(1)}" if match else f"{prefix}{first}"
    if "SKIP LOCKED" in text:
        kind += " FOR UPDATE SKIP LOCKED"
    elif "FOR UPDATE" in text:
        kind += " FOR UPDATE"
    return kind


class PhaseMarks:
    """Notes how many statements were captured when each marker was called."""

    def __init__(self, capture: CaptureQueriesContext) -> None:
        self.capture = capture
        self.marks: list[tuple[int, str]] = []
        self.missing: list[str] = []
        self._originals: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        for module_name, name, label in MARKERS:
            module = importlib.import_module(module_name)
            original = getattr(module, name, None)
            if original is None:
                self.missing.append(f"{module_name}.{name}")
                continue
            setattr(module, name, self._wrap(original, label))
            self._originals.append((module, name, original))

    def uninstall(self) -> None:
        for module, name, original in self._originals:
            setattr(module, name, original)

    def _wrap(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        def marked(*args: Any, **kwargs: Any) -> Any:
            index = len(self.marks)
            self.marks.append((len(self.capture), label))
            result = function(*args, **kwargs)
            if label == "page" and not len(getattr(result, "items", ())):
                # The claim that finds nothing ends the sweep: not a page.
                self.marks[index] = (self.marks[index][0], "end")
            return result

        return marked

    def segments(self, total: int) -> list[tuple[str, int, int]]:
        """(phase, first statement, end) in order; consecutive "end" marks merge."""
        bounds = [(0, "start"), *self.marks]
        result: list[tuple[str, int, int]] = []
        for (begin, label), (end, _) in zip(bounds, [*bounds[1:], (total, "")], strict=True):
            if result and label == "end" and result[-1][0] == "end":
                result[-1] = ("end", result[-1][1], end)
            else:
                result.append((label, begin, end))
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000, help="expired records to delete")
    parser.add_argument(
        "--show-page", action="store_true", help="print the statements of one full page"
    )
    args = parser.parse_args()

    if common.not_postgresql():
        return 2
    settings.RETENTION_STORAGE_ADAPTERS = {"default": "benchmarks.common.NullAdapter"}
    now = datetime.now(UTC)
    with common.fresh_database() as db_name:
        from retention.models import Run

        version = common.enforced_policy(DATA_CLASS, now=now, batch_size=BATCH_SIZE)
        keys = [f"queries/t{i % 50:02d}/{i:07d}.bin" for i in range(args.records)]
        common.seed_records(version, keys, now=now)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE retention_retentionrecord")
        # The default log keeps the last 9,000 statements: a per-row engine
        # sends more than that, and the count must not saturate.
        connection.queries_log = collections.deque(maxlen=10_000_000)
        out = io.StringIO()
        with CaptureQueriesContext(connection) as capture:
            marks = PhaseMarks(capture)
            marks.install()
            try:
                call_command(
                    "run_retention",
                    "--data-class",
                    DATA_CLASS,
                    "--json",
                    stdout=out,
                    stderr=io.StringIO(),
                )
            finally:
                marks.uninstall()
        statements = [query["sql"] for query in capture.captured_queries]
        run = Run.objects.get(pk=json.loads(out.getvalue())["run_id"])

        print(
            f"database: {connection.vendor} ({db_name}); store: no-op adapter "
            f"(benchmarks.common.NullAdapter; the statements do not depend on the store); "
            f"{args.records:,} expired records; batch size {BATCH_SIZE}; "
            f"path: run_retention --data-class {DATA_CLASS} --json (inline)"
        )
        for line in common.machine_description():
            print(line)

    deleted = run.deleted
    print(f"run {run.status}: deleted {deleted:,}, failed {run.failed:,}")
    if deleted != args.records:
        print(f"CHECK FAILED: the run deleted {deleted:,}, not {args.records:,}")
        return 2
    per_thousand = len(statements) / deleted * 1000
    control = sum(1 for s in statements if statement_kind(s) in TRANSACTION_CONTROL)
    ok = per_thousand <= TARGET
    print(
        f"statements: {len(statements):,} in all = {per_thousand:.1f} per 1,000 deleted "
        f"objects (target at most {TARGET}): {'yes' if ok else 'NO'}"
    )
    print(
        f"  of which transaction control (BEGIN, COMMIT, SAVEPOINT, RELEASE): {control:,}; "
        f"without them {(len(statements) - control) / deleted * 1000:.1f} per 1,000"
    )

    segments = marks.segments(len(statements))
    pages = [(begin, end) for label, begin, end in segments if label == "page"]
    fixed = collections.Counter[str]()
    for label, begin, end in segments:
        if label != "page":
            fixed[label] += end - begin
    print(
        "  fixed costs of the run: "
        + ", ".join(f"{label} {fixed[label]}" for label in ("start", "measure", "end"))
        + f" (= {sum(fixed.values())}; start: the command and run_start; measure: counts and "
        "held skips; end: the empty claim, retry check, run_finish)"
    )
    if marks.missing:
        print(f"  (not found, phases merged: {marks.missing})")
    if pages:
        sizes = [end - begin for begin, end in pages]
        print(
            f"  per page of up to {BATCH_SIZE:,}: median {statistics.median(sizes):g} "
            f"(min {min(sizes)}, max {max(sizes)}) over {len(pages)} pages; a page runs from "
            "one claim to the next (heartbeat, claim, re-check, delete, finalize, progress)"
        )

    page_statements = [s for begin, end in pages for s in statements[begin:end]]
    by_kind = collections.Counter(statement_kind(s) for s in statements)
    in_pages = collections.Counter(statement_kind(s) for s in page_statements)
    print("by kind (all statements of the run; per page = within pages / pages):")
    print(f"  {'total':>7} {'per page':>9}  kind")
    for kind, count in by_kind.most_common():
        per_page = in_pages[kind] / len(pages) if pages else 0.0
        print(f"  {count:>7,} {per_page:>9.1f}  {kind}")

    if args.show_page and pages:
        begin, end = pages[1] if len(pages) > 2 else pages[0]
        print(f"the statements of one page ({end - begin}):")
        for sql in statements[begin:end]:
            flat = " ".join(sql.split())
            print(f"  {flat[:220]}{'...' if len(flat) > 220 else ''}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
