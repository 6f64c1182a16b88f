"""`make demo` end to end: seed, dry run, enable, enforce, report."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.files.storage import storages
from django.core.management import CommandError, call_command

from retention.models import (
    DeletionEvent,
    EventOutcome,
    LegalHold,
    Policy,
    RecordState,
    Run,
    RunMode,
)
from uploads.models import Upload

pytestmark = pytest.mark.django_db


def _call(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _upload(name: str, tenant: str, *, index: int = 0) -> Upload:
    """The ``index``-th upload of that name and tenant, oldest first."""
    return list(
        Upload.objects.filter(original_name=name, tenant_id=tenant)
        .select_related("retention_record")
        .order_by("created_at")
    )[index]


def _has_file(upload: Upload) -> bool:
    return storages[upload.storage].exists(upload.object_key)


@pytest.fixture
def demo() -> dict[str, str]:
    outputs = {"seed": _call("lethe_demo", "seed")}
    outputs["dry_run"] = _call("run_retention", "--dry-run")
    outputs["enable"] = _call("lethe_demo", "enable")
    outputs["enforce"] = _call("run_retention")
    outputs["report"] = _call("lethe_demo", "report")
    return outputs


def test_demo_fates(demo: dict[str, str]) -> None:
    deleted = [
        _upload("passport.jpg", "acme", index=0),  # old generation
        _upload("selfie.jpg", "acme"),
        _upload("driving-licence.jpg", "globex"),
        _upload("delivery-0816.pdf", "acme"),
    ]
    for upload in deleted:
        assert upload.retention_record.state == RecordState.DELETED, upload
        assert not _has_file(upload), upload

    absent = _upload("delivery-0815.pdf", "acme")
    assert absent.retention_record.state == RecordState.DELETED
    absent_events = DeletionEvent.objects.filter(outcome=EventOutcome.ALREADY_ABSENT)
    assert [e.record_id for e in absent_events] == [absent.retention_record_id]

    kept = {
        "new generation": _upload("passport.jpg", "acme", index=1),
        "renewed": _upload("selfie.jpg", "globex"),
        "held": _upload("delivery-4711.pdf", "globex"),
        "report-only": _upload("erp-sync-0301.log", "acme"),
        "young": _upload("delivery-0901.pdf", "acme"),
    }
    for label, upload in kept.items():
        assert upload.retention_record.state == RecordState.ACTIVE, label
        assert _has_file(upload), label
    assert kept["renewed"].retention_record.renewed_at is not None
    assert DeletionEvent.objects.filter(
        record=kept["held"].retention_record, outcome=EventOutcome.SKIPPED_HELD
    ).exists()
    # Everything still tracked has its file; nothing else was deleted.
    assert Upload.objects.filter(retention_record__state=RecordState.DELETED).count() == 5
    assert DeletionEvent.objects.filter(outcome=EventOutcome.DELETED).count() == 4

    modes = dict(Policy.objects.values_list("data_class", "mode"))
    assert modes == {
        "idv.photo": "enforce",
        "pod.scan": "enforce",
        "logs.integration": "report_only",
    }
    dry_run = Run.objects.get(mode=RunMode.DRY_RUN)
    assert dry_run.reviewed_by.username == "bob"
    assert str(dry_run.pk) in demo["enable"]


def test_demo_report_lines(demo: dict[str, str]) -> None:
    report = demo["report"]
    lines = report.splitlines()

    def line_for(name: str, tenant: str) -> list[str]:
        return [ln for ln in lines if f" {name} " in ln and f" {tenant} " in ln]

    passports = line_for("passport.jpg", "acme")
    assert len(passports) == 2
    assert "deleted at " in passports[0]
    assert "policy idv.photo v1" in passports[0]
    assert "kept: expires in 25 days" in passports[1]
    assert "kept: renewed on " in line_for("selfie.jpg", "globex")[0]
    hold = LegalHold.objects.get()
    assert (
        f"kept: under legal hold #{hold.pk} (Litigation 2026-114: globex v. acme)"
        in line_for("delivery-4711.pdf", "globex")[0]
    )
    assert "already absent, recorded at " in line_for("delivery-0815.pdf", "acme")[0]
    assert (
        "kept: data class logs.integration is report-only"
        in line_for("erp-sync-0301.log", "acme")[0]
    )
    assert "Totals: deleted 4, already absent 1, kept 9." in report
    assert "storage agrees with the ledger" in report
    # No object key is ever printed.
    for upload in Upload.objects.all():
        for output in demo.values():
            assert upload.object_key not in output
    assert "would delete" in demo["dry_run"]
    assert "logs.integration: stays report-only" in demo["enable"]


def test_seed_refuses_existing_data(demo: dict[str, str]) -> None:
    with pytest.raises(CommandError, match="already holds demo data"):
        _call("lethe_demo", "seed")


def test_enable_needs_the_dry_run() -> None:
    _call("lethe_demo", "seed")
    with pytest.raises(CommandError, match="needs a dry run"):
        _call("lethe_demo", "enable")


def test_report_fails_when_storage_disagrees(demo: dict[str, str]) -> None:
    kept = _upload("passport.jpg", "acme", index=1)
    storages[kept.storage].delete(kept.object_key)
    err = StringIO()
    with pytest.raises(CommandError, match=str(kept.pk)):
        call_command("lethe_demo", "report", stdout=StringIO(), stderr=err)
    assert "file is missing" in err.getvalue()
