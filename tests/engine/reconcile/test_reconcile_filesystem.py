"""Reconciliation over a Django storage (the filesystem): each finding, adoption, failures."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, storages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from retention import engine
from retention.exceptions import RunRefused
from retention.models import (
    DeletionEvent,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
)
from tests.helpers import RECONCILE_COUNTS, chain_ok, enforce, exists, put_tracked

pytestmark = pytest.mark.django_db


def _write(key: str, body: bytes = b"x") -> str:
    saved = storages["default"].save(key, ContentFile(body))
    assert saved == key
    return key


@pytest.fixture
def world(make_policy: Any, now: datetime) -> dict[str, RetentionRecord]:
    """Three live records, one deleted by a run, and one untracked object."""
    make_policy("idv.photo", timedelta(days=30))
    old = now - timedelta(days=60)
    records = {
        "kept": put_tracked(key="acme/kept.jpg", now=now),
        "vanished": put_tracked(key="acme/vanished.jpg", now=now),
        "deleted": put_tracked(key="acme/deleted.jpg", now=old),
    }
    run = enforce(now=now)
    assert run.deleted == 1
    records["deleted"].refresh_from_db()
    assert records["deleted"].state == RecordState.DELETED
    storages["default"].delete("acme/vanished.jpg")
    _write("acme/deleted.jpg")  # back, e.g. from a bucket restore
    _write("acme/untracked.jpg")
    return records


def test_reconcile__finds_each_finding_and_acts_on_it(
    world: dict[str, RetentionRecord], now: datetime
) -> None:
    run = engine.reconcile_run(now=now)

    assert run.mode == RunMode.RECONCILE
    assert run.status == RunStatus.FINISHED
    assert run.report["counts"] == {
        "orphans": 1,
        "missing": 1,
        "reappeared": 1,
        "leftover_versions": 0,
        "listed": 3,
        "tracked": 3,
        "adopted": 0,
    }
    assert run.report["storages"]["default"]["orphans"] == 1
    # The report names objects by digest, never by key.
    assert "acme/" not in json.dumps(run.report)
    assert run.report["samples"]["default"]["orphans"][0]["size"] == 1

    vanished = RetentionRecord.objects.get(pk=world["vanished"].pk)
    assert vanished.state == RecordState.MISSING
    assert not vanished.retryable
    assert vanished.deleted_at is None
    missing_event = DeletionEvent.objects.get(record=vanished)
    assert missing_event.outcome == EventOutcome.MISSING
    assert missing_event.run_id == run.pk

    back = RetentionRecord.objects.get(pk=world["deleted"].pk)
    assert back.state == RecordState.FAILED
    assert back.retryable
    assert back.deleted_at is None
    assert back.reappearances == 1
    assert back.reappeared_at == now
    assert DeletionEvent.objects.filter(record=back, outcome=EventOutcome.REAPPEARED).count() == 1
    assert RetentionRecord.objects.get(pk=world["kept"].pk).state == RecordState.ACTIVE
    chain_ok()

    # The next run deletes the object that came back, with an event of its own.
    later = now + timedelta(minutes=1)
    rerun = enforce(now=later)
    assert rerun.deleted == 1
    back.refresh_from_db()
    assert back.state == RecordState.DELETED
    assert not exists(back)
    deletions = DeletionEvent.objects.filter(record=back, outcome=EventOutcome.DELETED)
    assert deletions.count() == 2
    assert len({event.idempotency_key for event in deletions}) == 2
    chain_ok()

    # Now the store and the records agree, but for the untracked object.
    again = engine.reconcile_run(now=later)
    assert {k: again.report["counts"][k] for k in ("missing", "reappeared", "orphans")} == {
        "missing": 0,
        "reappeared": 0,
        "orphans": 1,
    }


def test_reconcile__dry_run_reports_and_changes_nothing(
    world: dict[str, RetentionRecord], now: datetime
) -> None:
    events_before = DeletionEvent.objects.count()

    run = engine.reconcile_run(dry_run=True, now=now)

    assert run.report["dry_run"] is True
    assert run.report["counts"]["missing"] == 1
    assert run.report["counts"]["reappeared"] == 1
    assert DeletionEvent.objects.count() == events_before
    assert RetentionRecord.objects.get(pk=world["vanished"].pk).state == RecordState.ACTIVE
    assert RetentionRecord.objects.get(pk=world["deleted"].pk).state == RecordState.DELETED


def test_reconcile__reappeared_object_of_a_report_only_class_is_only_reported(
    world: dict[str, RetentionRecord], now: datetime
) -> None:
    from retention.models import DataClassMode, Policy

    Policy.objects.filter(data_class="idv.photo").update(mode=DataClassMode.REPORT_ONLY)

    run = engine.reconcile_run(now=now)

    assert run.report["counts"]["reappeared"] == 1
    assert RetentionRecord.objects.get(pk=world["deleted"].pk).state == RecordState.DELETED


def test_reconcile__a_held_reappeared_object_is_not_deleted_by_the_next_run(
    world: dict[str, RetentionRecord], now: datetime, approver: Any
) -> None:
    from retention import api

    api.place_hold(reason="litigation", placed_by=approver, tenant_id="acme", now=now)
    engine.reconcile_run(now=now)

    run = enforce(now=now + timedelta(minutes=1))

    back = RetentionRecord.objects.get(pk=world["deleted"].pk)
    assert back.state == RecordState.FAILED
    assert exists(back)
    assert run.skipped_held >= 1


def test_reconcile__data_class_filter_keeps_other_classes_out(
    world: dict[str, RetentionRecord], make_policy: Any, now: datetime
) -> None:
    make_policy("pod.scan", timedelta(days=30))
    other = put_tracked(data_class="pod.scan", key="acme/scan.pdf", now=now)
    storages["default"].delete("acme/scan.pdf")

    run = engine.reconcile_run(data_classes=["idv.photo"], now=now)

    # Its record is still a record: its object is no orphan, its absence not acted on.
    assert run.report["counts"]["missing"] == 1
    assert run.report["counts"]["tracked"] == 3
    assert RetentionRecord.objects.get(pk=other.pk).state == RecordState.ACTIVE


def test_reconcile__an_empty_prefix_finds_nothing_and_touches_nothing(
    world: dict[str, RetentionRecord], now: datetime
) -> None:
    run = engine.reconcile_run(prefix="nobody/", now=now)

    assert run.status == RunStatus.FINISHED
    assert set(run.report["counts"].values()) == {0}
    assert RetentionRecord.objects.get(pk=world["vanished"].pk).state == RecordState.ACTIVE


def test_reconcile__a_prefix_limits_the_listing_and_the_records(
    world: dict[str, RetentionRecord], now: datetime
) -> None:
    _write("other/loose.txt")

    run = engine.reconcile_run(prefix="other/", now=now)

    assert run.report["counts"]["orphans"] == 1
    assert run.report["counts"]["tracked"] == 0
    assert RetentionRecord.objects.get(pk=world["vanished"].pk).state == RecordState.ACTIVE


def test_reconcile__keys_in_byte_order_merge_without_false_findings(
    make_policy: Any, now: datetime
) -> None:
    make_policy("idv.photo", timedelta(days=30))
    # Orders where a database collation, a directory walk and bytes disagree.
    keys = ["a-b", "a/x", "a/y/z", "a0", "B", "b", "é/1", "e/1", "Z", "a_b", "a.b"]
    for key in keys:
        put_tracked(key=key, now=now)

    run = engine.reconcile_run(now=now)

    counts = run.report["counts"]
    assert (counts["orphans"], counts["missing"], counts["listed"]) == (0, 0, len(keys))


def test_reconcile__adopts_orphans_with_a_tenant_pattern_once(
    make_policy: Any, now: datetime
) -> None:
    make_policy("idv.photo", timedelta(days=30))
    for key in ("acme/a.jpg", "globex/b.jpg", "loose.jpg"):
        _write(key)
    # The objects were written just now (real time): adopt a while later.
    later = timezone.now() + timedelta(days=31)

    preview = engine.reconcile_run(
        adopt="idv.photo", tenant_pattern="{tenant}/{rest}", dry_run=True, now=later
    )
    assert preview.report["counts"]["adopted"] == 2
    assert RetentionRecord.objects.count() == 0

    run = engine.reconcile_run(adopt="idv.photo", tenant_pattern="{tenant}/{rest}", now=later)

    assert run.report["counts"]["adopted"] == 2
    assert run.report["not_adopted"]["default"] == {"no_tenant_match": 1}
    adopted = {r.object_key: r for r in RetentionRecord.objects.all()}
    assert {k: r.tenant_id for k, r in adopted.items()} == {
        "acme/a.jpg": "acme",
        "globex/b.jpg": "globex",
    }
    record = adopted["acme/a.jpg"]
    modified = storages["default"].get_modified_time("acme/a.jpg")
    assert abs((record.created_at - modified).total_seconds()) < 1
    assert record.expires_at == record.created_at + timedelta(days=30)

    second = engine.reconcile_run(adopt="idv.photo", tenant_pattern="{tenant}/{rest}", now=later)
    assert second.report["counts"]["adopted"] == 0
    assert second.report["counts"]["orphans"] == 1
    assert RetentionRecord.objects.count() == 2

    # Old enough: eligible at once.
    swept = enforce(now=later)
    assert swept.deleted == 2
    assert not storages["default"].exists("acme/a.jpg")
    assert storages["default"].exists("loose.jpg")


def test_reconcile__adopts_without_a_pattern_under_no_tenant_and_skips_recent_objects(
    make_policy: Any,
) -> None:
    make_policy("idv.photo", timedelta(days=30), at=timezone.now() - timedelta(days=1))
    _write("loose.jpg")

    fresh = engine.reconcile_run(adopt="idv.photo", now=timezone.now())
    assert fresh.report["counts"]["adopted"] == 0
    assert fresh.report["not_adopted"]["default"] == {"recent": 1}

    run = engine.reconcile_run(adopt="idv.photo", now=timezone.now() + timedelta(hours=1))

    assert run.report["counts"]["adopted"] == 1
    assert RetentionRecord.objects.get().tenant_id == ""


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"data_classes": ["nope"]}, "bad_arguments"),
        ({"adopt": "nope"}, "bad_arguments"),
        ({"adopt": "idv.photo", "tenant_pattern": "no-placeholder"}, "bad_arguments"),
        ({"adopt": "idv.photo", "tenant_pattern": "{tenant}/{tenant}"}, "bad_arguments"),
        ({"tenant_pattern": "{tenant}/{rest}"}, "bad_arguments"),
        ({"storages": ["no-such-alias"]}, "bad_arguments"),
    ],
)
def test_reconcile__bad_arguments_are_refused_in_the_ledger(
    make_policy: Any, now: datetime, options: dict[str, Any], reason: str
) -> None:
    make_policy("idv.photo", timedelta(days=30))

    with pytest.raises(RunRefused) as refused:
        engine.reconcile_run(now=now, **options)

    assert refused.value.reason == reason
    run = Run.objects.get(pk=refused.value.run_id)
    assert run.status == RunStatus.REFUSED


def test_reconcile__an_unusable_store_is_refused_and_nothing_changes(
    world: dict[str, RetentionRecord], now: datetime, settings: Any, tmp_path: Any
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(blocker / "media")},
        },
    }

    with pytest.raises(RunRefused) as refused:
        engine.reconcile_run(now=now)

    assert refused.value.reason == "storage_unavailable"
    assert RetentionRecord.objects.get(pk=world["vanished"].pk).state == RecordState.ACTIVE


class FailingHalfway(FileSystemStorage):
    """Lists the top directory, then fails on the first subdirectory."""

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        if path:
            raise OSError(5, "Input/output error")
        return super().listdir(path)


def test_reconcile__a_listing_that_fails_halfway_ends_error_and_acts_on_nothing(
    world: dict[str, RetentionRecord], now: datetime, settings: Any
) -> None:
    location = storages["default"].location
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": f"{__name__}.FailingHalfway",
            "OPTIONS": {"location": location},
        },
    }
    _write("0-first.txt")
    events_before = DeletionEvent.objects.count()

    run = engine.reconcile_run(now=now)

    assert run.status == RunStatus.ERROR
    assert "listing failed" in run.status_reason
    assert "acme" not in run.status_reason
    assert DeletionEvent.objects.count() == events_before
    assert RetentionRecord.objects.get(pk=world["vanished"].pk).state == RecordState.ACTIVE
    assert RetentionRecord.objects.get(pk=world["deleted"].pk).state == RecordState.DELETED


def test_retention_reconcile__json_prints_the_run_and_exactly_its_counts(
    world: dict[str, RetentionRecord],
) -> None:
    out = StringIO()

    call_command("retention_reconcile", "--json", stdout=out)

    payload = json.loads(out.getvalue())
    assert set(payload) == {"run_id", "mode", "status", "counts"}
    assert payload["mode"] == "reconcile"
    assert payload["status"] == "finished"
    assert set(payload["counts"]) == set(RECONCILE_COUNTS)
    assert payload["counts"]["orphans"] == 1
    assert Run.objects.get(pk=payload["run_id"]).mode == RunMode.RECONCILE


def test_retention_reconcile__human_output_and_refusal(world: dict[str, RetentionRecord]) -> None:
    out = StringIO()
    call_command("retention_reconcile", "--dry-run", stdout=out)
    assert "default: orphans 1, missing 1, reappeared 1" in out.getvalue()

    with pytest.raises(CommandError, match="refused \\(bad_arguments\\)"):
        call_command("retention_reconcile", "--data-class", "nope", stdout=StringIO())
    with pytest.raises(CommandError, match="--adopt"):
        call_command("retention_reconcile", "--tenant-pattern", "{tenant}/{rest}")


def test_reconcile__by_default_skips_a_storage_alias_no_longer_configured(
    world: dict[str, RetentionRecord], now: datetime
) -> None:
    RetentionRecord.objects.filter(pk=world["kept"].pk).update(storage="retired")

    run = engine.reconcile_run(now=now)

    assert run.status == RunStatus.FINISHED
    assert set(run.report["storages"]) == {"default"}
    assert RetentionRecord.objects.get(pk=world["kept"].pk).state == RecordState.ACTIVE


def test_reconcile__a_store_failing_while_findings_are_acted_on_ends_error(
    world: dict[str, RetentionRecord], now: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retention.engine.reconcile import act
    from retention.storage.listing import ListingFailed

    def unreachable(adapter: Any, key: str) -> bool:
        raise ListingFailed("storage 'default': could not look at an object (OSError)")

    monkeypatch.setattr(act, "object_present", unreachable)

    run = engine.reconcile_run(now=now)

    assert run.status == RunStatus.ERROR
    assert run.status_reason.startswith("acting on the findings stopped")
    assert RetentionRecord.objects.get(pk=world["vanished"].pk).state == RecordState.ACTIVE


def test_reconcile__an_unexpected_error_closes_the_run_naming_no_key(
    world: dict[str, RetentionRecord],
    now: datetime,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from retention.engine.reconcile import run as reconcile

    def quoting_a_key(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("duplicate key (default, acme/kept.jpg)")

    monkeypatch.setattr(reconcile, "findings_act", quoting_a_key)

    with pytest.raises(RuntimeError):
        engine.reconcile_run(now=now)

    run = Run.objects.get(mode=RunMode.RECONCILE)
    assert (run.status, run.status_reason) == (RunStatus.ERROR, "unexpected RuntimeError")
    assert f"reconciliation {run.pk} failed: RuntimeError" in caplog.text
    assert "acme" not in caplog.text
