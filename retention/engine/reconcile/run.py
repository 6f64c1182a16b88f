"""A reconciliation run: walk a store's listing and the records in one key order, as a merge.

``reconcile_run`` writes a run (mode ``reconcile``) before it lists anything,
then, per storage, walks the listing and the records of that storage side by
side. Memory holds one page of each and the findings' record ids, never the
listing. Findings are acted on only once every listing has ended (``act``):
a listing that fails halfway ends the run ``error`` with nothing changed.
The report names objects by digest, size and age, never by key.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from datetime import datetime
from typing import Any

from django.conf import settings as django_settings
from django.db import connection
from django.db.models import F, Max
from django.db.models.functions import Collate
from django.db.models.lookups import GreaterThan, GreaterThanOrEqual, LessThan

from retention.digest import key_digest
from retention.engine.ledger import run_finish, run_refuse
from retention.engine.reconcile.act import (
    RECORD_FIELDS,
    ROW_FILE_COUNTS,
    Findings,
    TenantPattern,
    adopt_target,
    findings_act,
)
from retention.engine.reconcile.locks import legal_holds_compare
from retention.engine.reconcile.row_files import RowFiles, row_files_for
from retention.exceptions import RunRefused
from retention.models import (
    RECONCILE_COUNTS,
    Policy,
    PolicyVersion,
    RecordState,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.selectors.holds import mirrored_storages
from retention.storage import StorageAdapter, StorageUnavailable, get_adapter
from retention.storage.listing import Listed, ListingFailed, objects_listed

logger = logging.getLogger("retention.engine")

PAGE = 1000
# The collation in which the database orders keys as S3 and Python do (by their bytes).
_BYTE_ORDER = {"postgresql": "C", "sqlite": "BINARY"}


def reconcile_run(
    *,
    storages: Sequence[str] | None = None,
    prefix: str = "",
    data_classes: Sequence[str] | None = None,
    adopt: str | None = None,
    tenant_pattern: str | None = None,
    dry_run: bool = False,
    trigger: str = RunTrigger.COMMAND,
    now: datetime,
) -> Run:
    """Compare stores with the records; act on the findings unless ``dry_run``.

    Raises RunRefused (the run stays in the ledger as ``refused``) for bad
    arguments or a store that cannot be reached; a listing that fails
    halfway returns the run closed as ``error``.
    """
    known = set(Policy.objects.values_list("data_class", flat=True))
    unknown = sorted(set(data_classes or ()) - known)
    aliases = list(dict.fromkeys(storages or _storages_in_use()))
    report: dict[str, Any] = {
        "dry_run": dry_run,
        "prefix": prefix,
        "storages": {},
        "data_classes": list(data_classes or ()),
        "adopt": adopt,
        "tenant_pattern": tenant_pattern,
    }
    run = Run.objects.create(
        trigger=trigger,
        mode=RunMode.RECONCILE,
        data_classes=sorted(data_classes or known),
        started_at=now,
        cutoff=now,
        report=report,
        lease_expires_at=None,
    )
    try:
        if unknown:
            raise RunRefused(
                f"Unknown data class(es): {', '.join(unknown)}.", reason="bad_arguments"
            )
        pattern = TenantPattern.parse(tenant_pattern) if tenant_pattern else None
        target = adopt_target(adopt, now=now) if adopt else None
        if pattern is not None and target is None:
            raise RunRefused("--tenant-pattern is used with --adopt.", reason="bad_arguments")
        adapters = {alias: get_adapter(alias) for alias in aliases}
        for adapter in adapters.values():
            adapter.check()
    except RunRefused as exc:
        run_refuse(run, str(exc), exc.reason, now)
    except StorageUnavailable as exc:
        run_refuse(run, f"Storage unreachable: {exc}", "storage_unavailable", now)
    except Exception as exc:  # an unknown alias, a misconfigured storage
        run_refuse(run, f"{type(exc).__name__}: {exc}", "bad_arguments", now)

    try:
        _reconcile(run, report, adapters, prefix, data_classes, target, pattern, dry_run, now)
    except (ListingFailed, StorageUnavailable) as exc:
        logger.warning("reconciliation %s failed: %s", run.pk, exc)
        return run_finish(run, RunStatus.ERROR, str(exc), now)
    except Exception as exc:
        # The type only: a database error's message may quote a key it was given.
        logger.error("reconciliation %s failed: %s", run.pk, type(exc).__name__)
        run_finish(run, RunStatus.ERROR, f"unexpected {type(exc).__name__}", now)
        raise
    return run_finish(run, RunStatus.FINISHED, "", now)


def _reconcile(
    run: Run,
    report: dict[str, Any],
    adapters: dict[str, StorageAdapter],
    prefix: str,
    data_classes: Sequence[str] | None,
    target: PolicyVersion | None,
    pattern: TenantPattern | None,
    dry_run: bool,
    now: datetime,
) -> None:
    # Records tracked after this instant may be uploading right now.
    last_id = RetentionRecord.objects.aggregate(last=Max("id"))["last"] or 0
    selected = set(data_classes) if data_classes else None
    found: dict[str, Findings] = {}

    def save() -> None:
        report["storages"] = {alias: f.counts for alias, f in found.items()}
        report["counts"] = {
            name: sum(f.counts[name] for f in found.values()) for name in RECONCILE_COUNTS
        }
        report["samples"] = {alias: f.samples for alias, f in found.items()}
        with_rows = [f for f in found.values() if f.row_counts]
        if with_rows:
            report["row_files"] = {
                name: sum(f.row_counts[name] for f in with_rows) for name in ROW_FILE_COUNTS
            }
        report["not_adopted"] = {
            alias: dict(f.not_adopted) for alias, f in found.items() if f.not_adopted
        }
        Run.objects.filter(pk=run.pk).update(report=report)

    with ExitStack() as files:
        try:
            for alias, adapter in adapters.items():
                # Orphans to adopt wait in a file, not in memory.
                spool = (
                    files.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
                    if target is not None
                    else None
                )
                found[alias] = findings = Findings(alias, spool=spool, now=now)
                versions = _erases_versions(alias, prefix)
                listing = objects_listed(adapter, prefix, versions=versions)
                rows = row_files_for(alias, prefix)
                if rows is not None:
                    findings.row_files_start()
                _merge(listing, _records(alias, prefix), findings, selected, last_id, rows)
                if alias in mirrored_storages():
                    legal_holds_compare(findings, prefix=prefix, selected=selected, last_id=last_id)
        except (ListingFailed, StorageUnavailable) as exc:
            save()
            raise ListingFailed(f"listing failed, nothing acted on: {exc}") from exc
        try:
            for alias, findings in found.items():
                findings_act(
                    run,
                    findings,
                    adapters[alias],
                    dry_run=dry_run,
                    target=target,
                    pattern=pattern,
                    now=now,
                )
        except (ListingFailed, StorageUnavailable) as exc:
            # Changes already made stand, each with its event.
            save()
            raise ListingFailed(f"acting on the findings stopped: {exc}") from exc
    save()


def _storages_in_use() -> list[str]:
    """Every configured alias that records use (a retired alias is skipped), or ``default``."""
    used = set(RetentionRecord.objects.values_list("storage", flat=True).distinct())
    aliases = sorted(used & set(django_settings.STORAGES))
    return aliases or ["default"]


def _erases_versions(alias: str, prefix: str) -> bool:
    """List versions where a record of this store belongs to an erase-all-versions version."""
    return RetentionRecord.objects.filter(
        storage=alias, object_key__startswith=prefix, policy_version__erase_all_versions=True
    ).exists()


def _records(alias: str, prefix: str) -> Iterator[dict[str, Any]]:
    """The store's records in key order, one keyset page at a time."""
    collation = _BYTE_ORDER.get(connection.vendor)
    key = Collate("object_key", collation) if collation else F("object_key")
    base = RetentionRecord.objects.filter(storage=alias)
    if prefix:
        # A range the index can start from and stop at: every key starting
        # with the prefix sorts before the prefix with its last character
        # incremented (code point order is UTF-8 byte order).
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        base = base.filter(
            GreaterThanOrEqual(key, prefix), LessThan(key, upper), object_key__startswith=prefix
        )
    after: str | None = None
    while True:
        page = base if after is None else base.filter(GreaterThan(key, after))
        rows = list(page.order_by(key).values(*RECORD_FIELDS)[:PAGE])
        yield from rows
        if len(rows) < PAGE:
            return
        after = rows[-1]["object_key"]


