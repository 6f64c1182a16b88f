"""The guided demo behind `make demo` (SPEC §4: embedded default, no services).

    lethe_demo seed     users, approved policies, uploads of every fate, request
                        logs, customer accounts, holds
    lethe_demo enable   bob enables enforcement after the reviewed dry run
    lethe_demo report   the fate of every upload, request log and account,
                        checked against storage and the database
    lethe_demo erase    a customer's erasure request and a tenant's offboarding,
                        filed by alice and approved by bob
    lethe_demo certificates
                        each request's certificate: a summary, and a file
                        (``--out``) for ``python -m retention.receipts verify``

Every step reads the clock once and passes that time on; the steps live in
``uploads.demo``, one concern a module. Nothing printed contains an object key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from uploads.demo.enable import enable
from uploads.demo.erase import certificates, request
from uploads.demo.report import report
from uploads.demo.seed import seed


class Command(BaseCommand):
    help = (
        "The Lethe demo: `seed` the example data, `enable` enforcement after the dry run, "
        "`report` what happened to every upload, request log and customer account, `erase` "
        "file and approve two erasure requests, `certificates` print and write theirs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("step", choices=("seed", "enable", "report", "erase", "certificates"))
        parser.add_argument(
            "--out",
            type=Path,
            default=None,
            help="certificates: the folder to write them to (default: the project's var folder).",
        )

    def handle(self, *, step: str, out: Path | None, **options: Any) -> None:
        now = timezone.now()
        if step == "seed":
            seed(self.stdout.write, now)
        elif step == "enable":
            enable(self.stdout.write, now)
        elif step == "erase":
            request(self.stdout.write, now)
        elif step == "certificates":
            certificates(self.stdout.write, out or Path(settings.VAR_DIR))
        else:
            report(self.stdout.write, self.stderr.write, now)
