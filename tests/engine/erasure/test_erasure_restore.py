"""A database restored from a dump taken before an erasure: the journal erases again
(issue 29, point 6).

Real PostgreSQL tools: ``pg_dump`` before the request, ``pg_restore --clean``
after it completed (the files come back too, as from the bucket's backup).
``retention_erasure replay`` then erases the subject again through the
engine; what another subject wrote after the restore is untouched, the chain
verifies, and a second replay changes nothing.
"""

from __future__ import annotations

import subprocess
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from retention import api
from retention.engine.erasure import erasures_execute
from retention.models import ErasureRequest, ErasureState, RecordState, RetentionRecord, Run
from tests.engine.erasure.conftest import track
from tests.rowhost.models import Account

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _pg(tool: str, *args: str) -> None:
    db = connection.settings_dict
    done = subprocess.run(
        [
            tool,
            "-h",
            db["HOST"] or "127.0.0.1",
            "-p",
            str(db["PORT"] or 5432),
            "-U",
            db["USER"] or "postgres",
            "-d",
            db["NAME"],
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _states(records: list[RetentionRecord]) -> set[str]:
    return set(
        RetentionRecord.objects.filter(pk__in=[r.pk for r in records]).values_list(
            "state", flat=True
        )
    )


def _call(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_restore__the_journal_erases_the_subject_again_and_leaves_later_data_alone(
    host: dict[str, Any], requester: Any, erasure_approver: Any, anchors: Any, tmp_path: Path
) -> None:
    dump = tmp_path / "before-the-erasure.dump"
    _pg("pg_dump", "--format=custom", f"--file={dump}")
    photos, (ann, bob) = host["photos"], host["accounts"]
    # On the real clock: the photos were tracked on it, before the request.
    now = timezone.now()
    # Between the dump and the request: their record ids are handed out again
    # after the restore, to data written after the request.
    track("acme/eve.jpg", "eve@x.test", now=now - timedelta(minutes=2))
    track("acme/ann-mid.jpg", "ann@x.test", now=now - timedelta(minutes=1))
    request = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="ann@x.test", now=now
    )
    api.approve_erasure(request, approver=erasure_approver, now=now)
    erasures_execute(clock=lambda: now + timedelta(minutes=5))
    request.refresh_from_db()
    assert (request.state, request.journaled_at is not None) == (ErasureState.COMPLETED, True)

    # The restore: the database as it was before the request, and the files with it.
    connection.close()
    _pg("pg_restore", "--clean", "--if-exists", "--no-owner", str(dump))
    for photo in photos:
        storages["default"].save(photo.object_key, ContentFile(b"x"))
    assert not ErasureRequest.objects.exists()
    assert _states(photos) == {RecordState.ACTIVE}
    assert Account.objects.get(pk=ann.pk).name == "Ann"
    # Written after the restore: another subject's photo and account (keys handed
    # out again by the restored sequences), and a photo of Ann's uploaded anew.
    later = now + timedelta(days=1)
    carl = track("acme/carl.jpg", "carl@x.test", now=later)
    anns_new = track("acme/ann-new.jpg", "ann@x.test", now=later)
    (photo_scope,) = [c for c in request.scope["classes"] if c["data_class"] == "idv.photo"]
    assert anns_new.pk <= photo_scope["bound"]["max_record_id"]
    dave = Account.objects.create(tenant_id="acme", name="Dave", email="dave@x.test")

    replayed = _call("retention_erasure", "replay")

    assert f"{request.pk}: replayed (now completed" in replayed
    assert "Replayed 1 of 1 journaled erasure(s)" in replayed
    assert _states(photos) == {RecordState.DELETED}
    assert not any(storages["default"].exists(p.object_key) for p in photos)
    assert Account.objects.get(pk=ann.pk).name == "[redacted]"
    assert _states([carl, anns_new, host["bob"]]) == {RecordState.ACTIVE}
    assert storages["default"].exists(carl.object_key)
    assert (Account.objects.get(pk=dave.pk).name, Account.objects.get(pk=bob.pk).name) == (
        "Dave",
        "Bob",
    )
    again = ErasureRequest.objects.get(pk=request.pk)
    assert (again.state, again.replayed_at is not None) == (ErasureState.COMPLETED, True)
    assert "Chain intact." in _call("retention_verify")

    twice = _call("retention_erasure", "replay")
    assert f"{request.pk}: completed already" in twice
    assert Run.objects.filter(erasure=request).count() == 1
