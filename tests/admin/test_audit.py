"""Runs, records and events: read-only, filterable, searchable, exported as streamed CSV."""

from __future__ import annotations

import csv
import io
import tracemalloc
from datetime import timedelta

import pytest
from django.http import StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone

from retention.admin.audit import RetentionRecordAdmin
from retention.models import DeletionEvent, EventOutcome, RetentionRecord, Run
from tests.helpers import dry_run, enforce, put_tracked

pytestmark = pytest.mark.django_db

AUDIT_MODELS = ("run", "retentionrecord", "deletionevent")


@pytest.fixture
def trail(make_policy, approver, now):
    """Two tenants' records; acme's expired ones deleted by an enforcing run."""
    make_policy()
    records = {
        "acme-old": put_tracked(tenant_id="acme", now=now - timedelta(days=40)),
        "acme-older": put_tracked(tenant_id="acme", now=now - timedelta(days=50)),
        "acme-new": put_tracked(tenant_id="acme", now=now - timedelta(days=1)),
        "globex-new": put_tracked(tenant_id="globex", now=now - timedelta(days=2)),
    }
    run = enforce(now=now)
    for key, record in records.items():
        record.refresh_from_db()
        records[key] = record
    return {"records": records, "run": run}


def _ids(response) -> set:
    return {obj.pk for obj in response.context["cl"].result_list}


def _object_of(name: str, trail) -> object:
    if name == "run":
        return trail["run"]
    if name == "retentionrecord":
        return trail["records"]["acme-old"]
    return DeletionEvent.objects.first()


@pytest.mark.parametrize("name", AUDIT_MODELS)
def test_audit_admins__refuse_add_change_and_delete_even_to_a_superuser(
    name, trail, superuser_client
):
    obj = _object_of(name, trail)
    url = f"admin:retention_{name}_"

    add = superuser_client.get(reverse(url + "add"))
    change = superuser_client.post(reverse(url + "change", args=[obj.pk]), {})
    delete = superuser_client.post(reverse(url + "delete", args=[obj.pk]), {"post": "yes"})
    changelist = superuser_client.get(reverse(url + "changelist"))

    assert add.status_code == 403
    assert change.status_code == 403
    assert delete.status_code == 403
    # Not even "delete selected". Records offer one action, through a service:
    # reopening failures after review (which changes no audited field).
    actions = changelist.context["action_form"]
    if name == "retentionrecord":
        offered = {value for value, _ in actions.fields["action"].choices if value}
        assert offered == {"retry_failed"}
    else:
        assert actions is None
    assert type(obj).objects.filter(pk=obj.pk).exists()


def test_records__filter_by_state_data_class_tenant_and_date(trail, bob_client):
    r = trail["records"]
    url = reverse("admin:retention_retentionrecord_changelist")

    deleted = bob_client.get(url + "?state__exact=deleted")
    globex = bob_client.get(url + "?tenant=globex&data_class=idv.photo")
    other_class = bob_client.get(url + "?data_class=pod.scan")
    since = (r["acme-new"].created_at - timedelta(hours=1)).isoformat()
    recent = bob_client.get(url, {"created_at__gte": since})

    assert _ids(deleted) == {r["acme-old"].pk, r["acme-older"].pk}
    assert _ids(globex) == {r["globex-new"].pk}
    assert _ids(other_class) == set()
    assert _ids(recent) == {r["acme-new"].pk}


def test_records__search_by_id_key_digest_or_a_pasted_key(trail, bob_client):
    record = trail["records"]["acme-new"]
    url = reverse("admin:retention_retentionrecord_changelist")

    by_id = bob_client.get(url, {"q": str(record.pk)})
    by_digest = bob_client.get(url, {"q": record.key_digest})
    by_key = bob_client.get(url, {"q": record.object_key})
    nothing = bob_client.get(url, {"q": "no such thing"})

    assert _ids(by_id) == _ids(by_digest) == _ids(by_key) == {record.pk}
    assert nothing.status_code == 200 and _ids(nothing) == set()


