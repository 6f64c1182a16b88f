"""Reconciliation in /metrics/: the last findings and age per storage (issue 15)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from freezegun import freeze_time
from prometheus_client.parser import text_string_to_metric_families

from retention.models import RecordState, RetentionRecord, RunStatus
from retention.selectors.reconcile_health import reappeared_overdue, reconciliations_last
from tests.factories import ReconcileRunFactory
from tests.helpers import enforce, put_tracked

pytestmark = pytest.mark.django_db

FINDINGS = ("orphans", "missing", "reappeared", "leftover_versions")


@pytest.fixture
def allowed(settings):
    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1"
    # Load the URLconf before a test freezes the clock (importing under freezegun warns).
    assert reverse("retention-metrics") == "/metrics/"
    return settings


def scrape(client: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics/")
    assert response.status_code == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def findings(samples: dict, storage: str) -> dict[str, float]:
    return {
        finding: samples[
            ("retention_reconcile_findings", (("finding", finding), ("storage", storage)))
        ]
        for finding in FINDINGS
    }


def age(samples: dict, storage: str) -> float:
    return samples[("retention_reconcile_age_seconds", (("storage", storage),))]


def reconcile_samples(samples: dict) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {key for key in samples if key[0].startswith("retention_reconcile_")}


def test_reconcile_gauges__the_last_finished_reconciliation_of_each_storage(client, allowed, now):
    ReconcileRunFactory(
        finished_at=now - timedelta(days=8),
        storages={
            "default": {"orphans": 7, "missing": 7},
            "s3": {"orphans": 4, "missing": 1, "reappeared": 2, "leftover_versions": 3},
        },
    )
    # A dry run observed the store as well: it is the last word on "default".
    ReconcileRunFactory(
        finished_at=now - timedelta(hours=6),
        dry_run=True,
        storages={"default": {"orphans": 1, "missing": 0, "reappeared": 0, "listed": 50}},
    )
    # Ended early: what it counted is not a full comparison.
    ReconcileRunFactory(
        status=RunStatus.ERROR, finished_at=now - timedelta(minutes=1), storages={"s3": {}}
    )

    with freeze_time(now):
        samples = scrape(client)

    assert findings(samples, "default") == {
        "orphans": 1,
        "missing": 0,
        "reappeared": 0,
        "leftover_versions": 0,
    }
    assert findings(samples, "s3") == {
        "orphans": 4,
        "missing": 1,
        "reappeared": 2,
        "leftover_versions": 3,
    }
    assert age(samples, "default") == 6 * 3600
    assert age(samples, "s3") == 8 * 86400
    # Only the four findings, per storage; the counts of what was compared are not findings.
    assert len(reconcile_samples(samples)) == 2 * 4 + 2


def test_reconcile_gauges__absent_before_any_reconciliation_finished(client, allowed, now):
    ReconcileRunFactory(status=RunStatus.REFUSED, finished_at=now, storages={})

    with freeze_time(now):
        samples = scrape(client)

    assert samples[("retention_gauges_up", ())] == 1
    assert reconcile_samples(samples) == set()


def test_reconcile_gauges__follow_the_ledger_between_scrapes(client, allowed, now):
    ReconcileRunFactory(finished_at=now - timedelta(days=7), storages={"default": {"orphans": 3}})

    with freeze_time(now):
        first = scrape(client)
        ReconcileRunFactory(finished_at=now, storages={"default": {"orphans": 0}})
        second = scrape(client)

    assert (findings(first, "default")["orphans"], age(first, "default")) == (3, 7 * 86400)
    assert (findings(second, "default")["orphans"], age(second, "default")) == (0, 0)


def test_reconcile_gauges__a_reappeared_record_not_deleted_again_breaks_the_promise(
    client, allowed, make_policy, now
):
    make_policy(period=timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=30))
    enforce(now=now)
    RetentionRecord.objects.filter(pk=record.pk).update(
        state=RecordState.ACTIVE, deleted_at=None, reappeared_at=now, reappearances=1
    )

    with freeze_time(now + timedelta(hours=24) - timedelta(seconds=1)):
        within = scrape(client)
    with freeze_time(now + timedelta(hours=24)):
        late = scrape(client)

    key = ("retention_promise_broken", (("data_class", "idv.photo"),))
    assert (within[key], late[key]) == (0, 1)


def test_reconcile_gauges__one_query_however_many_reconciliations(now, django_assert_num_queries):
    for days in range(6):
        ReconcileRunFactory(
            finished_at=now - timedelta(days=7 * days),
            storages={"default": {"orphans": days}, f"s3-{days % 2}": {"missing": days}},
        )

    with django_assert_num_queries(1):
        last = reconciliations_last()

    assert [(r.storage, r.counts["orphans"], r.counts["missing"]) for r in last] == [
        ("default", 0, 0),
        ("s3-0", 0, 0),
        ("s3-1", 0, 1),
    ]


@pytest.mark.postgres
def test_reappeared_overdue__reads_the_records_through_the_partial_index(make_policy, now):
    make_policy(period=timedelta(days=30))
    put_tracked(now=now - timedelta(days=30))
    queryset_sql: list[str] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "retention_retentionrecord" in sql and "reappeared_at" in sql:
            queryset_sql.append(connection.ops.compose_sql(sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        reappeared_overdue(now=now, promise=timedelta(hours=24))
    (sql,) = queryset_sql
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "retention_record_reappeared" in plan, plan