def _merge(
    listing: Iterator[Listed],
    records: Iterator[dict[str, Any]],
    findings: Findings,
    selected: set[str] | None,
    last_id: int,
    rows: RowFiles | None = None,
) -> None:
    obj = next(listing, None)
    row = next(records, None)
    while obj is not None or row is not None:
        if row is None or (obj is not None and obj.key < row["object_key"]):
            assert obj is not None
            if obj.present:
                # A key with only old versions or markers and no record is no object.
                findings.listed += 1
                if rows is not None and rows.named(obj.key):
                    findings.row_file()  # governed through its row: no orphan
                elif rows is not None and rows.in_directory(obj.key):
                    findings.row_gone(obj, key_digest(obj.key))
                else:
                    findings.orphan(obj, key_digest(obj.key))
            obj = next(listing, None)
            continue
        here = obj if obj is not None and obj.key == row["object_key"] else None
        if here is not None:
            findings.listed += here.present
            obj = next(listing, None)
        if selected is None or row["data_class"] in selected:
            _classify(row, here, findings, last_id)
        row = next(records, None)


def _classify(row: dict[str, Any], obj: Listed | None, findings: Findings, last_id: int) -> None:
    findings.tracked += 1
    state = row["state"]
    present = obj is not None and obj.present
    if state in (RecordState.ACTIVE, RecordState.FAILED):
        if not present and row["id"] <= last_id:
            findings.add("missing", row, obj)
    elif state == RecordState.DELETED:
        if present:
            findings.add("reappeared", row, obj)
        elif obj is not None and obj.leftovers and row["policy_version__erase_all_versions"]:
            findings.add("leftover_versions", row, obj)
