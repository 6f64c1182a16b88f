"""What reconciliation does with what it found, once every listing has ended.

- ``missing``: looked at once more (the object may have been uploading),
  then the record moves to the terminal state ``missing`` with an event of
  that outcome: "not found at deletion time", never "deleted".
- ``reappeared`` and ``leftover_versions`` of an enforced class: the record
  goes back to the claim queue (failed, retryable, due now, to be probed
  first) with a ``reappeared`` event; the next run deletes it unless a hold
  applies. Its later deletion events carry a fresh idempotency key.
- ``orphans``: reported; with ``--adopt`` each becomes a record of that class.

Every change is made under the row's lock and only while the row is still
what the listing saw (same state, same row version); no lock is held while
the store is asked anything.
"""

from __future__ import annotations

import json
import re
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any

from django.db import IntegrityError, transaction
from django.db.models import F

from retention.chain.events import events_append
from retention.digest import key_digests
from retention.engine.claims import CLAIM_FIELDS, claimed_item
from retention.engine.events import event_for
from retention.exceptions import RunRefused
from retention.models import (
    DataClassMode,
    EventOutcome,
    Policy,
    PolicyVersion,
    RecordState,
    RetentionRecord,
    Run,
)
from retention.selectors.policies import version_in_force
from retention.storage import MalformedKey, StorageAdapter, validate_object_key
from retention.storage.listing import Listed, object_present

RECORD_FIELDS = (*CLAIM_FIELDS, "state", "created_at")
ACTED = ("missing", "reappeared", "leftover_versions")
# A store with files of registered row classes (reported only, never acted on).
ROW_FILE_COUNTS = ("row_files", "files_of_deleted_rows")
SAMPLE = 20
PAGE = 500
# An object written this recently may be one whose record is being written:
# it is not adopted (counted as "recent"); the next reconciliation adopts it.
RECENT = timedelta(minutes=5)
TENANT_MAX = RetentionRecord._meta.get_field("tenant_id").max_length or 100


