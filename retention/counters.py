"""Prometheus counters of what the engine did: a leaf module anyone may import.

Counters live in the process that did the work and are incremented only once
the page's transaction committed, so a rolled-back page counts nothing. With
``PROMETHEUS_MULTIPROC_DIR`` set, prometheus_client writes them to files that
the scrape (``retention.metrics``) sums over every process of the host.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction
from prometheus_client import CollectorRegistry, Counter

REGISTRY = CollectorRegistry()

CLAIMED = Counter(
    "retention_records_claimed",
    "Records claimed for disposal.",
    ["data_class"],
    registry=REGISTRY,
)
DELETED = Counter(
    "retention_records_deleted", "Objects deleted.", ["data_class"], registry=REGISTRY
)
ALREADY_ABSENT = Counter(
    "retention_records_already_absent",
    "Records whose object was already gone (a success).",
    ["data_class"],
    registry=REGISTRY,
)
SKIPPED = Counter(
    "retention_records_skipped",
    "Claimed records released at the re-check: reason held (a legal hold) or renewed.",
    ["data_class", "reason"],
    registry=REGISTRY,
)
FAILED = Counter(
    "retention_records_failed",
    "Records given up on: failed, waiting for review.",
    ["data_class"],
    registry=REGISTRY,
)
RETRIED = Counter(
    "retention_records_retried",
    "Transient failures put back for a retry with backoff.",
    ["data_class"],
    registry=REGISTRY,
)
GATE_THROTTLED = Counter(
    "retention_rate_gate_throttled",
    "Times a shared rate gate slowed down because the store throttled (429, 503 SlowDown).",
    ["gate"],
    registry=REGISTRY,
)

# The engine's count names (run counters) → counter and fixed labels.
_COUNTERS: dict[str, tuple[Counter, dict[str, str]]] = {
    "claimed": (CLAIMED, {}),
    "deleted": (DELETED, {}),
    "already_absent": (ALREADY_ABSENT, {}),
    "skipped_held": (SKIPPED, {"reason": "held"}),
    "skipped_renewed": (SKIPPED, {"reason": "renewed"}),
    "failed": (FAILED, {}),
    "retried": (RETRIED, {}),
}


def count_on_commit(data_class: str, counts: Mapping[str, int]) -> None:
    """Add the engine's ``counts`` to the counters once the current transaction commits."""
    added = {name: n for name, n in counts.items() if n and name in _COUNTERS}
    if not added:
        return

    def add() -> None:
        for name, n in added.items():
            counter, labels = _COUNTERS[name]
            counter.labels(data_class=data_class, **labels).inc(n)

    # robust: a metrics failure must never fail the engine after its commit.
    transaction.on_commit(add, robust=True)
