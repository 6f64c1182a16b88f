"""Receipts are paged in commit order (batch ``seq``, then leaf), not by event id.

A page's events are copied before its batch is chained (issue 31), so an
event id drawn earlier can commit later. Cursors written before the change
held an event id; they are still accepted, and go on after that receipt.
"""

from __future__ import annotations

from base64 import b64encode
from datetime import timedelta
from urllib.parse import quote, urlencode

import pytest

from retention.models import DeletionEvent, EventOutcome

pytestmark = pytest.mark.django_db


def _walk(client, acme, url: str) -> list[int]:
    seen: list[int] = []
    while url:
        body = client.get(url, headers=acme).json()
        seen.extend(r["record_id"] for r in body["results"])
        url = body["next"]
    return seen


def _two_runs_ids_swapped(deleted_records, now) -> tuple[list[int], list[int]]:
    """Two runs' receipts, the first run's events given ids above the second's."""
    first = deleted_records({"acme": 3}, at=now)
    second = deleted_records({"acme": 3}, at=now + timedelta(days=1))
    events = DeletionEvent.objects.filter(record__in=[r.pk for r in first])
    top = DeletionEvent.objects.order_by("-id").values_list("id", flat=True).first()
    for event in events.order_by("-id"):
        DeletionEvent.objects.filter(pk=event.pk).update(id=event.pk + top + 100)
    return [r.pk for r in first], [r.pk for r in second]


def test_receipts__pages_follow_the_chain_not_the_event_ids(client, acme, deleted_records, now):
    first, second = _two_runs_ids_swapped(deleted_records, now)
    by_id = list(
        DeletionEvent.objects.filter(tenant_id="acme", outcome=EventOutcome.DELETED)
        .order_by("id")
        .values_list("record_id", flat=True)
    )
    assert by_id == second + first  # the ids say the second run came first

    seen = _walk(client, acme, "/api/v1/deletions/?page_size=2")

    assert seen == first + second


def test_receipts__a_cursor_written_before_goes_on_after_its_receipt(
    client, acme, deleted_records, now
):
    first, second = _two_runs_ids_swapped(deleted_records, now)
    last_read = DeletionEvent.objects.get(record_id=first[1])
    # What the paginator wrote when it ordered by id: "p=<id>", base64.
    legacy = b64encode(urlencode({"p": str(last_read.pk)}).encode()).decode()

    seen = _walk(client, acme, f"/api/v1/deletions/?page_size=2&cursor={quote(legacy)}")

    assert seen == first[2:] + second


def test_receipts__a_legacy_cursor_naming_no_receipt_answers_400(client, acme):
    legacy = b64encode(urlencode({"p": "999999"}).encode()).decode()

    response = client.get(f"/api/v1/deletions/?cursor={quote(legacy)}", headers=acme)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_cursor"


def test_receipts__csv_page_is_the_json_page_in_the_same_order(client, acme, deleted_records, now):
    first, second = _two_runs_ids_swapped(deleted_records, now)

    response = client.get("/api/v1/deletions/?format=csv&page_size=4", headers=acme)
    body = b"".join(response.streaming_content).decode().splitlines()

    header = body[0].split(",")
    column = header.index("record_id")
    assert [int(line.split(",")[column]) for line in body[1:]] == (first + second)[:4]
