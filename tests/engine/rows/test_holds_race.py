"""Holds placed while a page of model rows is under way (issue 25: no wrongful delete).

A page must see every hold committed before the statement that locks and
re-checks its rows starts, whoever placed it and however long the page took
to get there (a class with ``files`` deletes objects first; redaction walks
its skipped rows first). And a hold's row or tenant, however it was typed,
keeps the same rows from deletion and from redaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, storages
from django.db import connection
from django.db.models.signals import post_delete

from retention import api, redaction
from retention.engine import run_execute, run_start
from retention.models import DeletionEvent, LegalHold, Run
from tests.engine.rows.test_engine import _account, _logs, logs, redacting  # noqa: F401  (fixtures)
from tests.rowhost.models import RequestLog, Shipment, WebSession

pytestmark = pytest.mark.django_db


def _enforce(now: datetime, data_class: str) -> Run:
    run = run_start(mode="enforce", data_classes=[data_class], now=now)
    return run_execute(run=run, clock=lambda: now)


@contextmanager
def _before_page_select(table: str, place: Callable[[], Any]) -> Iterator[None]:
    """Call ``place`` once, right before the first statement that reads a page of
    ``table`` (its ``LIMIT``): a hold committed before the page's select starts."""
    state = {"done": False, "inside": False}

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if (
            not state["done"]
            and not state["inside"]
            and f'"{table}"' in sql
            and " LIMIT " in sql
            and "COUNT(" not in sql
        ):
            state["done"] = state["inside"] = True
            try:
                place()
            finally:
                state["inside"] = False
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield
    assert state["done"], "the page's select never ran"


def _on_delete_receiver(sender: Any, **kwargs: Any) -> None:
    pass


# Finding 1: a hold committed before the page's select is seen by it.


@pytest.mark.parametrize("receiver", [False, True], ids=["one_statement", "collector"])
def test_delete__a_hold_placed_right_before_the_page_select_keeps_its_rows(
    logs: Any,  # noqa: F811
    author: Any,
    now: datetime,
    receiver: bool,
):
    _logs(now, old=2, new=0, tenant="t1")
    _logs(now, old=2, new=0, tenant="t2")
    if receiver:  # a delete receiver: the page goes through Django's collector
        post_delete.connect(_on_delete_receiver, sender=RequestLog)
    try:
        with _before_page_select(
            "rowhost_requestlog",
            lambda: api.place_hold(reason="t1", placed_by=author, tenant_id="t1", now=now),
        ):
            run = _enforce(now, "logs.request")
    finally:
        post_delete.disconnect(_on_delete_receiver, sender=RequestLog)

    assert sorted(RequestLog.objects.values_list("tenant_id", flat=True)) == ["t1", "t1"]
    assert (run.deleted, run.skipped_held) == (2, 2)


def test_redact__a_hold_placed_right_before_the_page_select_keeps_the_row_as_it_is(
    redacting: Any,  # noqa: F811
    author: Any,
    now: datetime,
):
    held = _account(1, now - timedelta(days=100))

    with _before_page_select(
        "rowhost_account",
        lambda: api.place_hold(reason="t1", placed_by=author, tenant_id="t1", now=now),
    ):
        run = _enforce(now, "accounts.redact")

    held.refresh_from_db()
    assert (held.name, held.email) == ("A1", "a1@x.test")
    assert (run.redacted, run.skipped_held) == (0, 1)
    # Kept, not passed over: once the hold is released the next run redacts it.
    hold = LegalHold.objects.get()
    api.release_hold(hold=hold, released_by=author, reason="settled", now=now)
    again = _enforce(now, "accounts.redact")
    held.refresh_from_db()
    assert again.redacted == 1
    assert held.name == "[redacted]"


def _shipments(register_shipments: Any, make_policy: Any, now: datetime) -> tuple[Shipment, str]:
    register_shipments()
    make_policy("pod.shipment", timedelta(days=30))
    name = storages["default"].save("proofs/claim.pdf", ContentFile(b"c"))
    shipment = Shipment.objects.create(
        tenant_id="t1", proof=name, delivered_at=now - timedelta(days=40)
    )
    return shipment, name


def test_files__a_hold_placed_before_the_page_is_read_keeps_the_row_and_its_object(
    register_shipments: Any, make_policy: Any, author: Any, now: datetime
):
    shipment, name = _shipments(register_shipments, make_policy, now)

    with _before_page_select(
        "rowhost_shipment",
        lambda: api.place_hold(reason="claim", placed_by=author, subject=shipment, now=now),
    ):
        run = _enforce(now, "pod.shipment")

    assert list(Shipment.objects.values_list("pk", flat=True)) == [shipment.pk]
    assert storages["default"].exists(name)
    assert (run.deleted, run.skipped_held) == (0, 1)