class Findings:
    """One storage's findings: counts, a sample of each, the records to act on."""

    def __init__(self, alias: str, *, spool: IO[str] | None, now: datetime) -> None:
        self.alias = alias
        self.now = now
        self.spool = spool
        self.listed = 0
        self.tracked = 0
        self.orphans = 0
        self.adopted = 0
        # Per finding: record id and row version, side by side.
        self.rows: dict[str, array[int]] = {name: array("q") for name in ACTED}
        self.samples: dict[str, list[dict[str, Any]]] = {name: [] for name in ("orphans", *ACTED)}
        self.not_adopted: Counter[str] = Counter()
        # A storage whose holds are mirrored as Object Lock legal holds
        # (``locks``): legal_hold_mismatch and legal_hold_unchecked.
        self.lock_counts: dict[str, int] = {}
        # A storage where registered row classes keep files (``row_files``):
        # row_files (named by a row, left alone) and files_of_deleted_rows.
        self.row_counts: dict[str, int] = {}

    @property
    def counts(self) -> dict[str, int]:
        return {
            "orphans": self.orphans,
            **{name: len(self.rows[name]) // 2 for name in ACTED},
            "listed": self.listed,
            "tracked": self.tracked,
            "adopted": self.adopted,
            **self.lock_counts,
            **self.row_counts,
        }

    def row_files_start(self) -> None:
        """This store holds files of governed rows: its counts say so, from 0."""
        self.row_counts = dict.fromkeys(ROW_FILE_COUNTS, 0)

    def row_file(self) -> None:
        """A listed file a governed row names: governed through its row, left alone."""
        self.row_counts["row_files"] += 1

    def row_gone(self, obj: Listed, digest: str) -> None:
        """A file where a governed field writes that no row names: its row was deleted."""
        self.row_counts["files_of_deleted_rows"] += 1
        self._sample("files_of_deleted_rows", digest, obj.size, obj.modified)

    def lock_mismatch(self, row: dict[str, Any], *, locked: bool) -> None:
        """A record whose object's legal hold disagrees with the holds (reported only)."""
        self._sample(
            "legal_hold_mismatch",
            row["key_digest"],
            None,
            row["created_at"],
            record_id=row["id"],
            data_class=row["data_class"],
            legal_hold="on" if locked else "off",
        )

    def orphan(self, obj: Listed, digest: str) -> None:
        self.orphans += 1
        self._sample("orphans", digest, obj.size, obj.modified)
        if self.spool is not None:
            modified = obj.modified.isoformat() if obj.modified else None
            self.spool.write(json.dumps([obj.key, modified]) + "\n")

    def add(self, finding: str, row: dict[str, Any], obj: Listed | None) -> None:
        self.rows[finding].extend((row["id"], row["row_version"]))
        size = obj.size if obj is not None else None
        self._sample(
            finding,
            row["key_digest"],
            size,
            obj.modified if obj is not None and obj.modified else row["created_at"],
            record_id=row["id"],
            data_class=row["data_class"],
        )

    def _sample(
        self, finding: str, digest: str, size: int | None, since: datetime | None, **more: Any
    ) -> None:
        sample = self.samples.setdefault(finding, [])
        if len(sample) < SAMPLE:
            age = round((self.now - since).total_seconds()) if since is not None else None
            sample.append({"key_digest": digest, "size": size, "age_seconds": age, **more})

    def seen(self, finding: str) -> dict[int, int]:
        pairs = self.rows[finding]
        return dict(zip(pairs[0::2], pairs[1::2], strict=True))

    def keep(self, finding: str, seen: dict[int, int]) -> None:
        self.rows[finding] = array("q", [n for pair in seen.items() for n in pair])


@dataclass(frozen=True)
class TenantPattern:
    """``{tenant}/{rest}``: where an adopted object's key names its tenant."""

    text: str
    regex: re.Pattern[str]

    @classmethod
    def parse(cls, text: str) -> TenantPattern:
        if text.count("{tenant}") != 1:
            raise RunRefused(
                f"--tenant-pattern {text!r} must hold the {{tenant}} placeholder once.",
                reason="bad_arguments",
            )
        parts = re.split(r"\{(\w+)\}", text)
        regex = []
        for index, part in enumerate(parts):
            if index % 2 == 0:
                regex.append(re.escape(part))
            elif part == "tenant":
                regex.append("(?P<tenant>[^/]+)")
            elif part == "rest":
                regex.append(".*")
            else:
                regex.append("[^/]+")
        return cls(text, re.compile("".join(regex), re.DOTALL))

    def tenant(self, key: str) -> str | None:
        match = self.regex.fullmatch(key)
        return match["tenant"] if match else None


def adopt_target(data_class: str, *, now: datetime) -> PolicyVersion:
    """The version in force of the class orphans are adopted into."""
    from retention.rows.registry import row_class

    if row_class(data_class) is not None:
        raise RunRefused(
            f"--adopt {data_class}: a class of database rows has no objects to adopt.",
            reason="bad_arguments",
        )
    if not Policy.objects.filter(data_class=data_class).exists():
        raise RunRefused(f"--adopt: unknown data class {data_class!r}.", reason="bad_arguments")
    version = version_in_force(data_class=data_class)
    if version is None:
        raise RunRefused(
            f"--adopt {data_class}: Data class {data_class!r} has no approved policy version; "
            "a version must be submitted and approved by a second person first.",
            reason="bad_arguments",
        )
    return version


def findings_act(
    run: Run,
    findings: Findings,
    adapter: StorageAdapter,
    *,
    dry_run: bool,
    target: PolicyVersion | None,
    pattern: TenantPattern | None,
    now: datetime,
) -> None:
    _missing(run, findings, adapter, dry_run=dry_run, now=now)
    enforced = set(
        Policy.objects.filter(mode=DataClassMode.ENFORCE).values_list("data_class", flat=True)
    )
    for finding in ("reappeared", "leftover_versions"):
        if not dry_run:
            _requeue(run, findings, finding, enforced, now=now)
    if target is not None:
        _adopt(findings, target, pattern, dry_run=dry_run, now=now)


def _rows(ids: Sequence[int], **filters: Any) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(ids), PAGE):
        page = list(ids[start : start + PAGE])
        yield list(
            RetentionRecord.objects.filter(id__any_of=page, **filters)
            .order_by("id")
            .values(*RECORD_FIELDS)
        )


def _missing(
    run: Run, findings: Findings, adapter: StorageAdapter, *, dry_run: bool, now: datetime
) -> None:
    seen = findings.seen("missing")
    confirmed: dict[int, int] = {}
    live = [RecordState.ACTIVE, RecordState.FAILED]
    for rows in _rows(list(seen), state__in=live):
        # The second look, with no lock held.
        absent = [r for r in rows if r["row_version"] == seen[r["id"]]]
        absent = [r for r in absent if not object_present(adapter, r["object_key"])]
        if dry_run:
            confirmed.update((r["id"], r["row_version"]) for r in absent)
            continue
        with transaction.atomic():
            moved = _still_as_seen(absent, state__in=live)
            if not moved:
                continue
            RetentionRecord.objects.filter(id__any_of=[r["id"] for r in moved]).update(
                state=RecordState.MISSING,
                retryable=False,
                next_attempt_at=None,
                last_error=f"not found in the store by reconciliation run {run.pk}",
                row_version=F("row_version") + 1,
            )
            reason = "not found at deletion time (reconciliation)"
            events_append(
                [_event(run, r, EventOutcome.MISSING, reason, now) for r in moved],
                run_id=run.pk,
                now=now,
            )
        confirmed.update((r["id"], r["row_version"]) for r in moved)
    findings.keep("missing", confirmed)


