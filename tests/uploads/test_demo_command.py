"""`make demo` end to end: seed, dry run, enable, enforce, report.

Uploads (tracked files) and the host's own tables registered as data classes:
request logs deleted after 30 days, closed customer accounts redacted after 90.
"""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.storage import storages
from django.core.management import CommandError, call_command

from retention.models import (
    DeletionEvent,
    EventKind,
    EventOutcome,
    LegalHold,
    Policy,
    RecordState,
    Run,
    RunMode,
)
from tests.helpers import row_events
from uploads.models import ApiRequestLog, CustomerAccount, Upload

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
    assert (
        DeletionEvent.objects.filter(kind=EventKind.OBJECT, outcome=EventOutcome.DELETED).count()
        == 4
    )

    modes = dict(Policy.objects.values_list("data_class", "mode"))
    assert modes == {
        "idv.photo": "enforce",
        "pod.scan": "enforce",
        "logs.integration": "report_only",
        "logs.api_request": "enforce",
        "customers.closed": "enforce",
    }
    dry_run = Run.objects.get(mode=RunMode.DRY_RUN)
    assert dry_run.reviewed_by is not None
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
    hold = LegalHold.objects.get(data_class="pod.scan")
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


def _run(mode: str) -> Run:
    return Run.objects.get(mode=mode)


def test_demo__request_logs_older_than_30_days_are_deleted_with_page_evidence(
    demo: dict[str, str],
) -> None:
    enforce = _run(RunMode.ENFORCE)
    cutoff = enforce.started_at - timedelta(days=30)

    assert not ApiRequestLog.objects.filter(created_at__lte=cutoff).exists()
    assert ApiRequestLog.objects.count() == 150
    events = DeletionEvent.objects.filter(
        data_class="logs.api_request", outcome=EventOutcome.DELETED
    )
    # evidence="per_batch": a page event per tenant, with its row count.
    assert sum(e.row_count or 0 for e in events) == 150
    assert {e.kind for e in events} == {EventKind.ROW}
    assert events.count() < 150


def test_demo__closed_accounts_past_90_days_are_redacted_and_the_rest_untouched(
    demo: dict[str, str],
) -> None:
    accounts = {a.pk: a for a in CustomerAccount.objects.all()}
    assert len(accounts) == 20  # redaction keeps every row
    hold = LegalHold.objects.get(subject_pk__isnull=False)
    held = accounts[int(hold.subject_pk or 0)]
    redacted = [a for a in accounts.values() if a.name == "[redacted]"]

    assert len(redacted) == 7
    for account in redacted:
        assert account.closed_at is not None
        assert account.closed_at < _run(RunMode.ENFORCE).started_at - timedelta(days=90)
        assert "@" not in account.email
        assert len(account.email) == 64  # Digest(): hex HMAC, distinct per email
        assert account.phone[:-2].strip("*") == ""
        assert account.phone[-2:].isdigit()
    assert held.name == "Ken Thompson"
    assert held.email == "ken.thompson@globex.example"
    untouched = [a for a in accounts.values() if a not in redacted]
    assert len(untouched) == 13
    for account in untouched:
        assert (
            account.email == f"{account.name.lower().replace(' ', '.')}@{account.tenant_id}.example"
        )
        assert "*" not in account.phone
    # One event per account (per-row evidence: each a row of its page event).
    redactions = DeletionEvent.objects.filter(
        data_class="customers.closed", outcome=EventOutcome.REDACTED
    )
    assert len(row_events(redactions)) == 7
    skips = DeletionEvent.objects.filter(
        data_class="customers.closed", outcome=EventOutcome.SKIPPED_HELD
    )
    assert len(row_events(skips)) == 1
    enforce = _run(RunMode.ENFORCE)
    assert (enforce.redacted, enforce.skipped_protected) == (7, 0)


def test_demo__the_dry_run_and_the_enable_step_show_both_row_classes(
    demo: dict[str, str],
) -> None:
    report = _run(RunMode.DRY_RUN).report["per_data_class"]

    logs, accounts = report["logs.api_request"], report["customers.closed"]
    assert (logs["kind"], logs["model"], logs["disposition"]) == (
        "rows",
        "uploads.ApiRequestLog",
        "delete",
    )
    assert (logs["eligible"], logs["held"], logs["protected"]) == (150, 0, 0)
    assert logs["related"]["deletes"] == {}
    assert (accounts["model"], accounts["disposition"]) == ("uploads.CustomerAccount", "redact")
    assert (accounts["eligible"], accounts["held"]) == (7, 1)
    assert "logs.api_request (rows of uploads.ApiRequestLog): would delete 150" in demo["dry_run"]
    assert "customers.closed (rows of uploads.CustomerAccount): would redact 7" in demo["dry_run"]
    assert "logs.api_request: 300 request logs over the last 60 days" in demo["seed"]
    assert "customers.closed: 20 customer accounts" in demo["seed"]
    assert (
        "customers.closed: enforced (rows of uploads.CustomerAccount past their period are "
        "redacted; the dry run: 7 to redact, 1 under legal hold)"
    ) in demo["enable"]
    assert "the dry run: 150 to delete, 0 under legal hold, taking no related row" in demo["enable"]


