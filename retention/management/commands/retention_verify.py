"""Verify the hash chain of deletion events (SPEC §3.1) and its anchored heads, or the
runs' counts against the events."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from retention.anchoring.stores import AnchorStore, AnchorStoreError, anchor_store
from retention.chain.erasure_journal import journal_gaps, journal_read
from retention.conf import settings
from retention.receipts.signed_heads import AnchorError, key_id, public_key_load
from retention.selectors.anchors import anchors_check, signing_key
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
        parser.add_argument(
            "--anchors",
            action="store_true",
            help="Also check the chain against every head anchored in RETENTION_EVIDENCE_ANCHOR: "
            "names a rollback (the database is behind an anchor) or a rewrite, and the "
            "journaled erasures this database does not know as completed.",
        )
        parser.add_argument(
            "--public-key",
            action="append",
            default=[],
            metavar="BASE64",
            help="With --anchors: trust this public key as well (heads signed before a key "
            "rotation); repeatable.",
        )

    def handle(
        self,
        *,
        since: datetime | None,
        until: datetime | None,
        export_head: str | None,
        from_seq: int,
        runs: bool,
        anchors: bool = False,
        public_key: list[str] | None = None,
        **options: Any,
    ) -> None:
        if runs:
            if since or until or export_head or anchors or public_key:
                raise CommandError(
                    "--runs checks every closed run; --since, --until, --export-head, "
                    "--anchors and --public-key go with the chain check."
                )
            self._runs()
            return
        if public_key and not anchors:
            raise CommandError("--public-key goes with --anchors.")
        if anchors and (since or until):
            raise CommandError(
                "--anchors compares every anchor with the whole chain; --since and --until "
                "go without it."
            )
        # Settings and keys first: a missing store should not wait for the whole chain walk.
        inputs = self._anchor_inputs(public_key or []) if anchors else None
        problems: list[str] = []
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
            if not anchors:
                raise CommandError(f"chain broken: {result.broken}")
            problems.append(f"chain broken: {result.broken}")
        else:
            self.stdout.write("Chain intact.")
        if inputs is not None:
            problems.extend(self._anchors(*inputs))
        if problems:
            for problem in problems:
                self.stderr.write(problem)
            more = f" (and {len(problems) - 3} more, above)" if len(problems) > 3 else ""
            raise CommandError("; ".join(problems[:3]) + more)
        if export_head:
            with open(export_head, "w", encoding="utf-8") as fh:
                json.dump(chain_head(from_seq=from_seq), fh, indent=1)
            self.stdout.write(f"Wrote the chain head to {export_head}.")

    def _anchor_inputs(self, extra_keys: list[str]) -> tuple[AnchorStore, dict[str, bytes]]:
        """The anchor store and the trusted public keys, by key id."""
        try:
            store = anchor_store(settings.EVIDENCE_ANCHOR)
        except ValueError as exc:
            raise CommandError(f"RETENTION_EVIDENCE_ANCHOR cannot be read: {exc}") from None
        if store is None:
            raise CommandError("--anchors needs RETENTION_EVIDENCE_ANCHOR: no anchor store is set.")
        trusted: dict[str, bytes] = {}
        signer = signing_key()
        if signer is not None:
            trusted[signer.key_id] = signer.public_key
        for value in extra_keys:
            try:
                raw = public_key_load(value)
            except AnchorError as exc:
                raise CommandError(f"--public-key: {exc}") from None
            trusted[key_id(raw)] = raw
        if not trusted:
            raise CommandError(
                "--anchors needs a public key to check signatures: set RETENTION_SIGNING_KEY "
                "or pass --public-key."
            )
        return store, trusted

    def _anchors(self, store: AnchorStore, trusted: dict[str, bytes]) -> list[str]:
        """Compare every anchored head with the chain; the problems found."""
        try:
            check = anchors_check(store=store, public_keys=trusted)
        except AnchorStoreError as exc:
            raise CommandError(f"cannot read the anchors: {exc}") from None
        if check.first_seq is not None:
            span = f"batches {check.first_seq}..{check.last_seq}"
        else:
            span = "none trusted" if check.anchors else "none yet"
        self.stdout.write(
            f"Checked {check.anchors} anchored heads in {check.store} ({span}) against the "
            f"chain head at batch {check.head_seq}, with key(s) {', '.join(sorted(trusted))}."
        )
        if check.ok:
            self.stdout.write("Anchors agree with the chain.")
        try:
            journal = journal_read(store=store, public_keys=trusted)
        except AnchorStoreError as exc:
            raise CommandError(f"cannot read the erasure journal: {exc}") from None
        gaps = journal_gaps(journal)
        if journal.entries:
            self.stdout.write(
                f"Checked {len(journal.entries)} journaled erasure(s): "
                + ("all completed in this database." if not gaps else f"{len(gaps)} missing here.")
            )
        return check.problems + journal.problems + gaps

    def _runs(self) -> None:
        audit = runs_audit()
        skipped = f" ({audit.not_checked} not checked: still running)" if audit.not_checked else ""
        runs = f"{audit.checked} run{'' if audit.checked == 1 else 's'}"
        self.stdout.write(f"Checked {runs} against their events{skipped}.")
        if audit.ok:
            self.stdout.write("Run counts agree with their events.")
            return
        # Every run that disagrees, each count on its own line; the error sums them up.
        for found in audit.disagreements:
            self.stderr.write(f"counts disagree with events: {found}")
        shown = "; ".join(str(found) for found in audit.disagreements[:3])
        rest = len(audit.disagreements) - 3
        more = f" (and {rest} more, above)" if rest > 0 else ""
        bad = audit.runs_disagreeing
        if bad == 1:
            raise CommandError(f"counts disagree with events: {shown}{more}")
        raise CommandError(f"counts disagree with events in {bad} runs: {shown}{more}")
