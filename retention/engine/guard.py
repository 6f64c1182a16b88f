"""The foreground guard: deletion waits while the host's own work is behind.

Retention shares its worker pool, database and broker with the host's
foreground jobs (shipments, notifications...). Before claiming the next
pages, a queued run's advance asks :func:`foreground_guard_read`; while the
reading is over its budget it publishes nothing, the run counts the work as
``deferred``, and the watchdog asks again a minute later.

The signal is pluggable (``RETENTION_FOREGROUND_GUARD``, a dotted path
resolved at each call). The default, :func:`oldest_queued_task_age`, is how
long the oldest task still waiting for a worker has waited in one named
django-q2 queue (``RETENTION_FOREGROUND_QUEUE``), on the ORM or Redis broker.

The guard fails closed: a signal that raises reads as over budget. Flooding
the foreground is worse than a late deletion, and a deletion held back too
long shows up in ``retention_check`` as lag.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from django.db.models import Count, Min
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.brokers import get_broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from retention.conf import settings

if TYPE_CHECKING:
    import redis

# The logger keeps its name from before the guard moved into the engine:
# hosts route and filter it by that name (docs/operations.md).
logger = logging.getLogger("retention.guard")

DEFAULT_SIGNAL = "retention.engine.guard.oldest_queued_task_age"
# The default's path before the guard moved into the engine (issue 27). Hosts
# may name it in their settings; the module ``retention.guard`` is kept for it.
OLD_DEFAULT_SIGNAL = "retention.guard.oldest_queued_task_age"

BrokerKind = Literal["orm", "redis", "unsupported"]


@dataclass(frozen=True, slots=True)
class GuardReading:
    over_budget: bool
    # The signal's figure, e.g. seconds the oldest waiting task has waited;
    # None when nothing is waiting or there is no signal.
    value: float | None
    budget: float | None
    # One short line for logs, the run report and progress output; no secrets.
    detail: str


def foreground_guard_read(*, now: datetime) -> GuardReading:
    """Read the configured foreground signal; over budget if it cannot be read."""
    path = "RETENTION_FOREGROUND_GUARD"
    try:
        path = settings.FOREGROUND_GUARD
        if not path:
            return GuardReading(
                over_budget=False,
                value=None,
                budget=None,
                detail="foreground guard off (RETENTION_FOREGROUND_GUARD is empty)",
            )
        signal = import_string(path)
        reading = signal(now=now)
        if not isinstance(reading, GuardReading):
            raise TypeError(f"{path} returned {type(reading).__name__}, not a GuardReading")
    except Exception as exc:
        logger.exception(
            "foreground guard %s could not be read; treating the foreground as over budget",
            path,
        )
        return GuardReading(
            over_budget=True,
            value=None,
            budget=None,
            detail=f"foreground guard failed ({type(exc).__name__}); dispatch held",
        )
    return reading


def oldest_queued_task_age(*, now: datetime) -> GuardReading:
    """Seconds the oldest task waiting in ``RETENTION_FOREGROUND_QUEUE`` has waited.

    A task waits from the moment a worker could take it until one does: on
    the ORM broker from its ``lock`` (the enqueue time, or the time an
    unacknowledged task was re-presented), on Redis from its enqueue time
    (``started`` in the payload; Redis never re-presents). Taken tasks are
    not waiting. Over budget when that age exceeds
    ``RETENTION_FOREGROUND_BUDGET_SECONDS``.
    """
    queue = settings.FOREGROUND_QUEUE
    if not queue:
        return GuardReading(
            over_budget=False,
            value=None,
            budget=None,
            detail="foreground guard off (RETENTION_FOREGROUND_QUEUE is not set)",
        )
    budget = settings.FOREGROUND_BUDGET_SECONDS
    kind, label = broker_kind()
    if kind == "orm":
        waiting, oldest = _orm_oldest_waiting(queue, now=now)
    elif kind == "redis":
        waiting, oldest = _redis_oldest_waiting(queue)
    else:
        return GuardReading(
            over_budget=False,
            value=None,
            budget=budget,
            detail=f"foreground guard unsupported: cannot read queue {queue!r} "
            f"on the {label} broker",
        )
    if oldest is None:
        return GuardReading(
            over_budget=False,
            value=None,
            budget=budget,
            detail=f"queue {queue!r}: nothing waiting (budget {budget:g} s)",
        )
    # A clock ahead of ours (another host, or a caller's fixed now) is no wait.
    age = max(0.0, (now - oldest).total_seconds())
    over = age > budget
    return GuardReading(
        over_budget=over,
        value=age,
        budget=budget,
        detail=f"queue {queue!r}: {waiting} waiting, the oldest for {age:.1f} s "
        f"({'over' if over else 'within'} budget {budget:g} s)",
    )


def broker_kind() -> tuple[BrokerKind, str]:
    """Which broker django-q2 would use, and a label for it, without connecting.

    Follows the order of ``django_q.brokers.get_broker``. Building an SQS or
    IronMQ broker talks to the service, so a system check must not do it.
    """
    if Conf.BROKER_CLASS:
        broker_class = import_string(Conf.BROKER_CLASS)
        if issubclass(broker_class, ORM):
            return "orm", Conf.BROKER_CLASS
        try:  # the redis package is optional
            from django_q.brokers.redis_broker import Redis
        except ImportError:
            return "unsupported", Conf.BROKER_CLASS
        if issubclass(broker_class, Redis):
            return "redis", Conf.BROKER_CLASS
        return "unsupported", Conf.BROKER_CLASS
    if Conf.IRON_MQ:
        return "unsupported", "IronMQ"
    if isinstance(Conf.SQS, dict):
        return "unsupported", "SQS"
    if Conf.ORM:
        return "orm", "ORM"
    if Conf.MONGO:
        return "unsupported", "MongoDB"
    return "redis", "Redis"


def _orm_oldest_waiting(queue: str, *, now: datetime) -> tuple[int, datetime | None]:
    # The ORM broker's own connection is this queryset; building the broker
    # (get_broker) would call close_old_connections(), which with
    # CONN_MAX_AGE=0 drops the caller's database connection on every read.
    # enqueue() sets lock=now and dequeue() moves it into the future until the
    # task is acknowledged, so lock <= now is "waiting since lock".
    row = (
        OrmQ.objects.using(Conf.ORM)
        .filter(key=queue, lock__lte=now)
        .aggregate(waiting=Count("id"), oldest=Min("lock"))
    )
    return row["waiting"], row["oldest"]


def _redis_oldest_waiting(queue: str) -> tuple[int, datetime | None]:
    broker = get_broker(list_key=queue)
    connection: redis.Redis = broker.connection
    try:
        # rpush to enqueue, blpop to take: the head of the list is the oldest.
        pipe = connection.pipeline(transaction=True)
        pipe.llen(broker.list_key)
        pipe.lindex(broker.list_key, 0)
        waiting, head = pipe.execute()
    finally:
        connection.close()
    if head is None:
        return 0, None
    started = SignedPackage.loads(head)["started"]
    if timezone.is_naive(started):
        started = timezone.make_aware(started)
    return int(waiting), started
