"""Small builders shared by tests: write an object, track it, run the engine."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import CommandError, call_command
from django.db import connection, connections
from freezegun import freeze_time

from retention import engine, services
from retention.models import (
    ChainHead,
    DeletionEvent,
    EventBatch,
    PolicyVersion,
    RecordState,
    RetentionRecord,
    Run,
    RunBatch,
    RunLease,
    RunMode,
)
from retention.selectors.evidence import VerifyResult, chain_verify

# The counts of a reconciliation run, in the order its --json gives them: a contract,
# seven names, no more.
RECONCILE_COUNTS = [
    "orphans",
    "missing",
    "reappeared",
    "leftover_versions",
    "listed",
    "tracked",
    "adopted",
]


def put_tracked(
    *,
    tenant_id: str = "acme",
    data_class: str = "idv.photo",
    key: str | None = None,
    now: datetime,
    storage: str = "default",
    body: bytes = b"x",
    size: int | None = None,
) -> RetentionRecord:
    key = key or f"{tenant_id}/{data_class}/{now.timestamp():.0f}-{RetentionRecord.objects.count()}"
    saved = storages[storage].save(key, ContentFile(body))
    return services.record_track(
        tenant_id=tenant_id,
        data_class=data_class,
        object_key=saved,
        now=now,
        storage=storage,
        size=size,
    )


def put_expired(count: int, now: datetime, **kwargs: Any) -> list[RetentionRecord]:
    """``count`` tracked objects 40 days old: past the usual 30-day period at ``now``."""
    return [put_tracked(now=now - timedelta(days=40), **kwargs) for _ in range(count)]


def outcomes(record: RetentionRecord) -> list[str]:
    """The record's evidence so far: its events' outcomes, oldest first."""
    return list(
        DeletionEvent.objects.filter(record=record).order_by("id").values_list("outcome", flat=True)
    )


def exists(record: RetentionRecord) -> bool:
    return storages[record.storage].exists(record.object_key)


def gone(record: RetentionRecord) -> bool:
    """Reloaded, the record is deleted and its object is gone too."""
    record.refresh_from_db()
    return record.state == RecordState.DELETED and not exists(record)


def kept(record: RetentionRecord) -> bool:
    """Reloaded, the record is still active and its object still there."""
    record.refresh_from_db()
    return record.state == RecordState.ACTIVE and exists(record)


def enforce(*, now: datetime, clock: Any = None, **kwargs: Any) -> Run:
    run = engine.run_start(mode=RunMode.ENFORCE, now=now, **kwargs.pop("start", {}))
    return engine.run_execute(run=run, clock=clock or (lambda: now), **kwargs)


def dry_run(*, now: datetime, **kwargs: Any) -> Run:
    run = engine.run_start(mode=RunMode.DRY_RUN, now=now, **kwargs)
    return engine.run_execute(run=run, clock=lambda: now)


def live_run_in_flight(now: datetime) -> tuple[Run, Any]:
    """An enforcing run holding its liveness lock, every due photo claimed: its page in flight."""
    from retention.engine.outage import liveness_take, page_token

    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    assert liveness_take(run)
    claim = engine.records_claim(
        run=run,
        data_class="idv.photo",
        limit=10,
        now=now,
        start_disposal=True,
        token=page_token(run),
    )
    return run, claim


def add_s3_storage(settings: Any, alias: str, endpoint_url: str, bucket: str) -> str:
    """Add a django-storages S3 alias pointing at the test S3 server."""
    settings.STORAGES = {
        **settings.STORAGES,
        alias: {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": bucket,
                "endpoint_url": endpoint_url,
                "access_key": "testing",
                "secret_key": "testing",
                "region_name": "us-east-1",
            },
        },
    }
    return alias


def submitted(
    data_class: str, retention_period: timedelta, *, author: Any, now: datetime
) -> PolicyVersion:
    """A version of ``data_class`` proposed and submitted by ``author``: awaiting review."""
    draft = services.policy_version_propose(
        data_class=data_class, retention_period=retention_period, author=author, now=now
    )
    return services.policy_version_submit(version=draft, by=author, now=now)


def on_own_connection(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Start ``fn`` on a thread of its own, so on a database connection of its own.

    The dict gets ``fn``'s return as ``"value"``, or what it raised as
    ``"error"``, once the thread ends; the thread closes its connections so
    the test database can be dropped.
    """
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # reported to the test through result
            result["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, result


def blocked_statement(pid: int) -> str | None:
    """The statement PostgreSQL backend ``pid`` is waiting on a lock in, if it is."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
            [pid],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def database_now() -> datetime:
    """PostgreSQL's own clock (``clock_timestamp()``), which no freezegun or libfaketime moves."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        (value,) = cursor.fetchone()
    result: datetime = value.astimezone(UTC)
    return result


def retention_check(*args: str, at: datetime) -> tuple[int, str, str]:
    """``retention_check`` at a frozen time: (exit code, stdout, error message)."""
    out = StringIO()
    with freeze_time(at):
        try:
            call_command("retention_check", *args, stdout=out)
        except CommandError as exc:
            return exc.returncode, out.getvalue(), str(exc)
    return 0, out.getvalue(), ""


def retention_check_json(at: datetime) -> tuple[int, dict[str, Any]]:
    """``retention_check --json`` at a frozen time: exactly one JSON object, also when broken."""
    code, out, _ = retention_check("--json", at=at)
    (line,) = out.splitlines()
    return code, json.loads(line)


def chain_ok() -> None:
    """The whole hash chain verifies."""
    (verdict,) = [item for item in chain_verify() if isinstance(item, VerifyResult)]
    assert verdict.ok, verdict.broken


def database_dump(path: Path) -> Path:
    """A logical backup of the app's tables (``dumpdata``), the same on PostgreSQL and SQLite."""
    call_command("dumpdata", "retention", output=str(path), stdout=StringIO())
    return path


def database_restore(path: Path) -> None:
    """What a restore of ``database_dump`` does to the ledger: rows written since are gone."""
    for model in (DeletionEvent, EventBatch, RunBatch, RunLease, Run):
        model.objects.all().delete()
    RetentionRecord.objects.all().delete()
    ChainHead.objects.all().delete()
    call_command("loaddata", str(path), stdout=StringIO())


class RowEvent:
    """One row's event, whatever its shape: a per-row page event's row, or an event.

    Reads as the event it belongs to, with the row's own ``key_digest`` and
    ``expires_at`` (RFC 3339) in place of the page event's.
    """

    def __init__(self, event: DeletionEvent, key_digest: str, expires_at: str) -> None:
        self.event, self.key_digest, self.expires_at = event, key_digest, expires_at

    def __getattr__(self, name: str) -> Any:
        return getattr(self.event, name)


def row_events(events: Any) -> list[RowEvent]:
    """``events`` (a queryset or list) with each per-row page event spread into its rows."""
    from retention.receipts import evidence
    from retention.selectors.evidence import row_subjects

    spread: list[RowEvent] = []
    for event in events:
        subjects = row_subjects(event)
        if subjects:
            spread.extend(RowEvent(event, s.key_digest, s.expires_at) for s in subjects)
        else:
            spread.append(RowEvent(event, event.key_digest, evidence.timestamp(event.expires_at)))
    return spread
