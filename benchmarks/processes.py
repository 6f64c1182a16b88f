"""The processes a queued benchmark runs, and the CPU time each spends.

``qcluster`` as a subprocess stopped the NOTES.md way, the environment it
runs with, and a queued run published from the benchmark's own process;
then CPU time by process from ``/proc``: a process tree (the cluster and the
workers it forks), PostgreSQL (the postmaster's own time, its helpers',
this database's backends, and the backends it has reaped since: a backend
that closes between two readings is counted through its parent's
``cutime``, which cannot tell whose backend it was), and single processes
(moto, the latency proxy, this one). Linux only: elsewhere the readings are
empty and the figures say so.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import common

QCLUSTER_START_TIMEOUT = 90.0
# The queued run each cluster works through before it is timed.
WARM_UP_OBJECTS = 2000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class QCluster:
    """``manage.py qcluster`` in its own session, stopped the NOTES.md way."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_path = log_dir / "qcluster.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "qcluster"],
                cwd=common.REPO_ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def process_died(self) -> bool:
        return self.process is None or self.process.poll() is not None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + QCLUSTER_START_TIMEOUT
        while " running." not in self.log_path.read_text(errors="replace"):
            if self.process_died() or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"qcluster did not start:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # One SIGINT to the main process only (NOTES.md), SIGKILL as fallback.
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def cluster_env(db_name: str, workers: int, *, redis_url: str = "") -> dict[str, str]:
    """This process's environment for a ``qcluster`` of ``workers`` on database ``db_name``.

    The cluster name is this process's (``Q_CLUSTER_NAME``): it publishes,
    the cluster works. ``redis_url``: django-q2's Redis broker, else the ORM's.
    """
    from django.conf import settings

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDIS_URL", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")
        and not k.startswith("Q_")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=common.database_url(db_name),
        RETENTION_DIGEST_KEY=settings.RETENTION_DIGEST_KEY,
        Q_CLUSTER_NAME=settings.Q_CLUSTER["name"],
        Q_WORKERS=str(workers),
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


def worker_warm(seconds: float) -> int:
    """A task run by ``workers_warm``: build what a worker builds once in its
    life (the storage adapter and its S3 client, a database connection),
    then hold the worker a while, so the next such task goes to another."""
    from django.db import connection

    from retention.storage import get_adapter

    get_adapter("default")
    connection.ensure_connection()
    time.sleep(seconds)
    return os.getpid()


def workers_warm(workers: int, *, timeout: float, hold: float = 1.0) -> int:
    """Have every worker process of a started cluster run ``worker_warm`` once;
    return how many distinct workers did.

    A worker builds its S3 client (a quarter of a second's CPU) at its first
    batch and keeps it for its life (django-q2 recycles a worker after
    hundreds of tasks). A warm-up run does not reach every worker: a batch
    takes pages for ``RETENTION_BATCH_SECONDS``, so one worker may take them
    all, and the others would build theirs inside the timed run. Each task
    here holds its worker ``hold`` seconds, so ``workers`` of them published
    together go one to each; a round that misses a worker is repeated.
    """
    from django_q.tasks import async_task, result

    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < workers and time.monotonic() < deadline:
        ids = [
            async_task("benchmarks.processes.worker_warm", hold, group="lethe-warm")
            for _ in range(workers)
        ]
        for task_id in ids:
            pid = result(task_id, wait=int(max(deadline - time.monotonic(), 1) * 1000))
            if pid is not None:
                seen.add(int(pid))
    return len(seen)


def enqueue(data_class: str, cluster: QCluster, *, timeout: float, wait: bool = True) -> Any:
    """``run_retention --enqueue --json`` in this process, as an inline run is called.

    The command's own pre-flight (the S3 client it checks the bucket with)
    is then as warm as the inline run's. With ``wait``, returns once the run
    has left ``running``.
    """
    from django.core.management import call_command

    from retention.models import Run

    out = io.StringIO()
    call_command(
        "run_retention",
        *("--enqueue", "--json", "--data-class", data_class),
        stdout=out,
        stderr=io.StringIO(),
    )
    run = Run.objects.get(pk=json.loads(out.getvalue())["run_id"])
    if wait:
        wait_finished(run, cluster, timeout=timeout)
    return run


def ledger_span(run: Any) -> float:
    """A run's span in the ledger, ``started_at`` to ``finished_at``; 0 while it runs."""
    if run.finished_at is None:
        return 0.0
    return float((run.finished_at - run.started_at).total_seconds())


