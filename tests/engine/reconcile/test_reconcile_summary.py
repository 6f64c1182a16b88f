"""``retention_reconcile``'s last line says what it did, or would do, about what it
found, with counts, and nothing when it found nothing to act on (issue 30, point 4).

It used to print "Would act on the findings: missing records closed …" after
a dry run that found nothing.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command

from retention.models import RecordState, RetentionRecord
from tests.helpers import enforce, put_tracked

pytestmark = pytest.mark.django_db


def reconcile(*args: str) -> list[str]:
    out = StringIO()
    call_command("retention_reconcile", *args, stdout=out)
    return out.getvalue().splitlines()


def _aged(key: str) -> None:
    """An object written an hour ago: old enough to adopt."""
    storages["default"].save(key, ContentFile(b"x"))
    hour_ago = time.time() - 3600
    os.utime(storages["default"].path(key), (hour_ago, hour_ago))


@pytest.fixture
def in_step(make_policy: Any, now: datetime) -> None:
    """A store whose objects are exactly its live records."""
    make_policy("idv.photo", timedelta(days=30))
    put_tracked(key="acme/a.jpg", now=now)
    put_tracked(key="acme/b.jpg", now=now)


@pytest.mark.parametrize(
    ("args", "last"),
    [
        (("--dry-run",), "No finding to act on: nothing would change."),
        ((), "No finding to act on: nothing changed."),
    ],
)
def test_reconcile_summary__a_store_in_step_with_its_records_acts_on_nothing(
    in_step: None, args: tuple[str, ...], last: str
) -> None:
    lines = reconcile(*args)

    assert lines[-1] == last
    assert not any("Would" in line or "Acted" in line for line in lines)


def test_reconcile_summary__orphans_alone_are_reported_not_acted_on(in_step: None) -> None:
    _aged("acme/untracked.jpg")

    lines = reconcile("--dry-run")

    assert lines[-1] == "No finding to act on (1 orphan reported only): nothing would change."


def test_reconcile_summary__counts_what_a_dry_run_would_do_then_what_the_run_did(
    make_policy: Any, now: datetime
) -> None:
    make_policy("idv.photo", timedelta(days=30))
    vanished = [put_tracked(key=f"acme/v{i}.jpg", now=now) for i in range(2)]
    back = put_tracked(key="acme/back.jpg", now=now - timedelta(days=60))
    assert enforce(now=now).deleted == 1
    for record in vanished:
        storages["default"].delete(record.object_key)
    storages["default"].save(back.object_key, ContentFile(b"x"))

    preview = reconcile("--dry-run")
    acted = reconcile()

    assert preview[-1] == (
        "Would close 2 missing records as not found; queue the 1 reappeared object of "
        "enforced classes for deletion (others: reported)."
    )
    assert acted[-1] == (
        "Acted on the findings: closed 2 missing records as not found; queued the 1 "
        "reappeared object of enforced classes for deletion (others: reported)."
    )
    states = RetentionRecord.objects.values_list("state", flat=True)
    assert sorted(states) == sorted([RecordState.MISSING, RecordState.MISSING, "failed"])


def test_reconcile_summary__adoption_is_counted(make_policy: Any) -> None:
    make_policy("idv.photo", timedelta(days=30))
    _aged("acme/orphan.jpg")

    preview = reconcile("--dry-run", "--adopt", "idv.photo")
    acted = reconcile("--adopt", "idv.photo")

    assert preview[-1] == "Would adopt 1 orphan."
    assert acted[-1] == "Acted on the findings: adopted 1 orphan."
    assert RetentionRecord.objects.get().object_key == "acme/orphan.jpg"
