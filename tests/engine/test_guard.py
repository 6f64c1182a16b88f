"""The foreground guard (SPEC §2 Pacing): dispatch holds while the host's queue is behind.

The default signal is read from real brokers: django-q2's ORM broker in the
test database, and a Redis server at REDIS_URL (marker ``redis``). Tasks are
published with django-q2's own ``async_task`` and taken with the broker's own
``dequeue``, as a worker would.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.tasks import async_task
from freezegun import freeze_time

from retention.conf import settings as retention_settings
from retention.engine.guard import (
    DEFAULT_SIGNAL,
    OLD_DEFAULT_SIGNAL,
    GuardReading,
    foreground_guard_read,
    oldest_queued_task_age,
)

T0 = datetime(2026, 3, 14, 12, 0, 0, tzinfo=UTC)
QUEUE = "shipments"


def publish(queue: str, at: datetime) -> None:
    with freeze_time(at):
        async_task("math.floor", 1.5, cluster=queue)


def read(seconds_after_t0: float) -> GuardReading:
    return foreground_guard_read(now=T0 + timedelta(seconds=seconds_after_t0))


def use_broker(monkeypatch: pytest.MonkeyPatch, *, orm: str | None, redis: str | None) -> None:
    """Point django-q2's broker selection (Conf is read once at import) at one broker."""
    for name in ("BROKER_CLASS", "IRON_MQ", "SQS", "MONGO", "DJANGO_REDIS"):
        monkeypatch.setattr(Conf, name, None)
    monkeypatch.setattr(Conf, "ORM", orm)
    monkeypatch.setattr(Conf, "REDIS", redis or {})
    monkeypatch.setattr(Conf, "SYNC", False)


@pytest.fixture
def orm_queue(db, monkeypatch, settings) -> str:
    use_broker(monkeypatch, orm="default", redis=None)
    settings.RETENTION_FOREGROUND_QUEUE = QUEUE
    settings.RETENTION_FOREGROUND_BUDGET_SECONDS = 30
    return QUEUE


@pytest.fixture
def redis_queue(monkeypatch, settings) -> Iterator[str]:
    use_broker(monkeypatch, orm=None, redis=os.environ["REDIS_URL"])
    queue = f"lethe-guard-test-{uuid.uuid4().hex}"
    settings.RETENTION_FOREGROUND_QUEUE = queue
    settings.RETENTION_FOREGROUND_BUDGET_SECONDS = 30
    yield queue
    broker = get_broker(list_key=queue)
    broker.delete_queue()
    broker.connection.close()


# --------------------------------------------------------------------------
# Off unless configured


def test_guard__off_when_no_queue_is_named(settings):
    settings.RETENTION_FOREGROUND_QUEUE = None

    reading = read(0)

    assert reading.over_budget is False
    assert reading.value is None
    assert "RETENTION_FOREGROUND_QUEUE" in reading.detail


@pytest.mark.parametrize("value", [None, ""])
def test_guard__empty_setting_turns_the_guard_off(settings, value):
    settings.RETENTION_FOREGROUND_GUARD = value
    settings.RETENTION_FOREGROUND_QUEUE = QUEUE

    reading = read(0)

    assert reading == GuardReading(
        over_budget=False,
        value=None,
        budget=None,
        detail="foreground guard off (RETENTION_FOREGROUND_GUARD is empty)",
    )


# --------------------------------------------------------------------------
# ORM broker


def test_guard_orm__empty_queue_is_within_budget(orm_queue):
    reading = read(0)

    assert reading.over_budget is False
    assert reading.value is None
    assert reading.budget == 30
    assert "nothing waiting" in reading.detail


@pytest.mark.parametrize(("waited", "over"), [(10, False), (30, False), (30.5, True), (3600, True)])
def test_guard_orm__over_budget_once_the_oldest_task_waited_longer_than_the_budget(
    orm_queue, waited, over
):
    publish(orm_queue, T0)

    reading = read(waited)

    assert reading.over_budget is over
    assert reading.value == waited
    assert reading.budget == 30


def test_guard_orm__the_oldest_waiting_task_sets_the_age(orm_queue):
    publish(orm_queue, T0)
    publish(orm_queue, T0 + timedelta(seconds=20))

    reading = read(45)

    assert reading.over_budget is True
    assert reading.value == 45
    assert reading.detail == (
        "queue 'shipments': 2 waiting, the oldest for 45.0 s (over budget 30 s)"
    )


def test_guard__the_default_setting_names_the_engines_signal():
    assert retention_settings.FOREGROUND_GUARD == DEFAULT_SIGNAL
    assert DEFAULT_SIGNAL == "retention.engine.guard.oldest_queued_task_age"


