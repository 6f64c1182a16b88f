"""What a host reads through retention.api instead of the app's inner modules.

The example host (uploads/) asks these, and an import contract keeps it to
retention.api, retention.models, retention.redaction and retention.rest.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import api
from retention.models import RetentionRecord
from tests.helpers import dry_run, put_tracked
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db


def test_policy_version_in_force__is_the_approved_version_of_the_class(
    make_policy: Any, author: Any, now: datetime
):
    version = make_policy("idv.photo", timedelta(days=30), enforce=False)
    api.propose_policy_version(
        data_class="idv.photo", retention_period=timedelta(days=60), author=author, now=now
    )

    assert api.policy_version_in_force("idv.photo") == version


def test_policy_version_in_force__refuses_an_unknown_class_and_one_without_approval(
    author: Any, now: datetime
):
    api.propose_policy_version(
        data_class="pod.scan", retention_period=timedelta(days=90), author=author, now=now
    )

    with pytest.raises(api.UnknownDataClass):
        api.policy_version_in_force("no.such.class")
    with pytest.raises(api.NoApprovedPolicy):
        api.policy_version_in_force("pod.scan")


def test_explain_retention__says_why_the_tenants_record_is_kept(make_policy: Any, now: datetime):
    version = make_policy("idv.photo", timedelta(days=30), enforce=False)
    record = put_tracked(tenant_id="acme", data_class="idv.photo", now=now)

    explanation = api.explain_retention(
        tenant_id="acme", record_id=record.pk, now=now + timedelta(days=1)
    )

    assert explanation.record_id == record.pk
    assert explanation.expires_at == now + timedelta(days=30)
    assert (explanation.policy_key, explanation.policy_version) == (
        version.policy.key,
        version.number,
    )
    assert explanation.retention_period_seconds == 30 * 86400
    assert (explanation.hold_applies, explanation.enforced) == (False, False)
    assert f"version {version.number}" in explanation.explanation


def test_explain_retention__another_tenants_record_does_not_exist(make_policy: Any, now: datetime):
    make_policy("idv.photo", timedelta(days=30))
    record = put_tracked(tenant_id="acme", data_class="idv.photo", now=now)

    with pytest.raises(RetentionRecord.DoesNotExist):
        api.explain_retention(tenant_id="globex", record_id=record.pk, now=now)


def test_registration__names_a_class_of_model_rows_and_none_for_tracked_objects(
    row_registry: Any,
):
    registered = api.register_model(RequestLog, data_class="logs.request", age_field="created_at")

    assert api.registration("logs.request") == registered
    assert api.registration("logs.request").label == "rowhost.RequestLog"
    assert api.registration("idv.photo") is None


def test_row_holds__covers_the_row_and_the_tenant_a_hold_names(
    register_logs: Any, approver: Any, now: datetime
):
    register_logs()
    held, free = (
        RequestLog.objects.create(tenant_id="acme", path="/a", created_at=now),
        RequestLog.objects.create(tenant_id="acme", path="/b", created_at=now),
    )
    assert api.row_holds("logs.request").empty

    api.place_hold(reason="Case 7", placed_by=approver, subject=held, now=now)
    api.place_hold(reason="Case 8", placed_by=approver, tenant_id="globex", now=now)
    holds = api.row_holds("logs.request")

    assert holds.covers(held.pk, "acme")
    assert not holds.covers(free.pk, "acme")
    assert holds.covers(free.pk, "globex")


def test_row_holds__refuses_a_class_that_is_not_model_rows(db: Any):
    with pytest.raises(LookupError):
        api.row_holds("idv.photo")


def test_run_row_cutoff__is_the_cutoff_the_run_fixed_for_a_class_of_rows(
    register_logs: Any, make_policy: Any, now: datetime
):
    register_logs(tenant_field=None)
    make_policy("logs.request", timedelta(days=30), enforce=False)
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    make_policy("pod.scan", timedelta(days=90), enforce=False)

    run = dry_run(now=now, data_classes=["logs.request", "idv.photo"])

    assert api.run_row_cutoff(run, "logs.request") == now - timedelta(days=30)
    assert api.run_row_cutoff(run, "idv.photo") is None  # tracked objects: no row cutoff
    assert api.run_row_cutoff(run, "pod.scan") is None  # not in the run


def test_api__names_what_a_host_reads_in_all():
    for name in (
        "policy_version_in_force",
        "explain_retention",
        "registration",
        "row_holds",
        "run_row_cutoff",
        "RetentionExplanation",
        "RowClass",
        "RowHolds",
        "RetentionError",
    ):
        assert name in api.__all__, name
        assert hasattr(api, name), name
