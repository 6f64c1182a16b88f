"""The guided demo behind `make demo` (SPEC §4: embedded default, no services).

    lethe_demo seed     users, approved policies, uploads of every fate, request
                        logs, customer accounts, holds
    lethe_demo enable   bob enables enforcement after the reviewed dry run
    lethe_demo report   the fate of every upload, request log and account,
                        checked against storage and the database

Every step reads the clock once and passes that time on; the steps live in
``uploads.demo``, one concern a module. Nothing printed contains an object key.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from uploads.demo.enable import enable
from uploads.demo.report import report
from uploads.demo.seed import seed


class Command(BaseCommand):
    help = (
        "The Lethe demo: `seed` the example data, `enable` enforcement after the dry run, "
        "`report` what happened to every upload, request log and customer account."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("step", choices=("seed", "enable", "report"))

    def handle(self, *, step: str, **options: Any) -> None:
        now = timezone.now()
        if step == "seed":
            seed(self.stdout.write, now)
        elif step == "enable":
            enable(self.stdout.write, now)
        else:
            report(self.stdout.write, self.stderr.write, now)
