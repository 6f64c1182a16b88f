"""How a task reaches django-q2's broker: one publish for every publisher of the app.

The engine publishes runs' dispatchers and batches (``retention.engine.publish``),
the hold mirror its queued batches (``retention.services.hold_mirror``); both
publish through here, so the services need not import the engine to publish
a task. A leaf: it imports django-q2 and nothing of the app.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from django_q.tasks import async_task

# (dotted task path, payload, task name) -> None; raises when it cannot publish.
Publish = Callable[[str, dict[str, Any], str], None]


def publish_task(func: str, payload: dict[str, Any], name: str) -> None:
    """Publish one task through django-q2 to this project's cluster."""
    async_task(func, payload, task_name=name, group="retention")


_publishers: dict[int, Publish] = {}


def batch_publisher() -> Publish:
    """A publisher holding one broker per process for the many batches it publishes.

    Building a broker per task would, on the ORM broker, also close and
    reopen the database connection every time, and on Redis open a new
    connection pool. Keyed by process id: a forked worker builds its own.
    """
    pid = os.getpid()
    if pid not in _publishers:
        from django_q.brokers import get_broker

        broker = get_broker()

        def publish(func: str, payload: dict[str, Any], name: str) -> None:
            async_task(func, payload, task_name=name, group="retention", broker=broker)

        _publishers.clear()
        _publishers[pid] = publish
    return _publishers[pid]