def test_files__a_hold_placed_once_the_objects_went_keeps_the_row_and_says_so(
    register_shipments: Any, make_policy: Any, author: Any, now: datetime, monkeypatch: Any
):
    shipment, name = _shipments(register_shipments, make_policy, now)
    real_delete = FileSystemStorage.delete
    placed: list[LegalHold] = []

    def delete_then_hold(self: FileSystemStorage, path: str) -> None:
        real_delete(self, path)
        if not placed:
            placed.append(
                api.place_hold(reason="claim", placed_by=author, subject=shipment, now=now)
            )

    monkeypatch.setattr(FileSystemStorage, "delete", delete_then_hold)

    run = _enforce(now, "pod.shipment")

    # The hold keeps what is left: the row. Its object had gone before the
    # hold came, and the row's event says so.
    assert list(Shipment.objects.values_list("pk", flat=True)) == [shipment.pk]
    assert not storages["default"].exists(name)
    assert run.deleted == 0
    late = [
        e.reason
        for e in DeletionEvent.objects.filter(run=run, outcome="skipped_held")
        if f"hold #{placed[0].pk} placed after the re-check" in e.reason
    ]
    assert len(late) == 1
    assert "objects were deleted" in late[0]


# Finding 5: a hold's row or tenant is read as the field reads it, for both dispositions.


def _hold_typed(author: Any, now: datetime, **scope: Any) -> LegalHold:
    """A hold as a person may type it in (the admin's form takes text)."""
    return LegalHold.objects.create(reason="typed", placed_by=author, placed_at=now, **scope)


def test_redact__a_row_hold_typed_another_way_keeps_its_row_as_it_is(
    redacting: Any,  # noqa: F811
    author: Any,
    now: datetime,
):
    held = _account(1, now - timedelta(days=100))
    free = _account(2, now - timedelta(days=100))
    _hold_typed(author, now, subject_type="rowhost.Account", subject_pk=f"0{held.pk}")

    run = _enforce(now, "accounts.redact")

    held.refresh_from_db()
    free.refresh_from_db()
    assert held.name == "A1"
    assert free.name == "[redacted]"
    assert (run.redacted, run.skipped_held) == (1, 1)


def test_redact__a_uuid_row_hold_in_upper_case_keeps_its_row_as_it_is(
    row_registry: Any, make_policy: Any, author: Any, now: datetime
):
    api.register_model(
        WebSession,
        data_class="web.sessions",
        age_field="created_at",
        redact={"tenant_id": redaction.Constant("gone")},
    )
    make_policy("web.sessions", timedelta(days=30), disposition="redact")
    old = now - timedelta(days=40)
    held = WebSession.objects.create(key=uuid.uuid4(), tenant_id="t1", created_at=old)
    free = WebSession.objects.create(key=uuid.uuid4(), tenant_id="t1", created_at=old)
    hold = _hold_typed(
        author, now, subject_type="rowhost.WebSession", subject_pk=str(held.key).upper()
    )

    run = _enforce(now, "web.sessions")

    held.refresh_from_db()
    free.refresh_from_db()
    assert (held.tenant_id, free.tenant_id) == ("t1", "gone")
    assert (run.redacted, run.skipped_held) == (1, 1)
    event = DeletionEvent.objects.get(run=run, outcome="skipped_held")
    assert event.reason == f"legal hold applies (hold {hold.pk})"


def test_delete__a_row_hold_typed_another_way_is_named_by_the_held_rows_event(
    logs: Any,  # noqa: F811
    author: Any,
    now: datetime,
):
    _logs(now, old=2, new=0)
    held = RequestLog.objects.order_by("pk").first()
    assert held is not None
    hold = _hold_typed(author, now, subject_type="rowhost.RequestLog", subject_pk=f" {held.pk}")

    run = _enforce(now, "logs.request")

    assert list(RequestLog.objects.values_list("pk", flat=True)) == [held.pk]
    assert (run.deleted, run.skipped_held) == (1, 1)
    event = DeletionEvent.objects.get(run=run, outcome="skipped_held")
    assert event.reason == f"legal hold applies (hold {hold.pk})"


def test_holds__a_hold_naming_no_row_the_field_can_hold_covers_none_and_stops_nothing(
    logs: Any,  # noqa: F811
    author: Any,
    now: datetime,
):
    _logs(now, old=2, new=0)
    _hold_typed(author, now, subject_type="rowhost.RequestLog", subject_pk="not-a-number")

    run = _enforce(now, "logs.request")

    assert RequestLog.objects.count() == 0
    assert (run.deleted, run.skipped_held) == (2, 0)