def test_records__never_show_the_object_key(trail, bob_client):
    record = trail["records"]["acme-new"]

    listing = bob_client.get(reverse("admin:retention_retentionrecord_changelist"))
    page = bob_client.get(reverse("admin:retention_retentionrecord_change", args=[record.pk]))

    assert record.key_digest in page.content.decode()
    for r in trail["records"].values():
        assert r.object_key not in listing.content.decode()
        assert r.object_key not in page.content.decode()


def test_records__a_records_page_and_export_show_its_size_when_the_host_gave_one(
    make_policy, bob_client, now
):
    make_policy()
    sized = put_tracked(now=now, size=52_000)
    unsized = put_tracked(now=now)

    def page(record):
        url = reverse("admin:retention_retentionrecord_change", args=[record.pk])
        return bob_client.get(url).content.decode()

    export = bob_client.get(reverse("admin:retention_retentionrecord_export"))

    assert '<span title="52,000 bytes">52 kB</span>' in page(sized)
    assert '<span title="not recorded">—</span>' in page(unsized)
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert {int(r["id"]): r["size_bytes"] for r in rows} == {sized.pk: "52000", unsized.pk: ""}


def test_events__filter_by_outcome_tenant_and_run_and_search_by_record(trail, bob_client):
    r = trail["records"]
    run = trail["run"]
    url = reverse("admin:retention_deletionevent_changelist")
    deleted_ids = set(
        DeletionEvent.objects.filter(outcome=EventOutcome.DELETED).values_list("id", flat=True)
    )

    by_outcome = bob_client.get(url + "?outcome__exact=deleted&tenant=acme")
    by_run = bob_client.get(url + f"?run={run.pk}")
    bad_run = bob_client.get(url + "?run=not-a-uuid")
    by_record = bob_client.get(url, {"q": str(r["acme-old"].pk)})

    assert len(deleted_ids) == 2
    assert _ids(by_outcome) == deleted_ids
    assert _ids(by_run) == deleted_ids
    assert _ids(bad_run) == set()
    assert {e.record_id for e in by_record.context["cl"].result_list} == {r["acme-old"].pk}


def test_runs__filter_by_mode_and_data_class(trail, bob_client, now):
    dry = dry_run(now=now)
    url = reverse("admin:retention_run_changelist")

    dry_runs = bob_client.get(url + "?mode__exact=dry_run&data_class=idv.photo")
    other_class = bob_client.get(url + "?data_class=pod.scan")

    assert _ids(dry_runs) == {dry.pk}
    assert _ids(other_class) == set()


