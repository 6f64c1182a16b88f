"""Prometheus metrics: engine counters after commit, database gauges, a guarded endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import storages
from django.db import transaction
from django.urls import reverse
from freezegun import freeze_time
from prometheus_client.parser import text_string_to_metric_families

from retention import api, engine, metrics
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.models import RecordState, RetentionRecord, RunMode
from retention.storage import KeyResult, Outcome
from tests.helpers import enforce, put_tracked

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[1]
URL = "/metrics/"
TOKEN = "t" * 40


def counter(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(f"retention_records_{name}_total", labels) or 0.0


def scrape(client: Any, **headers: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get(URL, **headers)
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def gauge(samples: dict, name: str, data_class: str | None = None) -> float:
    labels = (("data_class", data_class),) if data_class else ()
    return samples[(name, labels)]


@pytest.fixture
def allowed(settings):
    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1"  # the test client's REMOTE_ADDR
    # Import the URLconf (and the C extensions behind it) before any test
    # freezes the clock: importing them under freezegun warns.
    assert reverse("retention-metrics") == URL
    return settings


# --------------------------------------------------------------------------
# Counters


def test_counters__an_enforce_run_counts_per_data_class_after_commit(
    make_policy, now, django_capture_on_commit_callbacks
):
    make_policy()
    make_policy(data_class="pod.scan")
    photos = [put_tracked(now=now - timedelta(days=31)) for _ in range(3)]
    put_tracked(data_class="pod.scan", now=now - timedelta(days=31))
    storages["default"].delete(photos[0].object_key)  # gone before the run: already absent
    before = {
        (name, dc): counter(name, data_class=dc)
        for name in ("claimed", "deleted", "already_absent")
        for dc in ("idv.photo", "pod.scan")
    }

    with django_capture_on_commit_callbacks(execute=True):
        run = enforce(now=now)

    assert (run.deleted, run.already_absent) == (3, 1)
    delta = {key: counter(key[0], data_class=key[1]) - value for key, value in before.items()}
    assert delta == {
        ("claimed", "idv.photo"): 3,
        ("deleted", "idv.photo"): 2,
        ("already_absent", "idv.photo"): 1,
        ("claimed", "pod.scan"): 1,
        ("deleted", "pod.scan"): 1,
        ("already_absent", "pod.scan"): 0,
    }


def test_counters__a_rolled_back_claim_counts_nothing(
    make_policy, now, django_capture_on_commit_callbacks
):
    make_policy()
    put_tracked(now=now - timedelta(days=31))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    before = counter("claimed", data_class="idv.photo")

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        claim = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)
        assert len(claim) == 1
        raise RuntimeError("the page's transaction fails")

    assert callbacks == []
    assert counter("claimed", data_class="idv.photo") == before
    assert RetentionRecord.objects.get().state == RecordState.ACTIVE


def test_counters__skips_by_reason(make_policy, now, approver, django_capture_on_commit_callbacks):
    make_policy()
    held = put_tracked(now=now - timedelta(days=31))
    renewed = put_tracked(now=now - timedelta(days=31))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    before = {r: counter("skipped", data_class="idv.photo", reason=r) for r in ("held", "renewed")}

    with django_capture_on_commit_callbacks(execute=True):
        claim = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)
        api.place_hold(reason="Regulator request", placed_by=approver, now=now, record=held)
        api.renew(renewed, now=now)
        engine.claim_dispose(claim=claim, clock=lambda: now)

    after = {r: counter("skipped", data_class="idv.photo", reason=r) for r in ("held", "renewed")}
    assert {r: after[r] - before[r] for r in after} == {"held": 1, "renewed": 1}


class Answering(ObjectDisposer):
    """Answers one outcome for every key: the storage failing as a test needs."""

    def __init__(self, outcome: str, reason: str) -> None:
        super().__init__()
        self.outcome, self.reason = outcome, reason

    def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
        return {i.record_id: KeyResult(i.object_key, self.outcome, self.reason) for i in items}


@pytest.mark.parametrize(
    ("outcome", "counted"),
    [(Outcome.TRANSIENT, "retried"), (Outcome.PERMANENT, "failed")],
)
def test_counters__retried_and_failed(
    make_policy, now, outcome, counted, django_capture_on_commit_callbacks
):
    make_policy()
    put_tracked(now=now - timedelta(days=31))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    before = {name: counter(name, data_class="idv.photo") for name in ("retried", "failed")}

    with django_capture_on_commit_callbacks(execute=True):
        claim = engine.records_claim(run=run, data_class="idv.photo", limit=10, now=now)
        engine.claim_dispose(
            claim=claim, clock=lambda: now, disposer=Answering(outcome, "SlowDown"), max_attempts=3
        )

    delta = {name: counter(name, data_class="idv.photo") - before[name] for name in before}
    assert delta == {"retried": 0, "failed": 0, counted: 1}


# --------------------------------------------------------------------------
# Gauges


@pytest.fixture
def fleet(make_policy, now, approver):
    """idv.photo (enforced): 2 eligible (oldest 3 days overdue), 1 held, 1 deleting,
    1 failed; swept once a week ago. logs.integration: report-only, 1 eligible."""
    make_policy(period=timedelta(days=30))
    make_policy(data_class="logs.integration", period=timedelta(days=7), enforce=False)
    sweep = enforce(now=now - timedelta(days=7))
    put_tracked(now=now - timedelta(days=33))  # 3 days overdue
    put_tracked(now=now - timedelta(days=31))
    held = put_tracked(tenant_id="globex", now=now - timedelta(days=32))
    api.place_hold(reason="Case 9", placed_by=approver, now=now, tenant_id="globex")
    deleting = put_tracked(now=now - timedelta(days=1))
    RetentionRecord.objects.filter(pk=deleting.pk).update(
        state=RecordState.DELETING, lease_owner=sweep.lease_owner, lease_expires_at=now
    )
    failed = put_tracked(now=now - timedelta(days=40))
    RetentionRecord.objects.filter(pk=failed.pk).update(state=RecordState.FAILED, retryable=False)
    put_tracked(data_class="logs.integration", now=now - timedelta(days=8))
    return {"sweep": sweep, "held": held}


def test_gauges__read_from_the_database_at_scrape_time(client, allowed, fleet, now):
    with freeze_time(now):
        samples = scrape(client)

    assert gauge(samples, "retention_gauges_up") == 1
    assert gauge(samples, "retention_lag_promise_seconds") == 86400
    assert gauge(samples, "retention_paused") == 0
    photo = {
        name: gauge(samples, f"retention_{name}", "idv.photo")
        for name in (
            "enforced",
            "promise_broken",
            "backlog_records",
            "oldest_overdue_age_seconds",
            "held_expired_records",
            "deleting_records",
            "failed_for_review_records",
            "last_success_timestamp_seconds",
        )
    }
    assert photo == {
        "enforced": 1,
        "promise_broken": 1,
        "backlog_records": 2,
        "oldest_overdue_age_seconds": 3 * 86400,
        "held_expired_records": 1,
        "deleting_records": 1,
        "failed_for_review_records": 1,
        "last_success_timestamp_seconds": fleet["sweep"].finished_at.timestamp(),
    }
    assert gauge(samples, "retention_enforced", "logs.integration") == 0
    assert gauge(samples, "retention_promise_broken", "logs.integration") == 0
    assert gauge(samples, "retention_backlog_records", "logs.integration") == 1
    assert gauge(samples, "retention_last_success_timestamp_seconds", "logs.integration") == 0


def test_gauges__see_work_done_by_another_process(client, allowed, fleet, now):
    with freeze_time(now):
        first = scrape(client)
        # Another worker process finishes the backlog: only the database knows.
        RetentionRecord.objects.filter(data_class="idv.photo").exclude(tenant_id="globex").update(
            state=RecordState.DELETED, deleted_at=now, lease_owner=None, lease_expires_at=None
        )
        second = scrape(client)

    assert gauge(first, "retention_backlog_records", "idv.photo") == 2
    assert gauge(second, "retention_backlog_records", "idv.photo") == 0
    assert gauge(second, "retention_deleting_records", "idv.photo") == 0
    assert gauge(second, "retention_oldest_overdue_age_seconds", "idv.photo") == 0


def test_metrics__multiprocess_mode_sums_the_counters_of_every_process(
    client, allowed, fleet, now, tmp_path, monkeypatch
):
    # Two worker processes count claims into the shared directory, as qcluster
    # workers do with PROMETHEUS_MULTIPROC_DIR set.
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    for n in (5, 7):
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import django; django.setup(); from retention import metrics; "
                f"metrics.CLAIMED.labels(data_class='idv.photo').inc({n})",
            ],
            env=env,
            cwd=REPO,
            check=True,
            timeout=60,
        )
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    with freeze_time(now):
        samples = scrape(client)

    key = ("retention_records_claimed_total", (("data_class", "idv.photo"),))
    assert samples[key] == 12
    assert gauge(samples, "retention_backlog_records", "idv.photo") == 2


# --------------------------------------------------------------------------
# Who may scrape


def test_endpoint__off_without_an_allow_list_or_token(client, settings):
    settings.RETENTION_METRICS_ALLOWED_IPS = ""
    settings.RETENTION_METRICS_TOKEN = ""

    assert client.get(URL).status_code == 404
    assert reverse("retention-metrics") == URL


@pytest.mark.parametrize(
    ("allow", "remote", "status"),
    [
        ("127.0.0.1", "127.0.0.1", 200),
        ("10.0.0.0/8, 192.168.1.0/24", "10.20.30.40", 200),
        ("10.0.0.0/8", "::ffff:10.1.2.3", 200),  # IPv4 client on a dual-stack socket
        ("fd00::/8", "fd00::1", 200),
        (["10.0.0.0/8", "::1"], "::1", 200),
        ("10.0.0.0/8", "11.0.0.1", 403),
        ("10.0.0.0/8", "fd00::1", 403),
        ("10.0.0.0/8", "not-an-address", 403),
    ],
)
def test_endpoint__allow_list_of_networks(client, settings, allow, remote, status):
    settings.RETENTION_METRICS_ALLOWED_IPS = allow

    assert client.get(URL, REMOTE_ADDR=remote).status_code == status


def test_endpoint__forwarded_for_header_is_not_trusted(client, settings):
    settings.RETENTION_METRICS_ALLOWED_IPS = "10.0.0.0/8"

    response = client.get(URL, REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="10.0.0.1")

    assert response.status_code == 403


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (f"Bearer {TOKEN}", 200),
        (f"bearer {TOKEN}", 200),
        (f"Bearer {TOKEN}x", 403),
        (f"Api-Key {TOKEN}", 403),
        ("Bearer ", 403),
        (None, 403),
    ],
)
def test_endpoint__bearer_token_from_any_address(client, settings, authorization, status):
    settings.RETENTION_METRICS_TOKEN = TOKEN
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}

    response = client.get(URL, REMOTE_ADDR="203.0.113.9", **headers)

    assert response.status_code == status


def test_endpoint__malformed_allow_list_allows_nobody(client, settings):
    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1,10.0.0.0/33"

    assert client.get(URL).status_code == 404


def test_endpoint__only_get(client, allowed):
    assert client.post(URL).status_code == 405


def test_endpoint__openmetrics_when_asked(client, allowed):
    response = client.get(URL, HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")
