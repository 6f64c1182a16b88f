"""An approved erasure request executed by a real ``qcluster`` (issue 29, point 3).

The request's queued run goes through the same dispatcher and batches as a
retention run, on both brokers; the subject's objects go from the S3 server,
another subject's stay, the request completes verified and the chain holds.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from retention import api
from retention.models import ErasureRequest, ErasureState, Run, RunExecutor, RunMode
from retention.selectors.evidence import VerifyResult, chain_verify
from tests.factories import user_with_perms
from tests.queue.test_qcluster import Cluster, cluster, keys_in, seed_s3, wait_for

__all__ = ["cluster"]  # the fixture, shared with the other queue tests

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]


def test_qcluster__an_approved_erasure_runs_on_the_workers_and_completes(
    cluster: Cluster, make_policy: Any, s3_client: Any, s3_bucket: str
) -> None:
    now = timezone.now()
    # Report-only: an approved request erases whatever the class's mode.
    make_policy("pod.scan", timedelta(days=30), batch_size=20, enforce=False)
    anns = seed_s3(s3_client, s3_bucket, 70, at=now, prefix="ann", subject_id="ann-17")
    bobs = seed_s3(s3_client, s3_bucket, 5, at=now, prefix="bob", subject_id="bob-18")
    request = api.request_erasure(
        requested_by=user_with_perms("dpo", "add_erasurerequest"),
        reason="Art. 17",
        subject_id="ann-17",
    )
    api.approve_erasure(request, approver=user_with_perms("approver2", "approve_erasurerequest"))

    cluster.start()
    cluster.manage("run_retention", "--erasures", "--enqueue")
    wait_for(
        lambda: ErasureRequest.objects.filter(pk=request.pk, state=ErasureState.COMPLETED).exists(),
        timeout=150,
        cluster=cluster,
        what="the erasure request to complete",
    )

    run = Run.objects.get(erasure=request)
    assert (run.mode, run.executor, run.deleted) == (RunMode.ERASE, RunExecutor.QUEUE, 70)
    assert run.batches.count() >= 70 // 20
    remaining = keys_in(s3_client, s3_bucket)
    assert not {r.object_key for r in anns} & remaining
    assert {r.object_key for r in bobs} <= remaining
    request.refresh_from_db()
    assert request.verified_at is not None
    assert api.erasure_certificate(request)["totals"]["erased"] == 70
    (verdict,) = [item for item in chain_verify() if isinstance(item, VerifyResult)]
    assert verdict.ok, verdict.broken
