"""Does an enforce run scale out when the store is a network away? (SPEC §5 "Scale-out", issue 31)

Production's S3 answers a 1,000-key DeleteObjects in tens to hundreds of
milliseconds; moto on this machine answers at once, on the same two cores as
everything else. This script puts a proxy in front of moto that holds every
request ``--delay-ms`` (``latency_proxy.py``, concurrent requests wait
concurrently, connections kept alive) and measures, in one run, each figure
on its own fresh seed (objects put straight into moto, records inserted;
neither timed):

(a) a bare boto3 ``delete_objects`` loop through the proxy, 1,000 keys a
    request, sequential; (a4) the same from 4 threads;
(b) ``run_retention`` inline in this process, its S3 endpoint the proxy;
(c) ``run_retention --enqueue`` worked by a real ``qcluster`` of 1, 2, 4
    and 8 workers (``--workers``), each cluster warm (it first works
    through a small queued run, then every worker builds its S3 client and
    connects, ``processes.workers_warm``; not timed), timed by the run's
    ledger span;
(gate) 4 workers again under a policy ``rate_limit`` (``--gate-rate``):
    the rate of the DeleteObjects requests the proxy saw must be within
    10 % of it.

Each figure prints its rate, its ratio (b / a, N workers / 1 worker), the
CPU-seconds per 1,000 objects of the workers (the qcluster process tree),
this process, PostgreSQL (``processes.py`` says how), moto and the proxy,
the machine's CPU busy share, and the database's backends by wait event;
a run's figure also says when its pages were finalized (the run's start
before the first, its tail after the last) and the rate between the first
and the last page, reported beside the ratio by the ledger.
After every run it checks the bucket is empty of the figure's objects, the
run counted each object deleted with its event, and the hash chain verifies
over the run's batches (all of it at the end), and says so.

Targets (at 150 ms; at other delays the same figures are reported): (b) at
least 0.8 of (a); 4 workers at least 3 times one worker; the gate within
10 % at any delay. Exit status 1 when a target is missed, 2 when a check
fails; everything is printed first.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe_bench python benchmarks/scale_out.py
    ... benchmarks/scale_out.py --objects 4000 --delay-ms 40 --workers 1 4 --skip-inline
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import common, latency_proxy, processes  # noqa: E402

BUCKET = "lethe-scale-out-bench"
BATCH_SIZE = 1000
TARGET_INLINE = 0.8
TARGET_FOUR = 3.0
TARGET_DELAY_MS = 150.0
GATE_TOLERANCE = 0.10
GATE_WORKERS = 4


@dataclass
class Figure(common.Rates):
    label: str
    objects: int
    seconds: float = 0.0
    ledger_seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    busy: str = ""
    details: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    gate_ok: bool | None = None  # the rate gate's figure only
    # Objects/s between the run's first and last finalized page: the run's
    # start and tail left out (``pages_timeline``).
    steady_rate: float = 0.0
    # The machine's busy share over the same stretch: what binds the workers
    # there, where an idle start does not dilute it.
    steady_busy: float | None = None
    metered: processes.Metered | None = None


class Bench:
    def __init__(self, args: argparse.Namespace, moto: Any, proxy: Any, db_name: str) -> None:
        self.args, self.moto, self.proxy, self.db_name = args, moto, proxy, db_name
        self.seeder = common.s3_client(moto.endpoint_url, max_pool_connections=16)
        self.client = common.s3_client(proxy.endpoint_url, max_pool_connections=16)
        self.now = datetime.now(UTC)
        self.groups: dict[str, tuple[str, int]] = {
            "this process": ("one", os.getpid()),
            "moto": ("one", moto.process.pid),
            "proxy": ("one", proxy.pid),
        }

    def seed(self, variant: str, count: int, **rules: Any) -> tuple[list[str], Any]:
        from django.db import connection

        keys = [f"so-{variant}/t{i % 50:02d}/{i:07d}.bin" for i in range(count)]
        common.seed_objects(self.seeder, BUCKET, keys, threads=8)
        version = common.enforced_policy(
            f"bench.{variant}", now=self.now, batch_size=BATCH_SIZE, **rules
        )
        common.seed_records(version, keys, now=self.now)
        with connection.cursor() as cursor:
            for table in ("retention_retentionrecord", "retention_deletionevent"):
                cursor.execute(f"VACUUM ANALYZE {table}")
        return keys, version

    @contextmanager
    def measured(self, figure: Figure, extra: dict[str, tuple[str, int]]) -> Iterator[None]:
        machine = common.cpu_times()
        with processes.metered({**self.groups, **extra}) as found:
            started = time.perf_counter()
            try:
                yield
            finally:
                figure.seconds = time.perf_counter() - started
        figure.busy = common.cpu_busy_since(machine)
        figure.cpu = found.cpu
        figure.metered = found
        figure.details.append(found.waits)

    def check(self, variant: str, figure: Figure, run: Any = None) -> None:
        from retention.models import DeletionEvent, EventOutcome, RunStatus
        from retention.selectors.evidence import VerifyResult, chain_verify

        left = common.count_objects(self.seeder, BUCKET, f"so-{variant}/")
        figure.details.append("bucket: all gone" if not left else f"bucket: {left:,} LEFT")
        if left:
            figure.problems.append(f"{left:,} objects still in the bucket")
        if run is None:
            return
        events = DeletionEvent.objects.filter(run_id=run.pk, outcome=EventOutcome.DELETED)
        counted = events.count()
        figure.details.append(f"run {run.status}, deleted {run.deleted:,}, events {counted:,}")
        if run.status != RunStatus.FINISHED:
            figure.problems.append(f"run ended {run.status}: {run.status_reason}")
        if run.deleted != figure.objects or counted != figure.objects:
            figure.problems.append(f"counted {run.deleted:,} / {counted:,} of {figure.objects:,}")
        verdicts = [v for v in chain_verify(since=run.started_at) if isinstance(v, VerifyResult)]
        chain = verdicts[-1] if verdicts else None
        ok = chain is not None and chain.ok
        figure.details.append(
            f"chain over the run: {'verifies' if ok else 'BROKEN'}"
            f" ({chain.batches if chain else 0:,} batches)"
        )
        if not ok:
            figure.problems.append(f"hash chain: {chain.broken if chain else 'nothing walked'}")
        timeline, figure.steady_rate, pages = pages_timeline(run)
        if pages and figure.metered is not None:
            figure.steady_busy = figure.metered.busy_between(*pages)
        if figure.steady_busy is not None:
            timeline += f"; CPU busy {figure.steady_busy:.0%} between the first and the last page"
        figure.details.append(timeline)

    # ----------------------------------------------------------------------

    def bare(self, threads: int) -> Figure:
        keys, _ = self.seed(f"bare{threads}", self.args.objects)
        pages = [keys[i : i + 1000] for i in range(0, len(keys), 1000)]
        errors: list[int] = []

        def delete(page: list[str]) -> None:
            # Quiet=False, as the engine sends it: it reads each key's answer.
            answer = self.client.delete_objects(
                Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in page]}
            )
            errors.append(len(answer.get("Errors", ())))

        name = "sequential" if threads == 1 else f"{threads} threads"
        figure = Figure(
            f"(a{threads if threads > 1 else ''}) bare delete_objects, {name}", len(keys)
        )
        with self.measured(figure, {}), ThreadPoolExecutor(threads) as pool:
            list(pool.map(delete, pages))
        if sum(errors):
            figure.problems.append(f"{sum(errors):,} keys answered with an error")
        self.check(f"bare{threads}", figure)
        return figure

    def inline(self) -> Figure:
        from django.core.management import call_command

        from retention.models import Run

        keys, version = self.seed("inline", self.args.objects)
        out = io.StringIO()
        figure = Figure("(b) run_retention inline", len(keys))
        with self.measured(figure, {}):
            call_command(
                "run_retention",
                *("--data-class", version.policy.data_class, "--json"),
                stdout=out,
                stderr=io.StringIO(),
            )
        run = Run.objects.get(pk=json.loads(out.getvalue())["run_id"])
        figure.ledger_seconds = processes.ledger_span(run)
        self.check("inline", figure, run)
        return figure

    def queued(self, workers: int, *, rate: float | None = None) -> Figure:
        from django.conf import settings

        variant = f"gate{workers}" if rate else f"queue{workers}"
        rules = {"rate_limit": rate} if rate else {}
        count = self.args.gate_objects if rate else self.args.objects
        keys, version = self.seed(variant, count, **rules)
        _, warm = self.seed(f"warm-{variant}", processes.WARM_UP_OBJECTS)
        label = f"(c) queued, {workers} worker{'s' if workers > 1 else ''}"
        label += f", rate_limit {rate:g}/s" if rate else ""
        figure = Figure(label, len(keys))
        env = processes.cluster_env(self.db_name, workers)
        # A batch in flight for every worker, in the cluster and in this
        # process (the run's first advance publishes from here).
        env["RETENTION_MAX_BATCHES_IN_FLIGHT"] = str(workers)
        settings.RETENTION_MAX_BATCHES_IN_FLIGHT = workers
        cluster = processes.QCluster(env, Path(tempfile.mkdtemp(prefix="lethe-scale-out-")))
        cluster.start()
        try:
            cluster.wait_ready()
            processes.enqueue(warm.policy.data_class, cluster, timeout=self.args.queue_timeout)
            warmed = processes.workers_warm(workers, timeout=self.args.queue_timeout)
            if warmed < workers:
                figure.problems.append(f"only {warmed} of {workers} workers could be warmed")
            self.proxy.reset()
            with self.measured(figure, {"workers": ("tree", cluster.pid)}):
                run = processes.enqueue(version.policy.data_class, cluster, timeout=0, wait=False)
                processes.wait_finished(run, cluster, timeout=self.args.queue_timeout)
        finally:
            cluster.stop()
        figure.ledger_seconds = processes.ledger_span(run)
        if rate:
            achieved, requests = gate_rate(self.proxy.stats()["deletes"])
            off = achieved / rate - 1 if rate else 0.0
            figure.details.insert(
                0,
                f"the proxy saw {requests} DeleteObjects at {achieved:,.1f} keys/s "
                f"({off:+.1%} of {rate:g}): {verdict(abs(off) <= GATE_TOLERANCE)}",
            )
            figure.gate_ok = abs(off) <= GATE_TOLERANCE
        self.check(variant, figure, run)
        return figure


def pages_timeline(run: Any) -> tuple[str, float, tuple[float, float] | None]:
    """When the run's pages were finalized, on the run's own clock (the
    database's), and the rate between the first and the last: where a run's
    span goes besides its pages (its start before the first page, its tail
    after the last), which weigh more the fewer pages a worker gets."""
    from django.db.models import Min

    from retention.models import EventBatch, RunBatch

    if run.finished_at is None:
        return "pages: the run did not finish", 0.0, None
    batches = EventBatch.objects.filter(run_id=run.pk).values_list("created_at", "size")
    finalized = sorted(((at - run.started_at).total_seconds(), size) for at, size in batches)
    if not finalized:
        return "pages: none finalized", 0.0, None
    times = [at for at, _ in finalized]
    span = (run.finished_at - run.started_at).total_seconds()
    # The first page's objects were deleted before the first finalize began.
    between = sum(size for _, size in finalized[1:])
    steady = between / (times[-1] - times[0]) if times[-1] > times[0] else 0.0
    # A queued run's arm: from its start until it published its first batch.
    published = RunBatch.objects.filter(run_id=run.pk).aggregate(at=Min("published_at"))["at"]
    armed = ""
    if published is not None:
        armed = f"first batch published +{(published - run.started_at).total_seconds():.2f} s; "
    line = (
        f"pages: {armed}"
        f"{len(times)} finalized from +{times[0]:.2f} s to +{times[-1]:.2f} s of the "
        f"run's {span:.2f} s, {steady:,.0f} objects/s between the first and the last; the run "
        f"closed {span - times[-1]:.2f} s after the last"
    )
    start = run.started_at.timestamp()
    return line, steady, (start + times[0], start + times[-1])


def gate_rate(deletes: list[tuple[float, int]]) -> tuple[float, int]:
    """Keys per second from the first request to the last (the last's keys not yet due)."""
    deletes = sorted(deletes)
    if len(deletes) < 2 or deletes[-1][0] <= deletes[0][0]:
        return 0.0, len(deletes)
    sent = sum(n for _, n in deletes[:-1])
    return sent / (deletes[-1][0] - deletes[0][0]), len(deletes)


def verdict(ok: bool) -> str:
    return "yes" if ok else "NO"


def report(figure: Figure, ratio: str = "") -> None:
    rate = f"{figure.rate:,.0f} objects/s"
    if figure.ledger_seconds:
        rate = f"{figure.ledger_rate:,.0f} objects/s by the ledger ({figure.rate:,.0f} wall)"
    cpu = processes.per_thousand(figure.cpu, figure.objects)
    common.print_result(
        f"{figure.label}: {rate}{ratio}  ({figure.objects:,} in {figure.seconds:.2f} s; ",
        [figure.busy, cpu, *figure.details],
        figure.problems,
    )


def binds(figure: Figure) -> str:
    """What bounds a figure: the CPU when the machine was nearly all busy, else waiting."""
    name, seconds = processes.busiest(figure.cpu)
    share = seconds / figure.seconds if figure.seconds else 0.0
    # Judged where the workers work: between the first and the last page, not
    # over a start in which one worker arms the run and the others wait.
    where = "between the first and the last page"
    busy = figure.steady_busy
    if busy is None:
        where = "over the run"
        whole = figure.busy.removeprefix("CPU busy ").rstrip("%")
        busy = int(whole) / 100 if whole.isdigit() else None
    cpu_bound = busy is not None and busy >= 0.9
    why = (
        "the machine's CPU (both cores busy)"
        if cpu_bound
        else "not the CPU: the workers wait (the store's latency, locks; see the waits)"
    )
    shown = f"{busy:.0%}" if busy is not None else "unknown"
    return (
        f"what binds: {why}; machine CPU busy {shown} {where}; the busiest process(es): {name} "
        f"{seconds:.2f} CPU-s = {share:.0%} of one core over the run"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=20_000, help="objects per figure")
    parser.add_argument("--delay-ms", type=float, default=TARGET_DELAY_MS, help="proxy delay")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--skip-bare", action="store_true", help="leave out (a) and (a4)")
    parser.add_argument("--skip-inline", action="store_true", help="leave out (b)")
    parser.add_argument("--skip-gate", action="store_true", help="leave out the rate gate run")
    parser.add_argument("--gate-rate", type=float, default=500.0, help="deletes/s of (gate)")
    parser.add_argument("--gate-objects", type=int, default=10_000, help="objects of (gate)")
    parser.add_argument("--queue-timeout", type=float, default=900.0)
    args = parser.parse_args()

    common.aws_dummy_environment()
    moto = common.start_moto()
    proxy = latency_proxy.start(moto.endpoint_url, args.delay_ms)
    try:
        # The project's settings build the engine's storage from these, in this
        # process and in every qcluster: the engine talks to the proxy.
        os.environ.update(
            AWS_STORAGE_BUCKET_NAME=BUCKET,
            AWS_S3_ENDPOINT_URL=proxy.endpoint_url,
            AWS_S3_REGION_NAME=common.REGION,
            Q_CLUSTER_NAME=f"lethe-scale-out-{uuid.uuid4().hex[:8]}",
        )
        for name in ("RETENTION_STORAGE_RATE_LIMITS", "REDIS_URL"):
            os.environ.pop(name, None)
        common.setup_django()
        logging.getLogger("django-q").setLevel(logging.WARNING)  # "Enqueued" lines
        if common.not_postgresql():
            return 2
        return measure(args, moto, proxy)
    finally:
        proxy.stop()
        common.stop_moto(moto)


def measure(args: argparse.Namespace, moto: Any, proxy: Any) -> int:
    from retention.selectors.evidence import VerifyResult, chain_verify

    load_before = common.load_average()
    figures: dict[str, Figure] = {}
    with common.fresh_database() as db_name:
        bench = Bench(args, moto, proxy, db_name)
        common.create_bucket(bench.seeder, BUCKET)
        print(
            f"S3: moto at {moto.endpoint_url} behind the latency proxy at {proxy.endpoint_url}, "
            f"{args.delay_ms:g} ms a request; database {db_name}; {args.objects:,} objects a "
            f"figure, batch size {BATCH_SIZE}, seeding not timed"
        )
        for line in common.machine_description():
            print(line)
        steps: list[tuple[str, Callable[[], Figure]]] = []
        if not args.skip_bare:
            steps += [("a", lambda: bench.bare(1)), ("a4", lambda: bench.bare(4))]
        if not args.skip_inline:
            steps.append(("b", bench.inline))
        steps += [(f"c{n}", lambda n=n: bench.queued(n)) for n in args.workers]
        if not args.skip_gate:
            steps.append(("gate", lambda: bench.queued(GATE_WORKERS, rate=args.gate_rate)))
        for key, step in steps:
            figure = figures[key] = step()
            report(figure, ratio_of(key, figures))
            if key == f"c{max(args.workers)}":
                print("    " + binds(figure))
        verdicts = [v for v in chain_verify() if isinstance(v, VerifyResult)]
        chain = verdicts[-1] if verdicts else None
        chain_ok = chain is not None and chain.ok
        print(
            f"hash chain, whole: {'verifies' if chain_ok else 'BROKEN'} "
            f"({chain.batches if chain else 0:,} batches, {chain.events if chain else 0:,} events)"
        )
    met = targets(args, figures)
    print(f"load average before: {load_before}; after: {common.load_average()}")
    if not chain_ok or any(f.problems for f in figures.values()):
        return 2
    return 0 if met else 1


def ratio_of(key: str, figures: dict[str, Figure]) -> str:
    if key == "a4" and "a" in figures:
        return f" = {figures['a4'].rate / figures['a'].rate:.2f} of (a)"
    if key == "b" and "a" in figures:
        return f" = {figures['b'].rate / figures['a'].rate:.2f} of (a) by wall clock"
    if key.startswith("c") and key != "c1" and "c1" in figures:
        return f" = {figures[key].ledger_rate / figures['c1'].ledger_rate:.2f}x one worker"
    return ""


def targets(args: argparse.Namespace, figures: dict[str, Figure]) -> bool:
    binding = args.delay_ms == TARGET_DELAY_MS
    note = "" if binding else f" (the target is set at {TARGET_DELAY_MS:g} ms: reported only)"
    met = True
    if "a" in figures and "b" in figures:
        ratio = figures["b"].rate / figures["a"].rate
        ok = ratio >= TARGET_INLINE
        met &= ok or not binding
        print(f"(b)/(a) = {ratio:.2f}  (target at least {TARGET_INLINE}): {verdict(ok)}{note}")
    if "c1" in figures and "c4" in figures:
        ratio = figures["c4"].ledger_rate / figures["c1"].ledger_rate
        ok = ratio >= TARGET_FOUR
        met &= ok or not binding
        print(
            f"4 workers / 1 = {ratio:.2f}  (target at least {TARGET_FOUR:g}): {verdict(ok)}{note}"
        )
        if figures["c1"].steady_rate:
            steady = figures["c4"].steady_rate / figures["c1"].steady_rate
            print(
                f"4 workers / 1 between the first and the last page = {steady:.2f}  "
                "(reported: the run's start and tail left out; the target is on the ledger)"
            )
    if "gate" in figures:
        ok = bool(figures["gate"].gate_ok)
        met &= ok
        print(f"rate gate across {GATE_WORKERS} workers within 10 %: {verdict(ok)}")
    return met


if __name__ == "__main__":
    sys.exit(main())
