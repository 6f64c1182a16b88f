"""The erasure journal and its replay after a restore (issue 29, point 6).

A completed request is journaled outside the database, signed, with the
subject's id; the database then forgets the id. A replay re-executes what
the database does not know as completed, touching only data written at or
before the original request, and running it twice changes nothing.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from retention.chain.erasure_journal import (
    JOURNAL_DIR,
    certificate_sha256,
    journal_entry,
    journal_name,
    journal_read,
)
from retention.engine.erasure import erasures_execute
from retention.engine.erasure_replay import erasures_replay
from retention.models import ErasureRequest, ErasureState, RecordState, RetentionRecord
from retention.selectors.anchors import signing_key as configured_signer
from retention.selectors.erasure import Subject, erasure_scope
from tests.engine.erasure.conftest import track

pytestmark = pytest.mark.django_db


def _trusted() -> dict[str, bytes]:
    signer = configured_signer()
    assert signer is not None
    return {signer.key_id: signer.public_key}


def test_journal__a_completed_request_is_written_signed_and_the_database_forgets_its_id(
    host, approved, anchors, now, django_capture_on_commit_callbacks
):
    request = approved()

    with django_capture_on_commit_callbacks(execute=True):
        erasures_execute(clock=lambda: now + timedelta(minutes=5))

    read = journal_read(store=anchors, public_keys=_trusted())
    assert read.problems == []
    (entry,) = read.entries
    assert anchors.names(JOURNAL_DIR) == [journal_name(request.pk)]
    assert (entry["request"], entry["subject_id"]) == (str(request.pk), "ann@x.test")
    assert entry["data_classes"] == ["accounts.redact", "idv.photo"]
    assert entry["counts"]["idv.photo"] == {"erased": 4, "redacted": 0}
    request.refresh_from_db()
    assert request.certificate is not None
    assert entry["certificate_sha256"] == certificate_sha256(request.certificate)
    assert (request.subject_id, request.journaled_at) == ("", now + timedelta(minutes=5))
    assert request.subject_digest  # the digest stays


def test_journal__an_entry_changed_in_the_store_is_refused(host, approved, anchors, now, tmp_path):
    request = approved()
    signer = configured_signer()
    assert signer is not None
    entry = journal_entry(request, signer)
    entry["subject_id"] = "mallory@x.test"
    target = tmp_path / "anchors" / journal_name(request.pk)
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(entry))

    read = journal_read(store=anchors, public_keys=_trusted())

    assert read.entries == []
    assert read.problems == [
        f"{journal_name(request.pk)}: bad signature: the statement is not what the key signed"
    ]


def _entry_for(subject: str, *, received_at: Any, classes: list[str]) -> dict[str, Any]:
    """A journal entry of a request this database never saw (as after a restore)."""
    from retention.digest import subject_digest

    who = Subject(subject_id=subject, subject_digest=subject_digest(subject), tenant_id="")
    request = ErasureRequest(
        id=uuid.uuid4(),
        state=ErasureState.COMPLETED,
        subject_id=subject,
        subject_digest=who.subject_digest,
        received_at=received_at,
        approved_at=received_at,
        completed_at=received_at + timedelta(hours=1),
        scope=erasure_scope(who, classes),
    )
    signer = configured_signer()
    assert signer is not None
    return journal_entry(request, signer)


def test_replay__an_entry_the_database_lacks_is_executed_on_data_written_by_then_only(
    host, anchors, now
):
    before = track("acme/carl-1.jpg", "carl@x.test", now=now)
    after = track("acme/carl-2.jpg", "carl@x.test", now=now + timedelta(hours=2))
    entry = _entry_for("carl@x.test", received_at=now + timedelta(hours=1), classes=["idv.photo"])
    # The journaled bound reaches both records' ids: the time keeps the later one out.
    assert entry["bounds"]["idv.photo"]["max_record_id"] >= after.pk

    dry = erasures_replay(entries=[entry], clock=lambda: now + timedelta(days=1), dry_run=True)
    assert [(r.action, r.items) for r in dry] == [("would replay", 1)]
    assert not ErasureRequest.objects.filter(pk=entry["request"]).exists()

    (done,) = erasures_replay(entries=[entry], clock=lambda: now + timedelta(days=1))

    assert (done.action, done.items) == ("replayed", 1)
    assert RetentionRecord.objects.get(pk=before.pk).state == RecordState.DELETED
    assert RetentionRecord.objects.get(pk=after.pk).state == RecordState.ACTIVE
    replayed = ErasureRequest.objects.get(pk=entry["request"])
    assert (replayed.state, replayed.replayed_at) == (
        ErasureState.COMPLETED,
        now + timedelta(days=1),
    )
    assert replayed.runs.count() == 1

    again = erasures_replay(entries=[entry], clock=lambda: now + timedelta(days=2))
    assert [r.action for r in again] == ["completed already"]
    assert replayed.runs.count() == 1


def test_verify_anchors__reports_a_journaled_erasure_the_database_lacks(
    host, anchors, now, settings
):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    entry = _entry_for("carl@x.test", received_at=now, classes=["idv.photo"])
    target = Path(settings.RETENTION_EVIDENCE_ANCHOR) / journal_name(entry["request"])
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(entry))
    out, err = StringIO(), StringIO()

    with pytest.raises(CommandError, match=f"journaled erasure {entry['request']}"):
        call_command("retention_verify", "--anchors", stdout=out, stderr=err)

    assert "Checked 1 journaled erasure(s): 1 missing here." in out.getvalue()
    assert "run `manage.py retention_erasure replay`" in err.getvalue()

    erasures_replay(entries=[entry], clock=lambda: now + timedelta(days=1))
    out = StringIO()
    call_command("retention_verify", "--anchors", stdout=out, stderr=StringIO())
    assert "Checked 1 journaled erasure(s): all completed in this database." in out.getvalue()


def test_replay_command__after_a_key_rotation_trusts_the_old_key_given(
    host, anchors, now, settings
):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from tests.anchoring.helpers import new_key

    old = configured_signer()
    assert old is not None
    entry = _entry_for("carl@x.test", received_at=now, classes=["idv.photo"])
    target = Path(settings.RETENTION_EVIDENCE_ANCHOR) / journal_name(entry["request"])
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(entry))
    settings.RETENTION_SIGNING_KEY = new_key()[0]
    err = StringIO()

    with pytest.raises(CommandError, match="1 journaled erasure"):
        call_command("retention_erasure", "replay", stdout=StringIO(), stderr=err)
    assert f"signed by key {old.key_id}, which is not a trusted key" in err.getvalue()

    out = StringIO()
    call_command(
        "retention_erasure",
        "replay",
        "--public-key",
        old.public_key_b64,
        stdout=out,
        stderr=StringIO(),
    )
    assert f"{entry['request']}: replayed" in out.getvalue()


def test_journal__a_partially_completed_request_is_journaled_then_completed(
    host, approved, anchors, author, now, django_capture_on_commit_callbacks
):
    from retention import api

    hold = api.place_hold(reason="Litigation", placed_by=author, record=host["photos"][0], now=now)
    request = approved()
    with django_capture_on_commit_callbacks(execute=True):
        erasures_execute(clock=lambda: now + timedelta(minutes=5))

    request.refresh_from_db()
    assert request.state == ErasureState.PARTIALLY_COMPLETED
    assert anchors.names(JOURNAL_DIR) == [journal_name(request.pk, partial=True)]
    (partial,) = journal_read(store=anchors, public_keys=_trusted()).entries
    assert (partial["state"], partial["counts"]["idv.photo"]["erased"]) == (
        "partially_completed",
        3,
    )
    # It resumes by the subject's id: the database keeps it until it completes.
    assert request.subject_id == "ann@x.test"

    api.release_hold(hold, released_by=author, reason="settled", now=now + timedelta(days=1))
    with django_capture_on_commit_callbacks(execute=True):
        erasures_execute(clock=lambda: now + timedelta(days=1, minutes=1))

    read = journal_read(store=anchors, public_keys=_trusted())
    assert sorted(anchors.names(JOURNAL_DIR)) == sorted(
        [journal_name(request.pk), journal_name(request.pk, partial=True)]
    )
    (entry,) = read.entries  # the completed one stands for the request
    assert entry["state"] == "completed"
    request.refresh_from_db()
    assert request.subject_id == ""