def test_demo__the_report_explains_every_row_and_its_check_passes(demo: dict[str, str]) -> None:
    report = demo["report"]
    lines = report.splitlines()

    assert "  Deleted 150 row(s) created at or before " in report
    assert "  Kept 150 row(s) (acme 100, globex 50) created " in report
    assert sum("redacted (closed 120 days ago)" in ln for ln in lines) == 7
    hold = LegalHold.objects.get(subject_pk__isnull=False)
    assert [ln for ln in lines if ln.startswith("  Ken Thompson ")] == [
        f"  Ken Thompson       globex  closed {_closed('Ken Thompson')}  "
        f"kept: under legal hold #{hold.pk} (Chargeback dispute 2026-031)"
    ]
    assert sum("kept: closed 30 days ago, redacted in 60 days" in ln for ln in lines) == 6
    assert sum("kept: the account is open" in ln for ln in lines) == 6
    assert (
        "Totals: redacted 7, kept 13 (under legal hold 1, closed less than 90 days ago 6, "
        "open 6); 7 redaction event(s) in the evidence."
    ) in report
    assert "Check: no request log created at or before the cutoff " in report
    assert "150 deleted, each in the evidence, and 150 kept make the 300 seeded." in report
    assert "Check: the 7 account(s) closed at or before the cutoff " in report
    assert "the other 13 are as seeded." in report
    # A redacted row's values are gone from the output too, not only from the table.
    assert "ada.lovelace@acme.example" not in report
    assert "Ada Lovelace" not in report


def _closed(name: str) -> str:
    account = CustomerAccount.objects.get(email=f"{name.lower().replace(' ', '.')}@globex.example")
    assert account.closed_at is not None
    return f"{account.closed_at:%Y-%m-%d}"


def test_report__fails_when_an_old_request_log_remains(demo: dict[str, str]) -> None:
    old = ApiRequestLog.objects.order_by("created_at").first()
    assert old is not None
    ApiRequestLog.objects.create(
        tenant_id="acme",
        method="GET",
        path="/api/v1/orders/1",
        status=200,
        duration_ms=10,
        created_at=old.created_at - timedelta(days=20),
    )
    err = StringIO()

    with pytest.raises(CommandError, match=r"request logs \(logs\.api_request\) disagree"):
        call_command("lethe_demo", "report", stdout=StringIO(), stderr=err)
    assert "1 request log(s) created at or before the cutoff" in err.getvalue()
    assert "1 unaccounted for" in err.getvalue()


def test_report__fails_when_a_due_account_is_not_redacted_or_a_kept_one_changed(
    demo: dict[str, str],
) -> None:
    redacted = CustomerAccount.objects.filter(name="[redacted]").order_by("pk").first()
    assert redacted is not None
    CustomerAccount.objects.filter(pk=redacted.pk).update(
        name="Ada Lovelace", email="ada@acme.example"
    )
    CustomerAccount.objects.filter(name="Alan Kay").update(phone="+1 000 000 0000")
    err = StringIO()

    with pytest.raises(CommandError, match=r"customer accounts \(customers\.closed\) disagree"):
        call_command("lethe_demo", "report", stdout=StringIO(), stderr=err)
    problems = err.getvalue()
    assert f"account {redacted.pk} (acme): closed " in problems
    assert "but its name and email are not redacted" in problems
    assert "kept: the account is open, but it is not as seeded" in problems
    assert "6 account(s) are redacted, but the evidence records 7 redaction(s)" in problems


def test_demo__erasures_one_completed_one_kept_under_holds_both_certificates_verify(
    demo: dict[str, str], tmp_path, capsys
) -> None:
    from retention.models import ErasureRequest, ErasureState
    from retention.receipts.cli import main as receipts

    ritchie = CustomerAccount.objects.get(name="Dennis Ritchie").pk
    erase = _call("lethe_demo", "erase")
    ran = _call("run_retention", "--erasures")
    printed = _call("lethe_demo", "certificates", "--out", str(tmp_path))

    assert "alice filed, bob approved the erasure of Dennis Ritchie" in erase
    assert ran.count("finished") == 2
    subject = ErasureRequest.objects.exclude(subject_digest="").get()
    tenant = ErasureRequest.objects.get(tenant_id="globex")
    assert (subject.state, tenant.state) == (
        ErasureState.COMPLETED,
        ErasureState.PARTIALLY_COMPLETED,
    )
    assert CustomerAccount.objects.get(pk=ritchie).name == "[redacted]"
    assert "Erasure of Dennis Ritchie: completed." in printed
    assert re.search(
        r"pod\.scan: 2 kept under hold #\d+ \(Litigation 2026-114: globex v\. acme\)", printed
    )
    # Globex's account under the chargeback hold is untouched.
    assert CustomerAccount.objects.filter(tenant_id="globex", name="Ken Thompson").exists()
    files = sorted(tmp_path.glob("certificate-*.json"))
    assert len(files) == 2
    capsys.readouterr()
    assert [receipts(["verify", str(f)]) for f in files] == [0, 0]
    assert capsys.readouterr().out.count("VERIFIED: erasure request") == 2