@pytest.mark.parametrize("path", [DEFAULT_SIGNAL, OLD_DEFAULT_SIGNAL])
def test_guard_orm__the_default_signal_reads_by_its_path_and_by_its_old_one(
    orm_queue, settings, path
):
    # Hosts may still name "retention.guard.oldest_queued_task_age" (the
    # default until issue 27): the kept module retention.guard resolves it.
    settings.RETENTION_FOREGROUND_GUARD = path
    publish(orm_queue, T0)

    reading = read(45)

    assert reading.over_budget is True
    assert reading.detail == (
        "queue 'shipments': 1 waiting, the oldest for 45.0 s (over budget 30 s)"
    )


def test_guard__the_kept_module_is_the_engines_guard():
    import retention.guard as kept

    assert kept.GuardReading is GuardReading
    assert kept.oldest_queued_task_age is oldest_queued_task_age
    import retention.engine.guard as guard

    for name in ("DEFAULT_SIGNAL", "broker_kind", "foreground_guard_read"):
        assert getattr(kept, name) is getattr(guard, name), name


def test_guard_orm__budget_comes_from_the_setting(orm_queue, settings):
    settings.RETENTION_FOREGROUND_BUDGET_SECONDS = 5
    publish(orm_queue, T0)

    reading = read(6)

    assert reading.over_budget is True
    assert reading.budget == 5


def test_guard_orm__a_task_taken_by_a_worker_is_not_waiting(orm_queue):
    publish(orm_queue, T0)
    broker = get_broker(list_key=orm_queue)
    with freeze_time(T0 + timedelta(seconds=1)):
        assert len(broker.dequeue()) == 1

    reading = read(45)

    assert reading.over_budget is False
    assert reading.value is None


def test_guard_orm__a_re_presented_task_waits_from_its_re_presentation(orm_queue, monkeypatch):
    # A worker took it at T0+1 and never acknowledged it: django-q2 offers it
    # again once its lock (T0+1+retry) has passed. It is behind because a
    # worker died, not because the pool is busy; it has waited 5 s for one.
    monkeypatch.setattr(Conf, "RETRY", 60)
    publish(orm_queue, T0)
    broker = get_broker(list_key=orm_queue)
    with freeze_time(T0 + timedelta(seconds=1)):
        broker.dequeue()

    reading = read(1 + 60 + 5)

    assert reading.value == 5
    assert reading.over_budget is False


def test_guard_orm__tasks_in_other_queues_do_not_count(orm_queue):
    publish("lethe", T0)
    publish("notifications", T0)

    reading = read(3600)

    assert reading.over_budget is False
    assert reading.value is None


def test_guard_orm__a_broker_class_built_on_the_orm_broker_is_read_like_it(orm_queue, monkeypatch):
    monkeypatch.setattr(Conf, "BROKER_CLASS", "django_q.brokers.orm.ORM")
    publish(orm_queue, T0)

    assert read(45).value == 45


@pytest.mark.django_db(transaction=True)
def test_guard_orm__reading_keeps_the_callers_database_connection(monkeypatch, settings):
    # Building django-q2's ORM broker calls close_old_connections(), which with
    # CONN_MAX_AGE=0 drops the connection of a dispatcher in autocommit.
    use_broker(monkeypatch, orm="default", redis=None)
    settings.RETENTION_FOREGROUND_QUEUE = QUEUE
    connection.ensure_connection()
    before = connection.connection

    read(0)

    assert connection.connection is before


# --------------------------------------------------------------------------
# Redis broker


@pytest.mark.redis
def test_guard_redis__empty_queue_is_within_budget(redis_queue):
    reading = read(0)

    assert reading.over_budget is False
    assert reading.value is None
    assert "nothing waiting" in reading.detail


@pytest.mark.redis
@pytest.mark.parametrize(("waited", "over"), [(10, False), (30, False), (45, True)])
def test_guard_redis__over_budget_once_the_oldest_task_waited_longer_than_the_budget(
    redis_queue, waited, over
):
    publish(redis_queue, T0)

    reading = read(waited)

    assert reading.over_budget is over
    assert reading.value == waited


@pytest.mark.redis
def test_guard_redis__the_head_of_the_list_sets_the_age(redis_queue):
    publish(redis_queue, T0)
    publish(redis_queue, T0 + timedelta(seconds=20))

    reading = read(45)

    assert reading.value == 45
    assert reading.detail == (
        f"queue {redis_queue!r}: 2 waiting, the oldest for 45.0 s (over budget 30 s)"
    )


