"""The ``/metrics/`` endpoint: the engine's counters and where each data class stands.

The counters are ``retention.counters`` (a leaf the engine imports). The
gauges are not kept in memory at all: they are read from the database at
scrape time, so they are right however many qcluster processes on however
many hosts do the work. With ``PROMETHEUS_MULTIPROC_DIR`` set, the counters
of every process on the host are summed by prometheus_client's multiprocess
collector.

The view answers 404 while neither an allow list nor a token is configured
(the endpoint is off), and 403 to a client that is neither on the list nor
presents the token.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, multiprocess
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from retention.clock import db_now
from retention.conf import settings
from retention.counters import CLAIMED, REGISTRY  # noqa: F401  (CLAIMED: read by tests)
from retention.models import RecordState, RetentionRecord
from retention.selectors.anchors import anchor_status, anchoring_on
from retention.selectors.erasure import erasure_status
from retention.selectors.health import LagCheck, deleting_counts, lag_check

logger = logging.getLogger("retention.metrics")


class HealthCollector(Collector):
    """Gauges per data class, read from the database at each scrape."""

    def describe(self) -> list[Metric]:
        return []  # never touch the database when registered

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "retention_gauges_up", "1 when this scrape read the gauges from the database."
        )
        try:
            check = lag_check(now=db_now())
            deleting = deleting_counts()
            retrying = _retrying_counts()
        except DatabaseError:
            logger.exception("metrics: the database gauges could not be read")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up

        promise = GaugeMetricFamily(
            "retention_lag_promise_seconds",
            "RETENTION_LAG_PROMISE: an expired record is deleted within this many seconds.",
        )
        promise.add_metric([], check.promise.total_seconds())
        yield promise
        paused = GaugeMetricFamily("retention_paused", "1 while the kill switch stops new claims.")
        paused.add_metric([], 1 if check.paused is not None else 0)
        yield paused

        def family(name: str, documentation: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, documentation, labels=["data_class"])

        families = {
            "enforced": family(
                "retention_enforced", "1 when the class is enforced, 0 report-only."
            ),
            "broken": family(
                "retention_promise_broken",
                "1 when retention_check would fail for the class (enforced classes only).",
            ),
            "backlog": family(
                "retention_backlog_records",
                "Expired records not yet deleted and under no hold (eligible now).",
            ),
            "oldest": family(
                "retention_oldest_overdue_age_seconds",
                "Seconds since the oldest eligible record expired; 0 when none.",
            ),
            "held": family("retention_held_expired_records", "Expired records kept by a hold."),
            "deleting": family("retention_deleting_records", "Records in state deleting."),
            "failed": family(
                "retention_failed_for_review_records", "Failed records waiting for review."
            ),
            "retrying": family(
                "retention_retrying_records",
                "Records waiting for a retry after a transient error (a store unreachable, "
                "throttling); they are deleted by a later page or run.",
            ),
            "last": family(
                "retention_last_success_timestamp_seconds",
                "Unix time the last full enforcing run of the class finished; 0 when never.",
            ),
            "tripped": family(
                "retention_breaker_tripped",
                "1 while the volume breaker holds the class for review (nothing of it is "
                "deleted until an approver releases it).",
            ),
        }
        for item in check.classes:
            h = item.health
            label = [h.data_class]
            last = h.last_success.finished_at if h.last_success else None
            values = {
                "enforced": 1 if h.enforced else 0,
                "broken": 0 if item.ok else 1,
                "backlog": h.backlog,
                "oldest": max(h.overdue.total_seconds(), 0) if h.overdue is not None else 0,
                "held": h.held,
                "deleting": deleting.get(h.data_class, 0),
                "failed": h.failed_for_review,
                "retrying": retrying.get(h.data_class, 0),
                "last": last.timestamp() if last is not None else 0,
                "tripped": 1 if h.breaker is not None else 0,
            }
            for key, value in values.items():
                families[key].add_metric(label, value)
        yield from families.values()
        yield from _reconcile_families(check)
        yield from _anchor_families(check)
        yield from _erasure_families(check)


def _retrying_counts() -> dict[str, int]:
    """Records put back for a retry after a transient error, per data class."""
    rows = (
        RetentionRecord.objects.filter(state=RecordState.FAILED, retryable=True)
        .values_list("data_class")
        .annotate(n=Count("id"))
    )
    return dict(rows)


def _reconcile_families(check: LagCheck) -> Iterator[Metric]:
    """Per storage, the last finished reconciliation (dry runs too: they observed the store)."""
    findings = GaugeMetricFamily(
        "retention_reconcile_findings",
        "What the last finished reconciliation of the storage found, per finding.",
        labels=["storage", "finding"],
    )
    age = GaugeMetricFamily(
        "retention_reconcile_age_seconds",
        "Seconds since the last reconciliation of the storage finished; absent when never.",
        labels=["storage"],
    )
    for item in check.reconciliations:
        for finding, n in item.findings.items():
            findings.add_metric([item.storage, finding], n)
        age.add_metric([item.storage], max(item.age(check.now).total_seconds(), 0))
    yield findings
    yield age


def _anchor_families(check: LagCheck) -> Iterator[Metric]:
    """The chain head's last anchor outside the database (absent while anchoring is off)."""
    if not anchoring_on():
        return
    try:
        status = anchor_status()
    except DatabaseError:
        logger.exception("metrics: the chain head could not be read")
        return
    behind = GaugeMetricFamily(
        "retention_unanchored_batches",
        "Batches of the evidence chain appended since the last anchored head.",
    )
    behind.add_metric([], status.unanchored)
    yield behind
    if status.anchored_at is not None:
        age = GaugeMetricFamily(
            "retention_anchor_age_seconds", "Seconds since the chain head was last anchored."
        )
        age.add_metric([], max((check.now - status.anchored_at).total_seconds(), 0))
        yield age


