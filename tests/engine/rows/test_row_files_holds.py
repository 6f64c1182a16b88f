"""Files of governed rows that are tracked records: a hold on the record is never missed
(review finding 6).

A row's ``files`` object may also be a tracked record. The page checks the
holds on those records, then deletes the objects over the network, then
closes the records as deleted. A hold placed after that check must either
keep the object (placed before the last look under the records' locks) or,
placed while the object was being deleted, be recorded truthfully: the
record is deleted with the note that the hold came after the re-check,
and only while its row version is still the one read at the re-check, as
tracked objects are (SPEC §2 Disposition).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.files.storage import storages

from retention import api
from retention.engine import run_execute, run_start
from retention.exceptions import RecordBeingDisposed
from retention.models import DeletionEvent, RetentionRecord, Run
from tests.helpers import put_tracked
from tests.rowhost.models import Shipment

pytestmark = pytest.mark.django_db

DATA_CLASS = "pod.shipment"


@pytest.fixture
def shipped(
    register_shipments: Any, make_policy: Any, now: datetime
) -> tuple[RetentionRecord, Any]:
    """A due shipment whose proof is also a tracked record (of a class kept ten years)."""
    register_shipments(data_class=DATA_CLASS)
    make_policy(DATA_CLASS, timedelta(days=30))
    make_policy("idv.photo", timedelta(days=3650))
    old = now - timedelta(days=40)
    tracked = put_tracked(now=old, key="proofs/tracked.pdf")
    row = Shipment.objects.create(tenant_id="t1", proof=tracked.object_key, delivered_at=old)
    return tracked, row


def _enforce(now: datetime) -> Run:
    run = run_start(mode="enforce", data_classes=[DATA_CLASS], now=now)
    return run_execute(run=run, clock=lambda: now)


def _while_deleting(monkeypatch: pytest.MonkeyPatch, act: Any) -> None:
    """``act()`` runs while the store deletes an object (after the last look)."""
    storage_class = type(storages["default"])
    real = storage_class.delete

    def delete(self: Any, name: str) -> None:
        act()
        real(self, name)

    monkeypatch.setattr(storage_class, "delete", delete)


def test_row_files__a_hold_placed_after_the_check_keeps_the_object_its_record_and_the_row(
    shipped, author, now, monkeypatch
):
    from retention.engine.rows import page

    tracked, row = shipped
    check = page.held_file_rows

    def check_then_hold(**kwargs: Any) -> set[Any]:
        found = check(**kwargs)
        api.place_hold(reason="claim 9", placed_by=author, record=tracked, now=now)
        return found

    monkeypatch.setattr(page, "held_file_rows", check_then_hold)

    run = _enforce(now)

    assert storages["default"].exists(tracked.object_key)
    tracked.refresh_from_db()
    assert tracked.state == "active"
    assert list(Shipment.objects.values_list("pk", flat=True)) == [row.pk]
    assert not DeletionEvent.objects.filter(record=tracked, run=run, outcome="deleted").exists()


def test_row_files__a_hold_placed_while_the_object_is_deleted_is_recorded_with_the_delete(
    shipped, author, now, monkeypatch
):
    tracked, _row = shipped
    holds: list[Any] = []
    _while_deleting(
        monkeypatch,
        lambda: holds.append(
            api.place_hold(reason="claim 9", placed_by=author, record=tracked, now=now)
        ),
    )

    run = _enforce(now)

    assert not storages["default"].exists(tracked.object_key)
    tracked.refresh_from_db()
    assert tracked.state == "deleted"
    event = DeletionEvent.objects.get(record=tracked, run=run)
    assert event.outcome == "deleted"
    assert f"hold #{holds[0].pk} placed after the re-check" in event.reason
    assert not Shipment.objects.exists()


def test_row_files__a_renewal_while_the_object_is_deleted_is_refused(shipped, now, monkeypatch):
    tracked, _row = shipped
    answers: list[str] = []

    def renew() -> None:
        try:
            api.renew(RetentionRecord.objects.get(pk=tracked.pk), now=now)
            answers.append("renewed")
        except RecordBeingDisposed:
            answers.append("refused")

    _while_deleting(monkeypatch, renew)

    _enforce(now)

    # The object is gone: telling the host it was renewed would be a lie.
    assert answers == ["refused"]
    assert not storages["default"].exists(tracked.object_key)
    tracked.refresh_from_db()
    assert tracked.state == "deleted"


def test_row_files__a_record_changed_since_the_re_check_is_left_as_it_is(
    shipped, now, monkeypatch, caplog
):
    from django.db.models import F

    tracked, _row = shipped
    _while_deleting(
        monkeypatch,
        lambda: RetentionRecord.objects.filter(pk=tracked.pk).update(
            row_version=F("row_version") + 1
        ),
    )

    run = _enforce(now)

    tracked.refresh_from_db()
    assert tracked.state == "active"
    # Its object is gone: the next claimer asks the store before anything else.
    assert tracked.disposal_started_at is not None
    assert not DeletionEvent.objects.filter(record=tracked).exists()
    assert "changed since their re-check" in caplog.text
    assert tracked.object_key not in caplog.text
    assert run.deleted == 1  # the row


def test_row_files__a_record_whose_object_stayed_is_given_back_and_can_be_renewed(
    shipped, now, monkeypatch
):
    tracked, row = shipped

    def unreachable() -> None:
        raise OSError("store unreachable")

    _while_deleting(monkeypatch, unreachable)

    _enforce(now)

    assert storages["default"].exists(tracked.object_key)
    assert list(Shipment.objects.values_list("pk", flat=True)) == [row.pk]
    tracked.refresh_from_db()
    assert (tracked.state, tracked.disposal_started_at) == ("active", None)
    renewed = api.renew(tracked, now=now)
    assert renewed.renewed_at == now
