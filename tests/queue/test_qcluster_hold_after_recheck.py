"""Queued, on a real ``qcluster``: killed right after a page's delete, then a hold (issue 26).

The worker's page deletes part of its objects (the DeleteObjects answered),
then the cluster is killed with ``kill -9`` and a hold on the tenant is
placed. One more run, on a fresh cluster, settles the rows left
``deleting``: the objects gone are recorded already absent with the note
that the hold came after the re-check; those still there go back to their
hold with one held skip. Records, bucket and chain agree.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from retention import api
from retention.models import (
    DeletionEvent,
    EventOutcome,
    RecordState,
    RetentionRecord,
    Run,
    RunLease,
    RunStatus,
)
from tests.helpers import chain_ok
from tests.queue import test_qcluster
from tests.queue.test_qcluster import Cluster, keys_in, seed_s3, wait_for

# The real qcluster of tests/queue/test_qcluster.py, on each broker.
cluster = test_qcluster.cluster

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]


def test_qcluster__killed_after_a_page_deleted_then_held__one_more_run_records_the_truth(
    cluster: Cluster,
    make_policy: Any,
    approver: Any,
    s3_client: Any,
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    now = timezone.now()
    make_policy("pod.scan", timedelta(days=30), batch_size=10, at=now - timedelta(days=400))
    acme = seed_s3(s3_client, s3_bucket, 10, at=now - timedelta(days=31), prefix="acme")
    globex = seed_s3(
        s3_client, s3_bucket, 5, at=now - timedelta(days=31), prefix="globex", tenant_id="globex"
    )
    marker = tmp_path / "stalled"
    cluster.env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.queue.stall_settings",
            "LETHE_STALL_MARKER": str(marker),
            "LETHE_STALL_PREFIX": "acme/",
            "LETHE_STALL_AFTER": "6",
        }
    )

    cluster.start()
    first = json.loads(cluster.manage("run_retention", "--enqueue", "--json"))
    wait_for(marker.exists, timeout=90, cluster=cluster, what="the page's delete to answer")
    hold = api.place_hold(
        reason="Case 26 (queued)", placed_by=approver, tenant_id="acme", now=timezone.now()
    )
    cluster.kill_9()
    assert hold.in_flight == 10
    gone = {key for key in (r.object_key for r in acme) if key not in keys_in(s3_client, s3_bucket)}
    assert len(gone) == 6

    # Time passes: the dead run's lease and its rows' leases lapse.
    lapsed = timezone.now() - timedelta(minutes=1)
    Run.objects.filter(pk=first["run_id"]).update(lease_expires_at=lapsed)
    RunLease.objects.update(expires_at=lapsed)
    RetentionRecord.objects.filter(state=RecordState.DELETING).update(lease_expires_at=lapsed)
    cluster.env["DJANGO_SETTINGS_MODULE"] = "tests.qcluster_settings"
    time.sleep(0.5)
    cluster.start()
    second = json.loads(cluster.manage("run_retention", "--enqueue", "--wait", "--json"))

    assert second["status"] == RunStatus.FINISHED
    after = f"hold #{hold.pk} placed after the re-check"
    remaining = keys_in(s3_client, s3_bucket)
    for record in acme:
        record.refresh_from_db()
        events = list(DeletionEvent.objects.filter(record=record).values_list("outcome", "reason"))
        if record.object_key in gone:
            assert record.state == RecordState.DELETED
            assert events == [(EventOutcome.ALREADY_ABSENT, after)]
        else:
            assert record.state == RecordState.ACTIVE and record.object_key in remaining
            assert [e for e in events if e[1].startswith(after)] == [
                (EventOutcome.SKIPPED_HELD, f"{after}; the object was still there, and is kept")
            ]
            assert EventOutcome.DELETED not in {e[0] for e in events}
    for record in globex:
        record.refresh_from_db()
        assert record.state == RecordState.DELETED and record.object_key not in remaining
    assert not RetentionRecord.objects.filter(state=RecordState.DELETING).exists()
    assert not DeletionEvent.objects.filter(
        record__object_key__in=gone, outcome=EventOutcome.SKIPPED_HELD
    ).exists()
    chain_ok()
    assert "Run counts agree with their events." in cluster.manage("retention_verify", "--runs")