def _erasure_families(check: LagCheck) -> Iterator[Metric]:
    """Erasure requests per state, and the open ones past their due date."""
    try:
        status = erasure_status(now=check.now)
    except DatabaseError:
        logger.exception("metrics: the erasure requests could not be read")
        return
    requests = GaugeMetricFamily(
        "retention_erasure_requests", "Erasure requests in each state.", labels=["state"]
    )
    for state, n in status.by_state.items():
        requests.add_metric([state], n)
    yield requests
    overdue = GaugeMetricFamily(
        "retention_erasure_overdue", "Erasure requests past their due date, not finished."
    )
    overdue.add_metric([], len(status.overdue))
    yield overdue


# The gauges join the counters' registry, read at scrape time.
REGISTRY.register(HealthCollector())


def _scrape_registry() -> CollectorRegistry:
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    # Every process's counters, from the files they write; gauges as always.
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(HealthCollector())
    return registry


def _address(value: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address((value or "").strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def client_allowed(request: HttpRequest) -> bool | None:
    """True or False for this client; None when the endpoint is not configured.

    The address is REMOTE_ADDR, never X-Forwarded-For, which any client can
    write. Behind a proxy, use the token.
    """
    token = settings.METRICS_TOKEN
    try:
        networks = settings.METRICS_ALLOWED_IPS
    except ValueError:
        logger.error("RETENTION_METRICS_ALLOWED_IPS cannot be read; no address is allowed")
        networks = ()
    if not token and not networks:
        return None
    if token:
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            presented.strip().encode(), token.encode()
        ):
            return True
    address = _address(request.META.get("REMOTE_ADDR"))
    return address is not None and any(address in network for network in networks)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    allowed = client_allowed(request)
    if allowed is None:
        raise Http404("metrics are not enabled")
    if not allowed:
        return HttpResponseForbidden("not allowed to read the metrics\n")
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(_scrape_registry()), content_type=content_type)