def _csv(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_csv_export__streams_the_filtered_changelist_in_chunks(trail, bob_client, monkeypatch):
    monkeypatch.setattr(RetentionRecordAdmin, "export_chunk_size", 1)
    url = reverse("admin:retention_retentionrecord_export")

    response = bob_client.get(url + "?tenant=acme")

    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="retentionrecord-')
    chunks = list(response.streaming_content)
    assert len(chunks) == 4  # the header, then one chunk per row
    rows = list(csv.reader(io.StringIO(b"".join(chunks).decode())))
    assert rows[0][:5] == ["id", "tenant_id", "data_class", "storage", "key_digest"]
    acme = sorted(r.pk for k, r in trail["records"].items() if k.startswith("acme"))
    assert sorted(int(row[0]) for row in rows[1:]) == acme
    assert "object_key" not in rows[0]
    text = "\n".join(",".join(row) for row in rows)
    for record in trail["records"].values():
        assert record.object_key not in text


def test_csv_export__of_events_and_runs_follows_their_filters(trail, bob_client):
    events = bob_client.get(
        reverse("admin:retention_deletionevent_export") + "?outcome__exact=deleted"
    )
    runs = bob_client.get(reverse("admin:retention_run_export"))

    event_rows = _csv(events)
    run_rows = _csv(runs)
    assert {row[9] for row in event_rows[1:]} == {"deleted"}
    assert len(event_rows) == 3
    assert [row[0] for row in run_rows[1:]] == [str(trail["run"].pk)]


def test_csv_export__an_invalid_filter_is_a_bad_request(trail, bob_client):
    response = bob_client.get(
        reverse("admin:retention_retentionrecord_export") + "?created_at__gte=yesterday-ish"
    )

    assert response.status_code == 400


def test_csv_export__needs_the_view_permission(trail, alice_client):
    response = alice_client.get(reverse("admin:retention_retentionrecord_export"))

    assert response.status_code == 403


def test_changelist__links_to_the_export_of_the_same_filters(trail, bob_client):
    response = bob_client.get(
        reverse("admin:retention_retentionrecord_changelist") + "?tenant=acme"
    )

    assert 'href="export/?tenant=acme"' in response.content.decode()
    assert RetentionRecord.objects.count() == 4 and Run.objects.count() == 1


def test_csv_export__memory_stays_flat_while_rows_grow(make_policy, bob_client, now, monkeypatch):
    version = make_policy()
    RetentionRecord.objects.bulk_create(
        RetentionRecord(
            tenant_id=f"tenant-{i % 50}",
            data_class="idv.photo",
            object_key=f"tenant-{i % 50}/idv.photo/{i:06d}/scan.pdf",
            key_digest=f"{i:064x}",
            policy_version=version,
            created_at=now - timedelta(days=40),
            expires_at=now - timedelta(days=10),
        )
        for i in range(10_000)
    )
    monkeypatch.setattr(RetentionRecordAdmin, "export_chunk_size", 250)
    response = bob_client.get(reverse("admin:retention_retentionrecord_export"))

    tracemalloc.start()
    try:
        size = largest = 0
        for chunk in response.streaming_content:
            size += len(chunk)
            largest = max(largest, len(chunk))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert size > 1_500_000
    assert largest < 50_000  # 250 rows a chunk, never the whole file
    # Holding the rows at once would take about five times the file's size.
    assert peak < size


def _fail_for_good(record, reason="AccessDenied: object locked"):
    RetentionRecord.objects.filter(pk=record.pk).update(
        state="failed", retryable=False, last_error=reason, attempts=5
    )


def test_records__approver_reopens_failed_records_and_the_next_run_deletes_them(
    trail, bob_client, now
):
    stuck = trail["records"]["acme-new"]
    _fail_for_good(stuck)
    url = reverse("admin:retention_retentionrecord_changelist")

    response = bob_client.post(
        url,
        {
            "action": "retry_failed",
            "_selected_action": [stuck.pk, trail["records"]["globex-new"].pk],
        },
        follow=True,
    )

    assert "1 failed record(s) will be retried by the next run; 1 were not failed" in (
        response.content.decode()
    )
    stuck.refresh_from_db()
    assert (stuck.state, stuck.retryable, stuck.attempts) == ("failed", True, 0)
    later = now + timedelta(days=40)
    run = enforce(now=later)
    stuck.refresh_from_db()
    assert stuck.state == "deleted" and run.deleted >= 1


def test_records__an_author_cannot_reopen_failed_records(trail, alice_client, alice):
    from retention.exceptions import NotAllowed
    from retention.services import record_failures_retry

    stuck = trail["records"]["acme-new"]
    _fail_for_good(stuck)
    url = reverse("admin:retention_retentionrecord_changelist")
    # Authors do not even see retention records; the service refuses them too.
    assert alice_client.get(url).status_code == 403
    with pytest.raises(NotAllowed):
        record_failures_retry(record_ids=[stuck.pk], by=alice, now=timezone.now())
    stuck.refresh_from_db()
    assert stuck.retryable is False
