"""Erasure requests from the command line (SPEC §3.1).

retention_erasure list [--json]          by due date, the overdue ones marked
retention_erasure show ID [--json]       one request: its scope per class, its outcome
retention_erasure certificate ID         the certificate, as issued
retention_erasure replay [--dry-run]     after a restore: execute again every journaled
                                         erasure this database does not know as completed

Each subcommand is a subparser and a ``_<name>`` method. Overdue is decided
by the database's clock, as ``retention_check`` decides it. The subject's id
is never printed, only its digest.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from retention.anchoring.stores import AnchorStoreError, anchor_store
from retention.chain.erasure_journal import journal_read
from retention.clock import db_now
from retention.conf import settings
from retention.engine.erasure_replay import erasures_replay
from retention.formatting import human, rfc3339
from retention.models import ErasureRequest, Run
from retention.receipts.signed_heads import AnchorError, key_id, public_key_load
from retention.selectors.anchors import signing_key
from retention.selectors.erasure import (
    ClassProgress,
    erasure_progress,
    erasure_requests_by_due,
    erasure_runs,
)


def _whom(request: ErasureRequest, *, short: bool = True) -> str:
    digest = request.subject_digest[:12] + "…" if short else request.subject_digest
    subject = f"subject {digest}" if request.subject_digest else ""
    tenant = f"tenant {request.tenant_id}" if request.tenant_id else ""
    return " in ".join(part for part in (subject, tenant) if part)


def _user(user: Any) -> str | None:
    return None if user is None else str(user.get_username())


def _requester(request: ErasureRequest) -> str:
    if request.requested_by_tenant:
        return f"tenant {request.requested_by_tenant} (API key)"
    return _user(request.requested_by) or "—"


def _run_json(run: Run) -> dict[str, Any]:
    return {
        "run_id": str(run.pk),
        "status": run.status,
        "started_at": rfc3339(run.started_at),
        "finished_at": rfc3339(run.finished_at),
        "counts": run.counts(),
    }


def _as_json(request: ErasureRequest) -> dict[str, Any]:
    return {
        "id": str(request.pk),
        "state": request.state,
        "overdue": bool(getattr(request, "is_overdue", False)),
        "subject_digest": request.subject_digest,
        "tenant_id": request.tenant_id,
        "data_classes": request.data_classes,
        "reason": request.reason,
        "requested_by": _user(request.requested_by),
        "requested_by_tenant": request.requested_by_tenant,
        "received_at": rfc3339(request.received_at),
        "due_at": rfc3339(request.due_at),
        "not_before": rfc3339(request.not_before),
        "approved_by": _user(request.approved_by),
        "approved_at": rfc3339(request.approved_at),
        "ended_by": _user(request.ended_by),
        "ended_at": rfc3339(request.ended_at),
        "end_reason": request.end_reason,
        "completed_at": rfc3339(request.completed_at),
        "verified_at": rfc3339(request.verified_at),
        "certificate_issued": request.certificate is not None,
    }


def _scope_line(c: ClassProgress) -> str:
    if not c.reachable:
        return f"  {c.data_class} ({c.kind or '?'}): not reached: {c.not_reachable_because}"
    action = c.on_erasure or "—"
    if c.erasure_basis:
        action += f" ({c.erasure_basis})"
    holds = ", ".join(f"hold #{h['hold']} ({h['count']})" for h in c.holds_at_receipt)
    return (
        f"  {c.data_class} ({c.kind}): {c.items} item{'' if c.items == 1 else 's'}; "
        f"on erasure {action}; holds covering some: {holds or 'none'}"
    )


def _outcome_line(c: ClassProgress) -> str:
    if not c.settled:
        return f"  {c.data_class}: not settled yet"
    kept = "; ".join(f"hold #{k.get('hold')}: {k.get('reason')} ({k.get('count')})" for k in c.kept)
    verified = "yes" if c.verified else "no"
    return (
        f"  {c.data_class}: erased {c.erased}, redacted {c.redacted}, kept {c.kept_count}"
        f"{f' ({kept})' if kept else ''}, left {c.left}, verified {verified}"
    )


def _show_lines(request: ErasureRequest, runs: list[Run]) -> list[str]:
    overdue = " OVERDUE" if getattr(request, "is_overdue", False) else ""
    lines = [
        f"Erasure request {request.pk}: {request.state}{overdue}",
        f"  whom: {_whom(request, short=False)}",
        f"  classes asked for: {', '.join(request.data_classes) or 'every class'}",
        f"  reason: {request.reason}",
        f"  received {human(request.received_at)} from {_requester(request)}",
        f"  due {human(request.due_at)}; not before {human(request.not_before)}",
    ]
    if request.approved_at is not None:
        lines.append(f"  approved {human(request.approved_at)} by {_user(request.approved_by)}")
    if request.ended_at is not None:
        lines.append(
            f"  {request.state} {human(request.ended_at)} by {_user(request.ended_by)}: "
            f"{request.end_reason}"
        )
    lines.append(
        f"  completed {human(request.completed_at)}; verified {human(request.verified_at)}"
    )
    progress = erasure_progress(request)
    total = (request.scope or {}).get("total", 0)
    lines.append(f"Scope, frozen at receipt ({total} item{'' if total == 1 else 's'}):")
    lines += [_scope_line(c) for c in progress] or ["  no class"]
    settled_at = parse_datetime((request.outcome or {}).get("settled_at") or "")
    lines.append(f"Outcome{f' (settled {human(settled_at)})' if settled_at else ''}:")
    lines += [_outcome_line(c) for c in progress] or ["  no class"]
    lines.append(f"Runs: {len(runs) or 'none'}")
    lines += [
        f"  {run.pk} {run.status}, started {human(run.started_at)}: deleted {run.deleted}, "
        f"redacted {run.redacted}, skipped held {run.skipped_held}, failed {run.failed}"
        for run in runs
    ]
    issued = "issued (retention_erasure certificate ID)" if request.certificate else "not issued"
    lines.append(f"Certificate: {issued}")
    return lines


class Command(BaseCommand):
    help = (
        "List erasure requests by due date, show one, print its certificate, or replay the "
        "journal after a restore."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing = actions.add_parser("list", help="Every request, the earliest due first.")
        listing.add_argument("--json", action="store_true", help="One JSON object on stdout.")
        show = actions.add_parser("show", help="One request: its scope per class and outcome.")
        show.add_argument("erasure_id", metavar="ID")
        show.add_argument("--json", action="store_true", help="One JSON object on stdout.")
        certificate = actions.add_parser("certificate", help="The certificate, as issued.")
        certificate.add_argument("erasure_id", metavar="ID")
        replay = actions.add_parser(
            "replay",
            help="After a restore: execute again every erasure the journal "
            "(RETENTION_EVIDENCE_ANCHOR) holds that this database does not know as completed.",
        )
        replay.add_argument(
            "--dry-run", action="store_true", help="Say what would be replayed; change nothing."
        )
        replay.add_argument(
            "--public-key",
            action="append",
            default=[],
            metavar="KEY",
            help="Trust this public key as well (entries signed before a key rotation): base64, "
            "or the file GET /api/v1/deletions/chain/key/ serves. Repeatable.",
        )

    def handle(
        self,
        *,
        action: str,
        json: bool = False,
        erasure_id: str | None = None,
        dry_run: bool = False,
        public_key: list[str] | None = None,
        **options: Any,
    ) -> None:
        handlers: dict[str, Callable[..., None]] = {
            "list": self._list,
            "show": self._show,
            "certificate": self._certificate,
            "replay": self._replay,
        }
        handlers[action](
            as_json=json, erasure_id=erasure_id, dry_run=dry_run, public_keys=public_key or []
        )

    def _list(self, *, as_json: bool, **_: Any) -> None:
        now = db_now()
        requests = list(
            erasure_requests_by_due(now=now).select_related("requested_by", "approved_by")
        )
        if as_json:
            data = {"now": rfc3339(now), "requests": [_as_json(r) for r in requests]}
            self.stdout.write(_dumps(data))
            return
        if not requests:
            self.stdout.write("No erasure requests.")
            return
        self.stdout.write(f"Erasure requests by due date ({human(now)}): {len(requests)}")
        for r in requests:
            overdue = "  OVERDUE" if getattr(r, "is_overdue", False) else ""
            self.stdout.write(
                f"{r.pk}  {r.state:<19}  {_whom(r):<40}  due {human(r.due_at)}{overdue}"
            )

    def _show(self, *, as_json: bool, erasure_id: str, **_: Any) -> None:
        request = self._get(erasure_id)
        runs = list(erasure_runs(request))
        if as_json:
            data = {
                **_as_json(request),
                "scope": request.scope,
                "outcome": request.outcome,
                "runs": [_run_json(run) for run in runs],
            }
            self.stdout.write(_dumps(data))
            return
        self.stdout.write("\n".join(_show_lines(request, runs)))

    def _certificate(self, *, erasure_id: str, **_: Any) -> None:
        request = self._get(erasure_id)
        if request.certificate is None:
            raise CommandError(
                f"Erasure request {request.pk} is {request.state}: its certificate is issued "
                "when it completes or partially completes."
            )
        self.stdout.write(_dumps(request.certificate))

    def _replay(self, *, dry_run: bool, public_keys: list[str], **_: Any) -> None:
        try:
            store = anchor_store(settings.EVIDENCE_ANCHOR)
        except ValueError as exc:
            raise CommandError(f"RETENTION_EVIDENCE_ANCHOR cannot be read: {exc}") from None
        signer = signing_key()
        trusted = {signer.key_id: signer.public_key} if signer is not None else {}
        for value in public_keys:
            try:
                raw = public_key_load(value)
            except AnchorError as exc:
                raise CommandError(f"--public-key: {exc}") from None
            trusted[key_id(raw)] = raw
        if store is None or not trusted:
            raise CommandError(
                "replay reads the erasure journal: set RETENTION_EVIDENCE_ANCHOR, and "
                "RETENTION_SIGNING_KEY or --public-key (the key that signed it)."
            )
        try:
            journal = journal_read(store=store, public_keys=trusted)
        except AnchorStoreError as exc:
            raise CommandError(f"cannot read the erasure journal: {exc}") from None
        for problem in journal.problems:
            self.stderr.write(f"not replayed: {problem}")
        done = erasures_replay(entries=journal.entries, clock=db_now, dry_run=dry_run)
        for item in done:
            items = f", {item.items} item{'' if item.items == 1 else 's'}" if item.items else ""
            self.stdout.write(f"{item.request}: {item.action} ({item.detail}{items})")
            for name in item.key_bound:
                self.stderr.write(
                    f"  {name}: its rows have no age column, so the replay bounded them by key "
                    "only: a row of this subject written after the restore under a key handed "
                    "out again was within reach (replay before the application writes again)."
                )
        acted = sum(item.action in ("replayed", "would replay") for item in done)
        verb = "Would replay" if dry_run else "Replayed"
        self.stdout.write(
            f"{verb} {acted} of {len(journal.entries)} journaled erasure(s) in {store.description}."
        )
        failed = [item for item in done if item.action == "not replayed"]
        if journal.problems or failed:
            raise CommandError(
                f"{len(journal.problems) + len(failed)} journaled erasure(s) not replayed (above)."
            )

    def _get(self, erasure_id: str) -> ErasureRequest:
        requests = erasure_requests_by_due(now=db_now()).select_related(
            "requested_by", "approved_by", "ended_by"
        )
        try:
            return requests.get(pk=uuid.UUID(erasure_id))
        except (ValueError, ErasureRequest.DoesNotExist):
            raise CommandError(f"No erasure request {erasure_id}.") from None


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2)
