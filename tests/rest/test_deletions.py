"""GET /api/v1/deletions/: receipts, filters, cursor pages, CSV (SPEC §3.2)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.core.files.storage import storages
from django.http import StreamingHttpResponse

from retention import api
from retention.digest import key_digest
from retention.models import EventOutcome
from tests.helpers import enforce, put_tracked
from tests.rest.conftest import receipts_of

pytestmark = pytest.mark.django_db


def csv_rows(response) -> list[dict[str, str]]:
    assert isinstance(response, StreamingHttpResponse)
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_deletions__each_receipt_carries_the_evidence(client, acme, make_policy, now):
    version = make_policy("idv.photo", timedelta(days=30))
    gone = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    absent = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    storages["default"].delete(absent.object_key)
    enforce(now=now)

    body = client.get("/api/v1/deletions/", headers=acme).json()

    by_record = {r["record_id"]: r for r in body["results"]}
    assert set(by_record) == {gone.pk, absent.pk}
    receipt = by_record[gone.pk]
    event = receipts_of("acme")[0]
    assert receipt == {
        "id": event.pk,
        "record_id": gone.pk,
        "kind": "object",
        "row_count": None,
        "evidence": "",
        "run_id": str(event.run_id),
        "data_class": "idv.photo",
        "policy": {"key": "idv.photo", "version": version.number},
        "disposition": "delete",
        "outcome": "deleted",
        "expired_at": "2026-03-13T12:00:00Z",
        "deleted_at": "2026-03-14T12:00:00Z",
        "key_digest": key_digest(gone.object_key),
        "event_hash": event.event_hash,
        "proof": {
            "leaf_index": event.leaf_index,
            "path": receipt["proof"]["path"],
            "batch": {
                "seq": event.batch.seq,
                "size": event.batch.size,
                "root": event.batch.root,
                "previous_chain": event.batch.previous_chain,
                "chain": event.batch.chain,
            },
        },
    }
    # The proof is the one a customer verifies offline.
    from retention.receipts.verify import verify_receipt
    from retention.selectors.evidence import chain_head, receipt_for

    assert verify_receipt(receipt_for(event), chain_head()) == []
    assert by_record[absent.pk]["outcome"] == "already_absent"
    assert gone.object_key not in str(body)
    assert body["next"] is None


def test_deletions__held_and_renewed_skips_are_not_receipts(
    client, acme, make_policy, approver, now
):
    make_policy("idv.photo", timedelta(days=30))
    held = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    api.place_hold(reason="case 1", placed_by=approver, record=held, now=now)
    enforce(now=now)

    body = client.get("/api/v1/deletions/", headers=acme).json()

    assert held.events.filter(outcome=EventOutcome.SKIPPED_HELD).exists()
    assert body["results"] == []


def test_deletions__since_until_and_data_class_filter(client, acme, deleted_records, now):
    early = deleted_records({"acme": 1}, at=now - timedelta(days=2))
    middle = deleted_records({"acme": 1}, at=now - timedelta(days=1))
    late = deleted_records({"acme": 1}, at=now)
    scan = deleted_records({"acme": 1}, data_class="pod.scan", at=now)

    def ids(query: str) -> list[int]:
        response = client.get(f"/api/v1/deletions/?{query}", headers=acme)
        assert response.status_code == 200, response.json()
        return [r["record_id"] for r in response.json()["results"]]

    assert ids("") == [early[0].pk, middle[0].pk, late[0].pk, scan[0].pk]
    assert ids("since=2026-03-13T12:00:00Z") == [middle[0].pk, late[0].pk, scan[0].pk]
    assert ids("until=2026-03-13T12:00:00Z") == [early[0].pk]
    assert ids("since=2026-03-13T00:00:00Z&until=2026-03-14T00:00:00Z") == [middle[0].pk]
    assert ids("data_class=pod.scan") == [scan[0].pk]
    assert ids("data_class=pod.scan&until=2026-03-14T00:00:00Z") == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("since=yesterday", "since"),
        ("until=2026-13-01", "until"),
        ("since=2026-03-14T00:00:00Z&until=2026-03-13T00:00:00Z", "until"),
        ("data_class=NOT%20A%20CLASS", "data_class"),
    ],
)
def test_deletions__bad_filters_answer_400_invalid_with_the_field(client, acme, query, field):
    for suffix in ("", "&format=csv"):
        response = client.get(f"/api/v1/deletions/?{query}{suffix}", headers=acme)

        assert response.status_code == 400
        assert response["Content-Type"] == "application/json"
        body = response.json()
        assert body["code"] == "invalid"
        assert field in body["field_errors"]


def test_deletions__cursor_pages_walk_every_receipt_once(client, acme, deleted_records):
    records = deleted_records({"acme": 7})

    seen: list[int] = []
    url = "/api/v1/deletions/?page_size=3"
    pages = 0
    while url:
        body = client.get(url, headers=acme).json()
        seen.extend(r["record_id"] for r in body["results"])
        url = body["next"]
        pages += 1

    assert pages == 3
    assert seen == [r.pk for r in records]


@pytest.mark.parametrize("cursor", ["cj14", "bz1hYmM%3D"])  # "r=x", "o=abc"
def test_deletions__tampered_cursor_answers_400_invalid_cursor(client, acme, cursor):
    response = client.get(f"/api/v1/deletions/?cursor={cursor}", headers=acme)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_cursor"


def test_deletions__csv_streams_the_same_receipts_with_filters(client, acme, deleted_records, now):
    deleted_records({"acme": 3, "globex": 2})
    deleted_records({"acme": 2}, data_class="pod.scan")
    listed = client.get("/api/v1/deletions/?data_class=idv.photo", headers=acme).json()["results"]

    response = client.get("/api/v1/deletions/?format=csv&data_class=idv.photo", headers=acme)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="deletion-receipts-')
    rows = csv_rows(response)
    assert [int(r["receipt_id"]) for r in rows] == [r["id"] for r in listed]
    first, receipt = rows[0], listed[0]
    assert first == {
        "receipt_id": str(receipt["id"]),
        "record_id": str(receipt["record_id"]),
        "run_id": receipt["run_id"],
        "data_class": "idv.photo",
        "policy_key": "idv.photo",
        "policy_version": str(receipt["policy"]["version"]),
        "disposition": "delete",
        "outcome": "deleted",
        "expired_at": receipt["expired_at"],
        "deleted_at": receipt["deleted_at"],
        "key_digest": receipt["key_digest"],
        "event_hash": receipt["event_hash"],
        "batch_seq": str(receipt["proof"]["batch"]["seq"]),
        "leaf_index": str(receipt["proof"]["leaf_index"]),
        "kind": "object",
        "row_count": "",
        "evidence": "",
    }


def test_deletions__csv_is_also_chosen_by_accept_header(client, acme, deleted_records):
    deleted_records({"acme": 2})

    response = client.get("/api/v1/deletions/", headers={**acme, "Accept": "text/csv"})

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert len(csv_rows(response)) == 2


def test_deletions__csv_with_no_receipts_is_just_the_header(client, acme):
    response = client.get("/api/v1/deletions/?format=csv", headers=acme)

    body = b"".join(response.streaming_content).decode()
    assert body == (
        "receipt_id,record_id,run_id,data_class,policy_key,policy_version,disposition,"
        "outcome,expired_at,deleted_at,key_digest,event_hash,batch_seq,leaf_index,kind,row_count,"
        "evidence\n"
    )


def test_deletions__unknown_format_answers_406_not_acceptable(client, acme):
    response = client.get("/api/v1/deletions/?format=xml", headers=acme)

    assert response.status_code == 406
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_acceptable"


def test_deletions__receipt_endpoint_gives_a_receipt_that_verifies_offline(
    client, acme, deleted_records
):
    from retention.receipts.verify import verify_receipt

    deleted_records({"acme": 3, "globex": 2})
    event = receipts_of("acme")[1]

    receipt = client.get(f"/api/v1/deletions/{event.pk}/receipt/", headers=acme).json()
    head = client.get(
        f"/api/v1/deletions/chain/?from_seq={receipt['batch']['seq']}", headers=acme
    ).json()

    assert receipt["event"]["record_id"] == event.record_id
    assert receipt["event_hash"] == event.event_hash
    assert verify_receipt(receipt, head) == []
    receipt["event"]["outcome"] = "already_absent"
    assert verify_receipt(receipt, head) != []


def test_deletions__another_tenants_receipt_answers_404(client, acme, globex, deleted_records):
    deleted_records({"acme": 1, "globex": 1})
    theirs = receipts_of("globex")[0]

    response = client.get(f"/api/v1/deletions/{theirs.pk}/receipt/", headers=acme)
    mine = client.get(f"/api/v1/deletions/{theirs.pk}/receipt/", headers=globex)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert mine.status_code == 200


def test_deletions__a_record_reconciliation_found_missing_is_a_missing_receipt_never_deleted(
    client, acme, make_policy, now
):
    from retention import engine

    make_policy("idv.photo", timedelta(days=30))
    lost = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    storages["default"].delete(lost.object_key)
    engine.reconcile_run(now=now)

    body = client.get("/api/v1/deletions/", headers=acme).json()
    report = client.get("/api/v1/deletions/report/", headers=acme).json()

    assert [(r["record_id"], r["outcome"]) for r in body["results"]] == [(lost.pk, "missing")]
    (photos,) = report["data_classes"]
    assert (photos["deleted"], photos["already_absent"], photos["missing"]) == (0, 0, 1)
    assert photos["overdue"] == 0
