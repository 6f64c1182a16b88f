"""Print the data map: every model and store, governed, exempt, internal or ungoverned.

``--strict`` exits 1 when a model with personal-looking fields is ungoverned,
naming each model and field, so a host's CI fails the day someone adds one.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from retention.selectors.datamap import (
    EXEMPT,
    GOVERNED,
    INTERNAL,
    UNGOVERNED,
    DataMap,
    Governance,
    ModelEntry,
    data_map,
)
from retention.selectors.datamap_export import data_map_as_json, period_text, rows_text, when_text

HEADINGS = {
    GOVERNED: "Governed (a data class of model rows)",
    EXEMPT: "Exempt (RETENTION_EXEMPT_MODELS, with the reason)",
    INTERNAL: "Internal (Lethe's and Django's bookkeeping)",
    UNGOVERNED: "Ungoverned",
}


def _fields(entry: ModelEntry) -> str:
    return ", ".join(f"{p.name} ({p.why})" for p in entry.personal_fields)


def _governance_line(g: Governance) -> str:
    if g.version is None:
        rules = g.note
    else:
        rules = f"version {g.version}, {period_text(g)}, {g.disposition}"
    if g.last_run is None:
        last = "none"
    else:
        at = g.last_run.finished_at or g.last_run.started_at
        last = f"{when_text(at)} ({g.last_run.mode.replace('_', ' ')}, {g.last_run.status})"
    return (
        f"    {g.data_class}: {rules}; on erasure {g.on_erasure or '—'}; "
        f"subject {g.subject_field or '—'}; "
        f"tenant {g.tenant_field or '—'}; oldest row {when_text(g.oldest_row_at)}; "
        f"last run {last}"
    )


def _model_lines(entry: ModelEntry, estimated: bool) -> list[str]:
    head = f"  {entry.label} ({rows_text(entry.rows, estimated=estimated)} rows"
    head += f"; {entry.note})" if entry.note else ")"
    if entry.reason and entry.status == EXEMPT:
        head += f": {entry.reason}"
    lines = [head]
    lines += [_governance_line(g) for g in entry.governance]
    if entry.personal_fields:
        lines.append(f"    personal-looking: {_fields(entry)}")
    return lines


def render(found: DataMap) -> list[str]:
    counting = "the planner's estimates (~)" if found.estimated else "exact counts"
    c = found.counts
    lines = [
        f"Data map at {when_text(found.generated_at)}; rows: {counting}.",
        f"Models: {len(found.models)} ({c[GOVERNED]} governed, {c[EXEMPT]} exempt, "
        f"{c[INTERNAL]} internal, {c[UNGOVERNED]} ungoverned).",
    ]
    for status in (GOVERNED, EXEMPT, UNGOVERNED):
        entries = [e for e in found.models if e.status == status]
        lines += ["", f"{HEADINGS[status]}: {len(entries)}"]
        for entry in entries:
            lines += _model_lines(entry, found.estimated)
    internal = [e for e in found.models if e.status == INTERNAL]
    lines += ["", f"{HEADINGS[INTERNAL]}: {len(internal)}"]
    by_reason: dict[str, list[str]] = {}
    for entry in internal:
        by_reason.setdefault(entry.reason, []).append(entry.label)
    for reason, labels in by_reason.items():
        lines.append(f"  {reason}: {', '.join(labels)}")
    lines += ["", f"Tracked objects: {len({t.data_class for t in found.tracked})} data classes"]
    for t in found.tracked:
        g = t.governance
        rules = g.note if g.version is None else f"version {g.version}, {period_text(g)}"
        records = rows_text(t.records, estimated=t.records_estimated)
        where = f" in {t.storage}" if t.storage else ""
        lines.append(f"  {t.data_class}{where}: {records} records not deleted; {rules}")
    lines += ["", f"Stores: {len(found.stores)}"]
    for s in found.stores:
        r = s.reconciliation
        if r is None:
            seen = "never reconciled"
        else:
            dry = ", dry run" if r.dry_run else ""
            seen = f"last reconciled {when_text(r.finished_at)}{dry}: {s.orphans} untracked objects"
        lines.append(f"  {s.alias} ({s.backend or 'no STORAGES entry'}): {seen}")
    return lines


class Command(BaseCommand):
    help = "Print the data map: every model and store, and what governs it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="One JSON object on stdout.")
        parser.add_argument(
            "--strict",
            action="store_true",
            help="Exit 1 when a model with personal-looking fields is ungoverned.",
        )

    def handle(self, *args: Any, json: bool, strict: bool, **options: Any) -> None:
        try:
            found = data_map(now=timezone.now())
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        if json:
            self.stdout.write(_dumps(data_map_as_json(found)))
        else:
            self.stdout.write("\n".join(render(found)))
        if not strict:
            return
        failing = found.ungoverned_personal
        if failing:
            named = "; ".join(
                f"{e.label} ({', '.join(p.name for p in e.personal_fields)})" for e in failing
            )
            raise CommandError(
                f"{len(failing)} ungoverned model{'s' if len(failing) != 1 else ''} with "
                f"personal-looking fields: {named}. Register each as a data class, or exempt "
                "it with a reason in RETENTION_EXEMPT_MODELS."
            )
        if not json:
            self.stdout.write("\nStrict: no model with personal-looking fields is ungoverned.")


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)