def wait_finished(run: Any, cluster: QCluster, *, timeout: float) -> None:
    """Poll ``run`` until it leaves ``running``; exit with the cluster's log if it does not."""
    from retention.models import RunStatus

    deadline = time.monotonic() + timeout
    while run.status == RunStatus.RUNNING:
        if time.monotonic() > deadline or cluster.process_died():
            raise SystemExit(
                f"queued run {run.pk} still running after {timeout:g} s "
                f"(deleted {run.deleted:,}); qcluster log:\n{cluster.log_tail()}"
            )
        time.sleep(0.05)
        run.refresh_from_db()


class WaitSampler(threading.Thread):
    """Samples what this database's other backends wait on, every ``interval`` seconds.

    It also keeps each backend's last CPU reading (``seen``): a backend that
    closes between the meter's two readings (a worker's connection closed
    after its task) is then counted to its last sample, without the
    postmaster's reaped time, which holds every database's closed backends.
    """

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.stop = threading.Event()
        self.peaks: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()
        self.samples = 0
        self.seen: dict[int, Stat] = {}
        # The machine's (busy, total) CPU jiffies at each sample, by wall time:
        # how busy it was over a part of the block (``busy_between``).
        self.machine: list[tuple[float, tuple[float, float]]] = []

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.stop.wait(self.interval):
                if (jiffies := common.cpu_times()) is not None:
                    self.machine.append((time.time(), jiffies))
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT pid, coalesce(wait_event_type || ':' || wait_event, 'on CPU'),"
                        " state, left(regexp_replace(query, '\\s+', ' ', 'g'), 40)"
                        " FROM pg_stat_activity WHERE datname = current_database()"
                        " AND pid <> pg_backend_pid()"
                    )
                    now: Counter[str] = Counter()
                    for pid, wait, state, query in cursor.fetchall():
                        if (stat := read_stat(pid)) is not None:
                            self.seen[pid] = stat
                        if state == "idle":
                            continue
                        # No state yet: a backend still starting (a worker connecting).
                        key = wait if state == "active" else f"{state or 'starting'} ({wait})"
                        if wait.startswith("Lock:"):
                            key += f" [{query}]"
                        now[key] += 1
                self.samples += 1
                self.totals.update(now)
                for key, n in now.items():
                    self.peaks[key] = max(self.peaks[key], n)
        finally:
            connection.close()

    def summary(self) -> str:
        if not self.totals:
            return f"backends: all idle ({self.samples} samples)"
        ranked = sorted(self.totals.items(), key=lambda item: -item[1])[:6]
        return f"backends (mean over {self.samples} samples, peak) " + ", ".join(
            f"{key} {n / self.samples:.2f} ({self.peaks[key]})" for key, n in ranked
        )


# --------------------------------------------------------------------------
# CPU time by process


@dataclass(frozen=True)
class Stat:
    pid: int
    ppid: int
    own: float  # utime + stime, seconds
    reaped: float  # cutime + cstime: children waited for


def read_stat(pid: int | str) -> Stat | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces.
    fields = text[text.rindex(")") + 2 :].split()
    ticks = [int(n) for n in fields[11:15]]
    return Stat(
        int(pid),
        int(fields[1]),
        (ticks[0] + ticks[1]) / CLOCK_TICKS,
        (ticks[2] + ticks[3]) / CLOCK_TICKS,
    )


def all_stats() -> dict[int, Stat]:
    stats = {}
    with_proc = Path("/proc")
    for entry in with_proc.iterdir() if with_proc.is_dir() else ():
        if entry.name.isdigit() and (stat := read_stat(entry.name)) is not None:
            stats[stat.pid] = stat
    return stats


