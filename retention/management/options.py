"""Command-line options that more than one command takes, spelled once.

``run_retention --data-class`` and ``retention_reconcile --data-class`` are
the same option: repeatable, several names after one flag, an empty list when
absent. One definition keeps the two from drifting apart. (Not in
``commands/``: Django takes every module there for a command.)
"""

from __future__ import annotations

from django.core.management.base import CommandParser


def add_data_class_option(parser: CommandParser, *, help_text: str) -> None:
    """``--data-class X [Y ...]``, repeatable, into ``data_classes`` (a list)."""
    parser.add_argument(
        "--data-class",
        dest="data_classes",
        action="extend",
        nargs="+",
        default=[],
        metavar="X",
        help=help_text,
    )
