from __future__ import annotations

from datetime import timedelta

import pytest

from retention.models import DeletionEvent, RecordState
from tests.helpers import enforce, exists, put_tracked


@pytest.mark.django_db
def test_enforce__deletes_expired_object_and_writes_tombstone(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    old = put_tracked(now=now - timedelta(days=31))
    young = put_tracked(now=now - timedelta(days=1))
    run = enforce(now=now)
    old.refresh_from_db()
    young.refresh_from_db()
    assert run.status == "finished", run.status_reason
    assert (run.eligible, run.claimed, run.deleted) == (1, 1, 1)
    assert old.state == RecordState.DELETED and not exists(old)
    assert young.state == RecordState.ACTIVE and exists(young)
    assert list(DeletionEvent.objects.values_list("record_id", "outcome")) == [(old.pk, "deleted")]
