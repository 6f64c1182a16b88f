"""Verify the hash chain of deletion events (SPEC §3.1), or the runs' counts against them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from retention.selectors.evidence import VerifyResult, chain_head, chain_verify
from retention.selectors.run_audit import runs_audit


def _when(value: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        raise CommandError(
            f"{value!r} is not an RFC 3339 time with a zone (e.g. 2026-01-31T00:00Z)"
        )
    return parsed


class Command(BaseCommand):
    help = "Check that no deletion event was edited, removed, inserted or reordered."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", type=_when, help="Only batches recorded at or after this.")
        parser.add_argument("--until", type=_when, help="Only batches recorded before this.")
        parser.add_argument(
            "--export-head",
            metavar="FILE",
            help="Also write the chain head and its links (for offline receipt checks).",
        )
        parser.add_argument(
            "--from-seq",
            type=int,
            default=0,
            help="With --export-head: only the links after this batch.",
        )
        parser.add_argument(
            "--runs",
            action="store_true",
            help="Instead of the chain, check that every closed run's counts equal its events.",
        )

    def handle(
        self,
        *,
        since: datetime | None,
        until: datetime | None,
        export_head: str | None,
        from_seq: int,
        runs: bool,
        **options: Any,
    ) -> None:
        if runs:
            if since or until or export_head:
                raise CommandError(
                    "--runs checks every closed run; --since, --until and --export-head "
                    "go with the chain check."
                )
            self._runs()
            return
        result: VerifyResult | None = None
        for item in chain_verify(since=since, until=until):
            if isinstance(item, str):
                self.stderr.write(item)
            else:
                result = item
        assert result is not None
        scope = "the whole chain" if since is None and until is None else "the chosen range"
        span = (
            f"batches {result.first_seq}..{result.last_seq}"
            if result.first_seq is not None
            else "no batches"
        )
        self.stdout.write(
            f"Checked {scope}: {result.batches} batches, {result.events} events ({span})."
        )
        if not result.ok:
            raise CommandError(f"chain broken: {result.broken}")
        self.stdout.write("Chain intact.")
        if export_head:
            with open(export_head, "w", encoding="utf-8") as fh:
                json.dump(chain_head(from_seq=from_seq), fh, indent=1)
            self.stdout.write(f"Wrote the chain head to {export_head}.")

    def _runs(self) -> None:
        audit = runs_audit()
        skipped = (
            f" ({audit.not_checked} not checked: still running)"
            if audit.not_checked
            else ""
        )
        runs = f"{audit.checked} run{'' if audit.checked == 1 else 's'}"
        self.stdout.write(f"Checked {runs} against their events{skipped}.")
        if audit.disagreement is not None:
            raise CommandError(f"counts disagree with events: {audit.disagreement}")
        self.stdout.write("Run counts agree with their events.")