def _requeue(
    run: Run, findings: Findings, finding: str, enforced: set[str], *, now: datetime
) -> None:
    seen = findings.seen(finding)
    reason = (
        "the object is in the store again after its deletion"
        if finding == "reappeared"
        else "versions or delete markers remain after an erasure"
    )
    for rows in _rows(list(seen), state=RecordState.DELETED):
        due = [r for r in rows if r["data_class"] in enforced and r["row_version"] == seen[r["id"]]]
        if not due:
            continue
        with transaction.atomic():
            back = _still_as_seen(due, state=RecordState.DELETED)
            if not back:
                continue
            RetentionRecord.objects.filter(id__any_of=[r["id"] for r in back]).update(
                state=RecordState.FAILED,
                retryable=True,
                next_attempt_at=now,
                deleted_at=None,
                # Probe first: the next claimer asks the store before deleting.
                disposal_started_at=now,
                attempts=0,
                last_error=f"{reason} (reconciliation run {run.pk})",
                row_version=F("row_version") + 1,
                reappearances=F("reappearances") + 1,
                reappeared_at=now,
            )
            events_append(
                [_event(run, r, EventOutcome.REAPPEARED, reason, now) for r in back],
                run_id=run.pk,
                now=now,
            )


def _still_as_seen(rows: list[dict[str, Any]], **filters: Any) -> list[dict[str, Any]]:
    """Lock the rows; keep those still matching ``filters`` at the row version read."""
    if not rows:
        return []
    locked = dict(
        RetentionRecord.objects.select_for_update()
        .filter(id__any_of=[r["id"] for r in rows], **filters)
        .values_list("id", "row_version")
    )
    return [r for r in rows if locked.get(r["id"]) == r["row_version"]]


def _event(run: Run, row: dict[str, Any], outcome: str, reason: str, now: datetime) -> Any:
    return event_for(claimed_item(row), run_id=run.pk, outcome=outcome, now=now, reason=reason)


def _adopt(
    findings: Findings,
    version: PolicyVersion,
    pattern: TenantPattern | None,
    *,
    dry_run: bool,
    now: datetime,
) -> None:
    assert findings.spool is not None
    spool = findings.spool
    spool.flush()
    spool.seek(0)
    batch: list[tuple[str, str, datetime]] = []
    for line in spool:
        if not line.strip():
            continue
        key, modified_text = json.loads(line)
        modified = datetime.fromisoformat(modified_text) if modified_text else now
        tenant = pattern.tenant(key) if pattern is not None else ""
        try:
            validate_object_key(key)
        except MalformedKey:
            findings.not_adopted["invalid_key"] += 1
            continue
        if tenant is None:
            findings.not_adopted["no_tenant_match"] += 1
        elif len(tenant) > TENANT_MAX:
            findings.not_adopted["tenant_too_long"] += 1
        elif modified > now - RECENT:
            findings.not_adopted["recent"] += 1
        elif dry_run:
            findings.adopted += 1
        else:
            batch.append((key, tenant, modified))
            if len(batch) >= PAGE:
                findings.adopted += _insert(findings.alias, batch, version)
                batch = []
    if batch:
        findings.adopted += _insert(findings.alias, batch, version)


def _insert(alias: str, batch: list[tuple[str, str, datetime]], version: PolicyVersion) -> int:
    digests = key_digests(key for key, _, _ in batch)
    records = [
        RetentionRecord(
            tenant_id=tenant,
            data_class=version.policy.data_class,
            storage=alias,
            object_key=key,
            key_digest=digest,
            policy_version=version,
            created_at=modified,
            expires_at=modified + version.retention_period,
        )
        for (key, tenant, modified), digest in zip(batch, digests, strict=True)
    ]
    try:
        with transaction.atomic():
            RetentionRecord.objects.bulk_create(records)
        return len(records)
    except IntegrityError:
        pass
    # Someone tracked one of these keys meanwhile: one at a time, skipping those.
    adopted = 0
    for record in records:
        try:
            with transaction.atomic():
                record.save(force_insert=True)
            adopted += 1
        except IntegrityError:
            continue
    return adopted
