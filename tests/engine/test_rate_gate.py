"""The shared rate gate: GCRA schedule in the database, slices, throttling feedback.

Most tests inject the gate's clock and sleep, so the schedule is checked
exactly and nothing waits. The PostgreSQL tests take the real database
clock and several connections at once: reservations made concurrently by
separate workers never overlap, and no one holds the row while sleeping.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections

from retention import metrics
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.engine.pacing import UnlimitedGate, gate_for
from retention.models import RateGateState
from retention.services.hold_mirror import locks_set
from retention.services.rate_gates import (
    Limit,
    Reservation,
    SharedRateGate,
    effective_factor,
    slice_size_for,
    storage_gate,
)
from retention.storage import KeyResult, Outcome
from retention.storage.s3 import S3Adapter
from tests.fakes import FakeClock
from tests.helpers import enforce, exists, put_tracked

CLASS = "class:idv.photo"


def gate(clock: FakeClock, *limits: tuple[str, float]) -> SharedRateGate:
    return SharedRateGate(
        [Limit(name, rate) for name, rate in limits or [(CLASS, 10.0)]],
        clock=clock,
        sleep=clock.sleep,
    )


def row(name: str = CLASS) -> RateGateState:
    return RateGateState.objects.get(pk=name)


class RecordingAdapter:
    """Deletes nothing; remembers every request (and can answer "slow down")."""

    def __init__(self, alias: str = "default", *, throttle: bool = False) -> None:
        self.alias = alias
        self.throttle = throttle
        self.requests: list[list[str]] = []

    def check(self) -> None:
        return None

    def delete_many(
        self, keys: Sequence[str], *, erase_versions: bool = False, probe: Collection[str] = ()
    ) -> dict[str, KeyResult]:
        self.requests.append(list(keys))
        if self.throttle:
            return {
                key: KeyResult(key, Outcome.TRANSIENT, "SlowDown: reduce", throttled=True)
                for key in keys
            }
        return {key: KeyResult(key, Outcome.DELETED) for key in keys}


def items(count: int, storage: str = "default") -> list[DisposalItem]:
    return [DisposalItem(i, storage, f"acme/{i}", probe=False) for i in range(count)]


# --------------------------------------------------------------------------
# Building gates


def test_gate_for__no_rate_is_unlimited_and_touches_no_database():
    # No django_db mark: any query would raise.
    unlimited = gate_for(data_class="idv.photo", rate_limit=None)
    paced = unlimited.for_storage("default")
    paced.acquire(5000)
    paced.throttled()
    assert isinstance(unlimited, UnlimitedGate)
    assert paced.slice_size is None


def test_gate_for__a_class_rate_is_a_shared_gate_named_after_the_class():
    paced = gate_for(data_class="idv.photo", rate_limit=200)
    assert isinstance(paced, SharedRateGate)
    assert paced.names == ("class:idv.photo",)
    assert paced.slice_size == 20


def test_gate_for__a_storage_limit_joins_the_class_limit(settings):
    settings.RETENTION_STORAGE_RATE_LIMITS = {"s3": 50}
    class_gate = gate_for(data_class="idv.photo", rate_limit=200)

    both = class_gate.for_storage("s3")
    other = class_gate.for_storage("default")
    storage_only = gate_for(data_class="idv.photo").for_storage("s3")

    assert isinstance(both, SharedRateGate) and both.names == ("class:idv.photo", "storage:s3")
    assert both.slice_size == 5  # the stricter limit decides
    assert other is class_gate
    assert isinstance(storage_only, SharedRateGate) and storage_only.names == ("storage:s3",)


class Lock:
    """An ObjectLock as the hold mirror uses it: the slices it was asked to set."""

    alias = "s3"

    def __init__(self) -> None:
        self.slices: list[list[str]] = []

    def set_many(self, keys: list[str], *, on: bool) -> dict[str, Any]:
        self.slices.append(list(keys))
        return {}


def test_storage_gate__without_a_storage_limit_the_mirror_sends_every_key_at_once():
    # No django_db mark: any query would raise.
    lock = Lock()

    locks_set(lock, ["a", "b", "c"], on=True)

    assert storage_gate("s3") is None
    assert lock.slices == [["a", "b", "c"]]


@pytest.mark.django_db
def test_storage_gate__the_hold_mirror_books_the_storages_gate_as_deletes_do(settings):
    settings.RETENTION_STORAGE_RATE_LIMITS = {"s3": 20}
    lock = Lock()

    locks_set(lock, ["a", "b", "c", "d", "e"], on=True)

    gate = storage_gate("s3")
    assert gate is not None and gate.names == ("storage:s3",)
    assert lock.slices == [["a", "b"], ["c", "d"], ["e"]]  # a tenth of a second each
    assert RateGateState.objects.filter(name="storage:s3").exists()


@pytest.mark.parametrize(
    ("rate", "size"), [(0.5, 1), (5, 1), (10, 1), (200, 20), (2_000, 200), (50_000, 1000)]
)
def test_slice_size__a_tenth_of_a_second_of_deletes_from_1_to_1000(rate, size):
    assert slice_size_for(rate) == size


@pytest.mark.parametrize("rate", [0, -1.0, float("nan"), float("inf")])
def test_limit__rate_must_be_positive(rate):
    with pytest.raises(ValueError, match="positive"):
        Limit(CLASS, rate)


# --------------------------------------------------------------------------
# GCRA schedule


@pytest.mark.django_db
def test_gcra__reservations_follow_each_other_at_the_rate():
    clock = FakeClock(1_000.0)
    paced = gate(clock, (CLASS, 10.0))

    first = paced.reserve(1)
    second = paced.reserve(1)
    third = paced.reserve(2)

    assert first == Reservation(now=1_000.0, start=1_000.0, end=pytest.approx(1_000.1))
    assert second.start == pytest.approx(1_000.1) and second.wait == pytest.approx(0.1)
    assert third.start == pytest.approx(1_000.2) and third.end == pytest.approx(1_000.4)
    assert row().next_free_at == pytest.approx(1_000.4)


@pytest.mark.django_db
def test_gcra__acquire_sleeps_until_its_slot_starts():
    clock = FakeClock(1_000.0)
    paced = gate(clock, (CLASS, 10.0))

    for _ in range(4):
        paced.acquire(2)

    # Slots of 0.2 s each; the clock moves only by sleeping.
    assert clock.sleeps == [pytest.approx(0.2)] * 3
    assert clock.t == pytest.approx(1_000.6)


@pytest.mark.django_db
def test_gcra__an_idle_gate_grants_no_burst():
    clock = FakeClock(1_000.0)
    paced = gate(clock, (CLASS, 10.0))
    paced.acquire(1)

    clock.t += 3_600  # an hour idle earns no credit
    paced.acquire(1)
    paced.acquire(1)

    assert clock.sleeps == [pytest.approx(0.1)]


@pytest.mark.django_db
def test_gcra__acquiring_nothing_books_nothing(django_assert_num_queries):
    paced = gate(FakeClock(), (CLASS, 10.0))
    with django_assert_num_queries(0):
        paced.acquire(0)
    assert not RateGateState.objects.exists()


@pytest.mark.django_db
def test_shared__two_workers_on_one_gate_get_disjoint_slots():
    clock = FakeClock(1_000.0)
    # Two gate objects, as two worker processes build them: one row between them.
    worker_a = gate(clock, (CLASS, 100.0))
    worker_b = gate(clock, (CLASS, 100.0))

    slots = []
    for _ in range(5):
        slots.append(worker_a.reserve(10))
        slots.append(worker_b.reserve(5))
        clock.t += 0.05

    for earlier, later in zip(slots, slots[1:], strict=False):
        assert later.start >= earlier.end - 1e-9
    assert RateGateState.objects.count() == 1


@pytest.mark.django_db
def test_combined__a_slice_waits_for_the_stricter_limit_and_books_both(settings):
    settings.RETENTION_STORAGE_RATE_LIMITS = {"default": 5}
    clock = FakeClock(1_000.0)
    photos = gate(clock, (CLASS, 10.0)).for_storage("default")
    scans = gate(clock, ("class:pod.scan", 10.0)).for_storage("default")

    first = photos.reserve(1)
    second = scans.reserve(1)  # another class, same storage
    third = photos.reserve(1)

    assert [first.start, second.start, third.start] == pytest.approx([1_000.0, 1_000.2, 1_000.4])
    assert row("storage:default").next_free_at == pytest.approx(1_000.6)
    assert row(CLASS).next_free_at == pytest.approx(1_000.5)
    assert row("class:pod.scan").next_free_at == pytest.approx(1_000.3)


# --------------------------------------------------------------------------
# Throttling feedback


@pytest.mark.parametrize(
    ("elapsed", "expected"), [(0, 0.5), (15, 0.625), (30, 0.75), (60, 1.0), (600, 1.0)]
)
def test_effective_factor__recovers_linearly_to_full_rate(elapsed, expected):
    assert effective_factor(0.5, 1_000.0, 1_000.0 + elapsed, 60.0) == pytest.approx(expected)


def test_effective_factor__never_throttled_is_full_rate():
    assert effective_factor(1.0, None, 5.0, 60.0) == 1.0


@pytest.mark.django_db
def test_throttled__halves_the_rate_of_the_next_reservations():
    clock = FakeClock(1_000.0)
    paced = gate(clock, (CLASS, 10.0))

    paced.throttled()
    slot = paced.reserve(1)

    state = row()
    assert state.factor == 0.5 and state.throttled_at == 1_000.0 and state.throttle_count == 1
    assert slot.end - slot.start == pytest.approx(0.2)


@pytest.mark.django_db
def test_throttled__signals_within_a_second_count_once(settings):
    settings.RETENTION_GATE_RECOVERY_SECONDS = 60
    clock = FakeClock(1_000.0)
    worker_a = gate(clock, (CLASS, 10.0))
    worker_b = gate(clock, (CLASS, 10.0))

    worker_a.throttled()
    clock.t += 0.5
    worker_b.throttled()  # the same overload, seen by another request
    assert (row().factor, row().throttle_count) == (0.5, 1)

    clock.t += 1.0
    worker_b.throttled()
    # 1.5 s after the first halving the gate had recovered to 0.5125.
    assert row().factor == pytest.approx(0.25625)
    assert row().throttle_count == 2


@pytest.mark.django_db
def test_throttled__recovers_to_full_rate_over_the_recovery_time(settings):
    settings.RETENTION_GATE_RECOVERY_SECONDS = 20
    clock = FakeClock(1_000.0)
    paced = gate(clock, (CLASS, 10.0))
    paced.throttled()

    clock.t += 10
    half_way = paced.reserve(1)
    clock.t += 10
    recovered = paced.reserve(1)

    assert half_way.end - half_way.start == pytest.approx(1 / 7.5)
    assert recovered.end - recovered.start == pytest.approx(0.1)


@pytest.mark.django_db
def test_throttled__never_below_the_minimum_factor(settings):
    settings.RETENTION_GATE_MIN_FACTOR = 0.2
    clock = FakeClock(1_000.0)
    paced = gate(clock, (CLASS, 10.0))

    for _ in range(6):
        paced.throttled()
        clock.t += 2

    assert row().factor == 0.2
    assert row().throttle_count == 6


@pytest.mark.django_db
def test_throttled__slows_every_limit_of_the_slice(settings):
    # Halving only the storage limit would not slow a class whose own limit binds.
    settings.RETENTION_STORAGE_RATE_LIMITS = {"default": 1000}
    paced = gate(FakeClock(), (CLASS, 10.0)).for_storage("default")

    paced.throttled()

    assert row(CLASS).factor == 0.5
    assert row("storage:default").factor == 0.5


@pytest.mark.django_db
def test_throttled__logs_the_gate_and_its_new_factor_and_counts_it(caplog):
    before = metrics.REGISTRY.get_sample_value(
        "retention_rate_gate_throttled_total", {"gate": CLASS}
    )
    paced = gate(FakeClock(), (CLASS, 10.0))

    with caplog.at_level(logging.WARNING, logger="retention.pacing"):
        paced.throttled()

    (logged,) = caplog.records
    assert logged.gate == CLASS and logged.factor == 0.5
    assert CLASS in logged.getMessage() and "50%" in logged.getMessage()
    after = metrics.REGISTRY.get_sample_value(
        "retention_rate_gate_throttled_total", {"gate": CLASS}
    )
    assert after == (before or 0) + 1


# --------------------------------------------------------------------------
# The disposer: slices, and throttling fed back


@pytest.mark.django_db
def test_disposer__sends_one_slice_at_a_time_under_a_rate():
    clock = FakeClock(1_000.0)
    adapter = RecordingAdapter()
    paced = gate(clock, (CLASS, 50.0))  # slices of 5

    results = ObjectDisposer(lambda alias: adapter).dispose(
        items(12), erase_versions=False, gate=paced
    )

    assert [len(request) for request in adapter.requests] == [5, 5, 2]
    assert clock.sleeps == [pytest.approx(0.1), pytest.approx(0.1)]
    assert sorted(results) == list(range(12))
    assert row().next_free_at == pytest.approx(1_000.24)


@pytest.mark.django_db
def test_disposer__without_a_rate_one_request_per_storage_and_no_database_work(
    django_assert_num_queries,
):
    adapter = RecordingAdapter()
    with django_assert_num_queries(0):
        ObjectDisposer(lambda alias: adapter).dispose(
            items(2500), erase_versions=False, gate=UnlimitedGate()
        )
    # The adapter chunks for its store (1000 keys per S3 request) itself.
    assert [len(request) for request in adapter.requests] == [2500]


@pytest.mark.django_db
def test_disposer__a_storage_limit_paces_even_an_unlimited_class(settings):
    settings.RETENTION_STORAGE_RATE_LIMITS = {"default": 20}
    adapter = RecordingAdapter()

    ObjectDisposer(lambda alias: adapter).dispose(
        items(5), erase_versions=False, gate=UnlimitedGate()
    )

    assert [len(request) for request in adapter.requests] == [2, 2, 1]
    assert row("storage:default").next_free_at > 0


@pytest.mark.django_db
def test_disposer__a_throttled_answer_slows_the_gate_once_per_overload():
    clock = FakeClock(1_000.0)
    adapter = RecordingAdapter(throttle=True)
    paced = gate(clock, (CLASS, 50.0))

    results = ObjectDisposer(lambda alias: adapter).dispose(
        items(10), erase_versions=False, gate=paced
    )

    assert {result.outcome for result in results.values()} == {Outcome.TRANSIENT}
    # Two slices, both throttled; the second came 0.1 s after the first signal.
    assert len(adapter.requests) == 2
    assert (row().factor, row().throttle_count) == (0.5, 1)


@pytest.mark.django_db
def test_disposer__s3_slowdown_from_the_server_slows_the_gate(s3_client_factory, s3_bucket):
    from tests.storage.test_s3_adapter import answer_delete_objects_with, put

    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})
    put(client, s3_bucket, "acme/1", "acme/2")
    answer_delete_objects_with(
        client,
        503,
        "<?xml version='1.0' encoding='UTF-8'?>"
        "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
        "<RequestId>test</RequestId></Error>",
    )
    adapter = S3Adapter("s3", client, s3_bucket)
    paced = gate(FakeClock(), (CLASS, 50.0))

    results = ObjectDisposer(lambda alias: adapter).dispose(
        [DisposalItem(1, "s3", "acme/1", False), DisposalItem(2, "s3", "acme/2", False)],
        erase_versions=False,
        gate=paced,
    )

    assert all(result.throttled for result in results.values())
    assert row().factor == 0.5


# --------------------------------------------------------------------------
# The inline engine


@pytest.mark.django_db
def test_inline_run__a_class_rate_paces_through_the_shared_gate(make_policy, now):
    make_policy(rate_limit=1000.0, batch_size=10)
    records = [put_tracked(now=now - timedelta(days=31, seconds=i)) for i in range(3)]

    run = enforce(now=now)

    assert run.deleted == 3 and not any(exists(r) for r in records)
    assert row("class:idv.photo").next_free_at > 0


# --------------------------------------------------------------------------
# PostgreSQL: real clock, real concurrency


def _threads(count: int, work: Any) -> list[Any]:
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            results[index] = work(index)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres__concurrent_workers_never_overlap_their_reservations():
    workers, rounds, size, rate = 8, 25, 3, 1_000.0

    def work(index: int) -> list[Reservation]:
        # Each worker builds its own gate, as a separate process would.
        paced = SharedRateGate([Limit(CLASS, rate)])
        return [paced.reserve(size) for _ in range(rounds)]

    slots = sorted(
        (slot for per_worker in _threads(workers, work) for slot in per_worker),
        key=lambda slot: slot.start,
    )

    assert len(slots) == workers * rounds
    for slot in slots:
        assert slot.start >= slot.now
        assert slot.end - slot.start == pytest.approx(size / rate, abs=1e-6)
    for earlier, later in zip(slots, slots[1:], strict=False):
        assert later.start >= earlier.end - 1e-6, (earlier, later)
    assert row().next_free_at == pytest.approx(slots[-1].end)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres__combined_gates_share_the_storage_schedule_across_classes(settings):
    settings.RETENTION_STORAGE_RATE_LIMITS = {"default": 500.0}

    def work(index: int) -> list[Reservation]:
        # Two classes with their own limit, one without: rows locked in
        # overlapping sets, all created on first use by whoever comes first.
        rate = 10_000 if index % 3 else None
        paced = gate_for(data_class=f"class-{index % 3}", rate_limit=rate).for_storage("default")
        assert isinstance(paced, SharedRateGate)
        return [paced.reserve(2) for _ in range(20)]

    slots = sorted((s for w in _threads(9, work) for s in w), key=lambda slot: slot.start)

    # The storage limit binds: every slot is 2/500 s long on its schedule.
    for earlier, later in zip(slots, slots[1:], strict=False):
        assert later.start >= earlier.start + 2 / 500.0 - 1e-6


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres__no_row_lock_is_held_while_a_worker_sleeps():
    sleeping = threading.Event()
    wake = threading.Event()

    def sleep(seconds: float) -> None:
        sleeping.set()
        wake.wait()

    def sleeper(index: int) -> None:
        paced = SharedRateGate([Limit(CLASS, 1.0)], sleep=sleep)
        paced.acquire(1)
        paced.acquire(1)  # waits ~1 s for its slot: inside sleep()

    thread = threading.Thread(target=lambda: _threads(1, sleeper))
    thread.start()
    try:
        assert sleeping.wait(timeout=60)
        with connection.cursor() as cursor:
            # Fail instead of hanging if the sleeper still held the row.
            cursor.execute("SET lock_timeout = '5s'")
        slot = SharedRateGate([Limit(CLASS, 1.0)]).reserve(1)
        assert slot.wait > 0  # queued behind the sleeper's slot, not blocked by it
    finally:
        wake.set()
        thread.join()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres__the_gate_runs_on_the_database_clock():
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())")
        (before,) = cursor.fetchone()
    slot = SharedRateGate([Limit(CLASS, 100.0)]).reserve(1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())")
        (after,) = cursor.fetchone()
    assert float(before) <= slot.now <= float(after)
