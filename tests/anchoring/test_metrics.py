"""The last anchor in /metrics/: batches not anchored yet, and the anchor's age."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.urls import reverse
from freezegun import freeze_time
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import put_tracked

pytestmark = pytest.mark.django_db


@pytest.fixture
def allowed(settings):
    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1"
    # Load the URLconf before a test freezes the clock (importing under freezegun warns).
    assert reverse("retention-metrics") == "/metrics/"
    return settings


def scrape(client: Any) -> dict[str, float]:
    response = client.get("/metrics/")
    assert response.status_code == 200
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
        if "anchor" in sample.name
    }


def test_anchor_gauges__age_and_batches_since_the_last_anchor(
    client, allowed, make_policy, now, anchor_dir, anchored_run
):
    make_policy()
    put_tracked(now=now - timedelta(days=40))
    with freeze_time(now):
        assert scrape(client) == {"retention_unanchored_batches": 0.0}
    anchored_run(now=now)
    with override_settings(RETENTION_SIGNING_KEY=""):  # a run whose head is not anchored
        put_tracked(now=now - timedelta(days=40))
        anchored_run(now=now + timedelta(minutes=1))

    with freeze_time(now + timedelta(minutes=10)):
        samples = scrape(client)

    assert samples == {"retention_unanchored_batches": 1.0, "retention_anchor_age_seconds": 600.0}


def test_anchor_gauges__absent_while_anchoring_is_off(client, allowed, settings):
    settings.RETENTION_SIGNING_KEY = ""

    assert scrape(client) == {}
