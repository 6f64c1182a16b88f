"""Compare a store with the retention records, and act on what differs (SPEC §2 Reconciliation)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retention.clock import db_now
from retention.engine import reconcile_run
from retention.exceptions import RunRefused
from retention.management.options import add_data_class_option
from retention.models import RECONCILE_COUNTS, Run, RunStatus, RunTrigger


def reconcile_as_json(run: Run) -> dict[str, Any]:
    counts = (run.report or {}).get("counts") or {}
    payload: dict[str, Any] = {
        "run_id": str(run.pk),
        "mode": run.mode,
        "status": run.status,
        "counts": {name: int(counts.get(name, 0)) for name in RECONCILE_COUNTS},
    }
    row_files = (run.report or {}).get("row_files")
    if row_files:
        # Only where registered row classes keep files in a store reconciled.
        payload["row_files"] = {name: int(n or 0) for name, n in row_files.items()}
    return payload


def _n(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def acted_line(report: dict[str, Any]) -> str:
    """What a finished reconciliation did, or would do, about its findings: only
    those it found, counted; a run that found nothing to act on says so."""
    counts = report.get("counts") or {}
    dry = bool(report.get("dry_run"))
    missing, adopted = int(counts.get("missing", 0)), int(counts.get("adopted", 0))
    requeue = {
        name: int(counts.get(name, 0))
        for name in ("reappeared", "leftover_versions")
        if counts.get(name)
    }
    acts = []
    if missing:
        records = _n(missing, "missing record", "missing records")
        acts.append(f"close {records} as not found" if dry else f"closed {records} as not found")
    if requeue:
        found = " and ".join(
            _n(n, "reappeared object", "reappeared objects")
            if name == "reappeared"
            else _n(n, "object with leftover versions", "objects with leftover versions")
            for name, n in requeue.items()
        )
        verb = "queue" if dry else "queued"
        acts.append(f"{verb} the {found} of enforced classes for deletion (others: reported)")
    if adopted:
        taken = _n(adopted, "orphan", "orphans")
        acts.append(f"adopt {taken}" if dry else f"adopted {taken}")
    if not acts:
        orphans = int(counts.get("orphans", 0))
        left = f" ({_n(orphans, 'orphan', 'orphans')} reported only)" if orphans else ""
        return f"No finding to act on{left}: nothing {'would change' if dry else 'changed'}."
    return ("Would " if dry else "Acted on the findings: ") + "; ".join(acts) + "."


class Command(BaseCommand):
    help = (
        "List a store and compare it with the records: orphans, missing objects, objects "
        "that reappeared after deletion, versions left behind an erasure."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--storage",
            dest="storages",
            action="append",
            default=[],
            metavar="ALIAS",
            help="A STORAGES alias (repeatable); default: every alias records use.",
        )
        parser.add_argument("--prefix", default="", help="Only keys starting with this.")
        add_data_class_option(
            parser, help_text="Report and act on these data classes' records only (repeatable)."
        )
        parser.add_argument(
            "--adopt", metavar="DATA_CLASS", help="Track each orphan as a record of this class."
        )
        parser.add_argument(
            "--tenant-pattern",
            metavar="PATTERN",
            help="With --adopt: where a key names its tenant, e.g. '{tenant}/{rest}'.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Report only; change no record.")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print one JSON object."
        )

    def handle(
        self,
        *,
        storages: list[str],
        prefix: str,
        data_classes: list[str],
        adopt: str | None,
        tenant_pattern: str | None,
        dry_run: bool,
        as_json: bool,
        **options: Any,
    ) -> None:
        if tenant_pattern and not adopt:
            raise CommandError("--tenant-pattern names the tenant of adopted objects: use --adopt.")
        try:
            run = reconcile_run(
                storages=storages or None,
                prefix=prefix,
                data_classes=data_classes or None,
                adopt=adopt,
                tenant_pattern=tenant_pattern,
                dry_run=dry_run,
                trigger=RunTrigger.COMMAND,
                now=db_now(),
            )
        except RunRefused as exc:
            if as_json and exc.run_id is not None:
                self.stdout.write(
                    json.dumps(reconcile_as_json(Run.objects.get(pk=str(exc.run_id))))
                )
            raise CommandError(f"reconciliation refused ({exc.reason}): {exc}") from exc
        if as_json:
            self.stdout.write(json.dumps(reconcile_as_json(run)))
        else:
            self._summary(run)
        if run.status != RunStatus.FINISHED:
            raise CommandError(f"reconciliation {run.pk} ended {run.status}: {run.status_reason}")

    def _summary(self, run: Run) -> None:
        report = run.report or {}
        self.stdout.write(f"Reconciliation {run.pk} ({run.status}).")
        for alias, counts in (report.get("storages") or {}).items():
            figures = ", ".join(f"{name} {counts.get(name, 0)}" for name in RECONCILE_COUNTS)
            self.stdout.write(f"  {alias}: {figures}")
            if "legal_hold_mismatch" in counts:
                self.stdout.write(
                    f"    Object Lock legal holds: mismatch {counts['legal_hold_mismatch']}, "
                    f"unchecked {counts.get('legal_hold_unchecked', 0)} (reported only)"
                )
            if "files_of_deleted_rows" in counts:
                self.stdout.write(
                    f"    Files of database rows: named by a row {counts.get('row_files', 0)} "
                    f"(governed through their rows, left alone), of deleted rows "
                    f"{counts['files_of_deleted_rows']} (reported only)"
                )
            skipped = (report.get("not_adopted") or {}).get(alias)
            if skipped:
                reasons = ", ".join(f"{name} {n}" for name, n in sorted(skipped.items()))
                self.stdout.write(f"    not adopted: {reasons}")
        if run.status == RunStatus.FINISHED:
            self.stdout.write(acted_line(report))