def tree(stats: Mapping[int, Stat], root: int) -> set[int]:
    """``root`` and every descendant of it in ``stats``."""
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def postgres_pids(stats: Mapping[int, Stat]) -> tuple[int | None, set[int]]:
    """The postmaster, and its helpers and this database's backends (not other databases')."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE backend_type <> 'client backend' OR datname = current_database()"
        )
        ours = {pid for (pid,) in cursor.fetchall()}
        cursor.execute("SELECT pg_backend_pid()")
        own = cursor.fetchone()[0]
    postmaster = stats[own].ppid if own in stats else None
    return postmaster, {pid for pid in ours if pid in stats and stats[pid].ppid == postmaster}


@dataclass
class Reading:
    stats: dict[int, Stat]
    groups: dict[str, set[int]]
    reaped_by: dict[str, int]  # group -> the process whose cutime counts the group's dead


class CPUMeter:
    """CPU-seconds of named groups of processes between two readings.

    ``groups`` name a process tree each (the cluster: ``("tree", pid)``) or a
    single process (``("one", pid)``); PostgreSQL is always counted, as
    ``"PostgreSQL"``. A process that ended between the readings is counted
    through its parent's reaped time when the parent is in the group.
    """

    def __init__(self, groups: Mapping[str, tuple[str, int]]) -> None:
        self.groups = dict(groups)

    def read(self) -> Reading:
        stats = all_stats()
        groups: dict[str, set[int]] = {}
        reaped_by: dict[str, int] = {}
        for name, (kind, pid) in self.groups.items():
            groups[name] = tree(stats, pid) if kind == "tree" else {pid} & set(stats)
            reaped_by[name] = pid
        postmaster, backends = postgres_pids(stats)
        if postmaster is not None:
            groups["PostgreSQL"] = backends | {postmaster}
            reaped_by["PostgreSQL"] = postmaster
        return Reading(stats, groups, reaped_by)

    @staticmethod
    def spent(
        before: Reading, after: Reading, seen: Mapping[int, Stat] | None = None
    ) -> dict[str, float]:
        """CPU-seconds of each group between the readings.

        With ``seen`` (a ``WaitSampler``'s), PostgreSQL's closed backends are
        counted to their last sample instead of through the postmaster's
        reaped time; the process trees' reaped time is always counted.
        """
        spent = {}
        for name, pids in after.groups.items():
            total = 0.0
            sampled = name == "PostgreSQL" and seen is not None
            extra = set(seen or ()) if sampled else set()
            for pid in pids | before.groups.get(name, set()) | extra:
                now, then = after.stats.get(pid), before.stats.get(pid)
                if now is None and sampled:
                    now = (seen or {}).get(pid)
                if now is not None:
                    total += now.own - (then.own if then is not None else 0.0)
            if sampled:
                spent[name] = max(0.0, total)
                continue
            root = after.reaped_by[name]
            now, then = after.stats.get(root), before.stats.get(root)
            if now is not None and then is not None:
                total += now.reaped - then.reaped
            spent[name] = max(0.0, total)
        return spent


@dataclass
class Metered:
    """What ``metered`` measured: CPU-seconds by group, and the backends' waits."""

    cpu: dict[str, float] = field(default_factory=dict)
    waits: str = ""
    machine: list[tuple[float, tuple[float, float]]] = field(default_factory=list)

    def busy_between(self, start: float, end: float) -> float | None:
        """The machine's busy share between two wall times (sampled; None if too short)."""
        inside = [jiffies for at, jiffies in self.machine if start <= at <= end]
        return common.busy_share(inside[0], inside[-1]) if len(inside) > 1 else None


@contextmanager
def metered(groups: Mapping[str, tuple[str, int]]) -> Iterator[Metered]:
    """CPU-seconds of ``groups`` (and PostgreSQL's) over the block, with a
    ``WaitSampler`` running, so closed backends are counted too."""
    found = Metered()
    meter, sampler = CPUMeter(groups), WaitSampler()
    before = meter.read()
    sampler.start()
    try:
        yield found
    finally:
        sampler.stop.set()
        sampler.join()
    found.cpu = meter.spent(before, meter.read(), sampler.seen)
    found.waits = sampler.summary()
    found.machine = sampler.machine


def per_thousand(spent: Mapping[str, float], objects: int) -> str:
    """``name 0.123`` CPU-seconds per 1,000 objects for each group, busiest first."""
    if not spent or not objects:
        return "CPU-s per 1,000 objects: unknown"
    ranked = sorted(spent.items(), key=lambda item: -item[1])
    return "CPU-s per 1,000 objects: " + ", ".join(
        f"{name} {seconds * 1000 / objects:.3f}" for name, seconds in ranked
    )


def busiest(spent: Mapping[str, float], names: Iterable[str] | None = None) -> tuple[str, float]:
    candidates = {k: v for k, v in spent.items() if names is None or k in names}
    if not candidates:
        return "unknown", 0.0
    return max(candidates.items(), key=lambda item: item[1])
