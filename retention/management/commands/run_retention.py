"""Run a retention sweep inline, or hand it to django-q2 workers (SPEC §3.1)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from retention.clock import db_now, host_clock_read
from retention.engine import run_enqueue, run_execute, run_host_clock_record, run_start
from retention.engine.erasure import erasures_enqueue, erasures_execute
from retention.engine.outage import DatabaseUnavailable, as_unavailable, db_retry
from retention.exceptions import RunRefused
from retention.management.options import add_data_class_option
from retention.models import Run, RunMode, RunStatus, RunTrigger
from retention.reporting import human, progress_line, run_as_json, summary_lines
from retention.selectors.runs import run_picked_up
from retention.selectors.workers import WATCHDOG_SCHEDULE, watchdog_installed

# --wait: how often the run is read, when to say that no worker has it yet,
# and how long after --max-seconds a run being swept may take to close.
POLL_SECONDS = 0.5
NO_WORKER_NOTICE_SECONDS = 5.0
FINISH_GRACE_SECONDS = 30.0
# A progress line is printed when it changes, at most this often.
PROGRESS_EVERY_SECONDS = 1.0


class Command(BaseCommand):
    help = "Delete (or, with --dry-run, report) expired records whose data class is enforced."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Report only; touch nothing.")
        add_data_class_option(parser, help_text="Limit the run to these data classes (repeatable).")
        parser.add_argument("--tenant", help="Limit the run to one tenant.")
        parser.add_argument("--limit", type=int, help="Claim at most N records.")
        parser.add_argument(
            "--max-seconds", type=float, help="Stop claiming after S seconds; in-flight work ends."
        )
        parser.add_argument(
            "--enqueue",
            action="store_true",
            help="Accept the run and let django-q2 workers sweep it in batches; prints its id.",
        )
        parser.add_argument(
            "--wait",
            action="store_true",
            help="With --enqueue: follow the queued run with a progress line until it ends.",
        )
        parser.add_argument(
            "--erasures",
            action="store_true",
            help="Execute the approved erasure requests that are due, and nothing else (any run "
            "without --dry-run executes them before its own sweep).",
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(
        self,
        *,
        dry_run: bool,
        data_classes: list[str],
        tenant: str | None,
        limit: int | None,
        max_seconds: float | None,
        enqueue: bool,
        wait: bool,
        erasures: bool,
        as_json: bool,
        **options: Any,
    ) -> None:
        if wait and not enqueue:
            raise CommandError("--wait follows a queued run: use it with --enqueue.")
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1.")
        if max_seconds is not None and max_seconds <= 0:
            raise CommandError("--max-seconds must be positive.")
        if erasures and dry_run:
            raise CommandError("--erasures executes requests: it has no dry run.")
        erased = (
            []
            if dry_run
            else self._erasures(enqueue=enqueue, max_seconds=max_seconds, as_json=as_json)
        )
        if erasures:
            if as_json:
                self.stdout.write(json.dumps({"erasures": [run_as_json(r) for r in erased]}))
            elif not erased:
                self.stdout.write("No erasure request is due.")
            return
        mode = RunMode.DRY_RUN if dry_run else RunMode.ENFORCE
        try:
            if enqueue:
                run = run_enqueue(
                    mode=mode,
                    trigger=RunTrigger.COMMAND,
                    data_classes=data_classes or None,
                    tenant_id=tenant,
                    limit=limit,
                    max_seconds=max_seconds,
                    now=db_now(),
                )
            else:
                run = run_start(
                    mode=mode,
                    trigger=RunTrigger.COMMAND,
                    data_classes=data_classes or None,
                    tenant_id=tenant,
                    limit=limit,
                    now=db_now(),
                )
        except RunRefused as exc:
            if as_json and exc.run_id is not None:
                refused = Run.objects.get(pk=str(exc.run_id))
                self.stdout.write(json.dumps(run_as_json(refused)))
            raise CommandError(f"run refused ({exc.reason}): {exc}") from exc
        if enqueue and not watchdog_installed():
            # Stderr: --json keeps stdout one object.
            self.stderr.write(
                f"Warning: the watchdog schedule ({WATCHDOG_SCHEDULE}) is not installed. This "
                "run resumes itself, but chain anchors and stalled hold mirrors wait for the "
                "watchdog, and retention_check fails (watchdog_missing): run "
                "`manage.py retention_schedule`."
            )
        elif not enqueue:
            run_host_clock_record(run, host_clock_read())

        last: dict[str, Any] = {"at": 0.0, "line": None}

        def progress(current: Run) -> None:
            line = progress_line(current)
            if line == last["line"] or time.monotonic() - last["at"] < PROGRESS_EVERY_SECONDS:
                return
            last.update(at=time.monotonic(), line=line)
            self.stderr.write(line)
            self.stderr.flush()

        if not as_json:
            scope = ", ".join(run.data_classes) or "nothing"
            verb = "Queued" if enqueue else "Started"
            self.stdout.write(
                f"{verb} {'dry run' if dry_run else 'run'} {run.pk} "
                f"at {human(run.started_at)} over {scope}."
            )
        if enqueue and not wait:
            if as_json:
                self.stdout.write(
                    json.dumps({**run_as_json(run), "erasures": [run_as_json(r) for r in erased]})
                )
            else:
                self.stdout.write(
                    "Accepted: django-q2 workers (`manage.py qcluster`) sweep it in batches. "
                    f"Follow it with `--wait`, in the admin, or in the ledger (run {run.pk})."
                )
            return
        stuck = None
        if enqueue:
            run, stuck = self._follow(run, progress, max_seconds=max_seconds)
        else:
            run = run_execute(run=run, max_seconds=max_seconds, progress=progress)
        if as_json:
            self.stdout.write(
                json.dumps({**run_as_json(run), "erasures": [run_as_json(r) for r in erased]})
            )
        elif stuck is None:
            for line in summary_lines(run):
                self.stdout.write(line)
        if stuck is not None:
            raise CommandError(stuck)
        if enqueue and run.status in (RunStatus.ERROR, RunStatus.ABANDONED):
            # Followed to an end that is not a finish: say so in the exit status.
            raise CommandError(f"run {run.pk} ended {run.status}: {run.status_reason}")

    def _erasures(self, *, enqueue: bool, max_seconds: float | None, as_json: bool) -> list[Run]:
        """The due erasure requests, executed (or queued) before the sweep; a line each
        (on stderr with --json, which keeps stdout one object)."""
        if enqueue:
            runs = erasures_enqueue(now=db_now())
        else:
            runs = erasures_execute(clock=db_now, max_seconds=max_seconds)
        for run in runs:
            verb = "queued" if enqueue else run.status
            counts = ", ".join(f"{n} {name}" for name, n in run.counts().items() if n)
            (self.stderr if as_json else self.stdout).write(
                f"Erasure request {run.erasure_id}: run {run.pk} {verb}"
                + (f" ({counts})." if counts else ".")
            )
        return runs

    def execute(self, *args: Any, **options: Any) -> str | None:
        """A database that stays away past RETENTION_DATABASE_RETRY_SECONDS: one line, exit 1."""
        try:
            return super().execute(*args, **options)
        except (DatabaseError, DatabaseUnavailable) as exc:
            down = as_unavailable(exc)
            if down is None:
                raise
        self.stderr.write(str(down))
        sys.exit(1)

    def _follow(
        self, run: Run, progress: Callable[[Run], None], *, max_seconds: float | None
    ) -> tuple[Run, str | None]:
        """Poll the queued run until it ends; the workers do the work.

        Returns the run and, when following gave up at ``max_seconds``, why.
        A run no worker has picked up after a few seconds is said once on
        stderr; progress lines only when they change. A database restart
        meanwhile is waited out (the workers wait for it too), for up to
        ``RETENTION_DATABASE_RETRY_SECONDS``.
        """
        started = time.monotonic()
        picked = told = False
        try:
            while run.status == RunStatus.RUNNING:
                time.sleep(POLL_SECONDS)
                db_retry(run.refresh_from_db, what="following the run")
                waited = time.monotonic() - started
                picked = picked or db_retry(lambda: run_picked_up(run), what="following the run")
                if picked:
                    progress(run)
                    if max_seconds is not None and waited >= max_seconds + FINISH_GRACE_SECONDS:
                        return run, (
                            f"run {run.pk} is still running {waited:.0f} s after it was queued "
                            f"(--max-seconds {max_seconds:g}): its workers stopped claiming at "
                            "the budget but have not closed it; it goes on in the workers."
                        )
                    continue
                if max_seconds is not None and waited >= max_seconds:
                    return run, (
                        f"no worker picked run {run.pk} up within {max_seconds:g} s: is "
                        "`manage.py qcluster` running? The run stays in the ledger, queued."
                    )
                if not told and waited >= NO_WORKER_NOTICE_SECONDS:
                    told = True
                    self.stderr.write(
                        f"No worker has picked run {run.pk} up after {waited:.0f} s (no batch "
                        "published, nothing measured): is `manage.py qcluster` running? "
                        "Still waiting; Ctrl-C stops following, the run stays queued."
                    )
                    self.stderr.flush()
        except KeyboardInterrupt:
            self.stderr.write(f"Stopped following; run {run.pk} goes on in the workers.")
            raise
        return run, None