@pytest.mark.redis
def test_guard_redis__a_task_taken_by_a_worker_is_not_waiting(redis_queue):
    publish(redis_queue, T0)
    publish(redis_queue, T0 + timedelta(seconds=20))
    broker = get_broker(list_key=redis_queue)
    try:
        assert len(broker.dequeue()) == 1
    finally:
        broker.connection.close()

    reading = read(45)

    assert reading.value == 25
    assert reading.over_budget is False


@pytest.mark.redis
def test_guard_redis__tasks_in_other_queues_do_not_count(redis_queue):
    other = f"{redis_queue}-other"
    publish(other, T0)
    try:
        reading = read(3600)
    finally:
        broker = get_broker(list_key=other)
        broker.delete_queue()
        broker.connection.close()

    assert reading.value is None


# --------------------------------------------------------------------------
# Unsupported brokers


def test_guard__unsupported_broker_reads_as_unsupported_without_connecting(monkeypatch, settings):
    use_broker(monkeypatch, orm=None, redis=None)
    monkeypatch.setattr(Conf, "SQS", {"aws_region": "eu-west-1"})
    settings.RETENTION_FOREGROUND_QUEUE = QUEUE

    reading = read(0)

    assert reading.over_budget is False
    assert reading.value is None
    assert reading.detail == (
        "foreground guard unsupported: cannot read queue 'shipments' on the SQS broker"
    )


# --------------------------------------------------------------------------
# Pluggable signal


def quiet_foreground(*, now: datetime) -> GuardReading:
    return GuardReading(over_budget=False, value=0.5, budget=2.0, detail=f"quiet at {now:%H:%M}")


def busy_foreground(*, now: datetime) -> GuardReading:
    return GuardReading(over_budget=True, value=9.0, budget=2.0, detail="busy")


def broken_signal(*, now: datetime) -> GuardReading:
    raise RuntimeError("password=hunter2 leaked in a message")


def not_a_reading(*, now: datetime) -> dict:
    return {"over_budget": False}


def test_guard__a_custom_signal_from_the_setting_is_read(settings):
    settings.RETENTION_FOREGROUND_GUARD = "tests.engine.test_guard.quiet_foreground"

    reading = read(0)

    assert reading == GuardReading(
        over_budget=False, value=0.5, budget=2.0, detail="quiet at 12:00"
    )


def test_guard__the_signal_is_resolved_at_each_call(settings):
    settings.RETENTION_FOREGROUND_GUARD = "tests.engine.test_guard.quiet_foreground"
    assert read(0).over_budget is False

    settings.RETENTION_FOREGROUND_GUARD = "tests.engine.test_guard.busy_foreground"

    assert read(0).over_budget is True


# --------------------------------------------------------------------------
# Fail closed


def test_guard__a_signal_that_raises_fails_closed_and_logs_an_error(settings, caplog):
    settings.RETENTION_FOREGROUND_GUARD = "tests.engine.test_guard.broken_signal"

    with caplog.at_level(logging.ERROR, logger="retention.guard"):
        reading = read(0)

    assert reading.over_budget is True
    assert reading.value is None
    assert reading.detail == "foreground guard failed (RuntimeError); dispatch held"
    assert [(r.name, r.levelname) for r in caplog.records] == [("retention.guard", "ERROR")]
    assert "hunter2" not in reading.detail


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("tests.engine.test_guard.not_a_reading", "TypeError"),
        ("tests.engine.test_guard.no_such_signal", "ImportError"),
        ("not-a-dotted-path", "ImportError"),
    ],
)
def test_guard__an_unusable_signal_fails_closed(settings, caplog, path, error):
    settings.RETENTION_FOREGROUND_GUARD = path

    with caplog.at_level(logging.ERROR, logger="retention.guard"):
        reading = read(0)

    assert reading.over_budget is True
    assert f"({error})" in reading.detail


def test_guard__an_unreadable_budget_fails_closed(orm_queue, settings, caplog):
    settings.RETENTION_FOREGROUND_BUDGET_SECONDS = "thirty"

    with caplog.at_level(logging.ERROR, logger="retention.guard"):
        reading = read(0)

    assert reading.over_budget is True
    assert "(ValueError)" in reading.detail


def test_guard__an_unreachable_redis_fails_closed(monkeypatch, settings, caplog):
    # Port 1 on the loopback refuses at once: a broker that is down.
    use_broker(monkeypatch, orm=None, redis="redis://127.0.0.1:1/0")
    settings.RETENTION_FOREGROUND_QUEUE = QUEUE

    with caplog.at_level(logging.ERROR, logger="retention.guard"):
        reading = read(0)

    assert reading.over_budget is True
    assert reading.detail == "foreground guard failed (ConnectionError); dispatch held"
    assert caplog.records[0].levelname == "ERROR"
