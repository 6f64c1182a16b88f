"""The volume breaker (issue 17): trip, review, release; on every path of a run.

Records are bulk-created with their digests and no object behind them: an
absent object is a success (``already_absent``), so a sweep of a thousand
records needs no files.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from freezegun import freeze_time
from prometheus_client.parser import text_string_to_metric_families

from retention import api, engine, services
from retention.digest import key_digests
from retention.engine import BATCH_TASK
from retention.engine.breaker import breaker_held
from retention.exceptions import InvalidPolicyVersion, InvalidTransition, NotAllowed
from retention.models import (
    BatchState,
    BreakerState,
    BreakerTrip,
    RecordState,
    RetentionRecord,
    Run,
    RunBatch,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.reporting import summary_lines
from retention.selectors.breaker import DISPOSED_KEY, daily_disposals, median_daily
from tests.factories import UserFactory
from tests.fakes import queued, under_budget
from tests.helpers import dry_run, enforce
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db

PERIOD = timedelta(days=30)


def seed(
    n: int,
    *,
    now: datetime,
    data_class: str = "idv.photo",
    tenant_id: str = "acme",
    created: datetime | None = None,
    expired: bool = True,
) -> list[RetentionRecord]:
    """``n`` records of the class, expired (or not) at ``now``, their objects absent."""
    version = services.policy_version_in_force(data_class=data_class)
    created = created or (now - PERIOD - timedelta(days=1) if expired else now - timedelta(days=1))
    start = RetentionRecord.objects.count()
    keys = [f"{tenant_id}/{data_class}/{start + i:06d}" for i in range(n)]
    return RetentionRecord.objects.bulk_create(
        RetentionRecord(
            tenant_id=tenant_id,
            data_class=data_class,
            object_key=key,
            key_digest=digest,
            policy_version=version,
            created_at=created,
            expires_at=created + PERIOD,
        )
        for key, digest in zip(keys, key_digests(keys), strict=True)
    )


def disposed(run: Run) -> int:
    return run.deleted + run.already_absent


def history(data_class: str, *, now: datetime, per_day: dict[int, int]) -> None:
    """Closed enforcing runs of the class: ``per_day`` maps days before ``now`` to deletions."""
    for days_ago, n in per_day.items():
        started = now - timedelta(days=days_ago, hours=1)
        Run.objects.create(
            trigger=RunTrigger.SCHEDULE,
            mode=RunMode.ENFORCE,
            status=RunStatus.FINISHED,
            data_classes=[data_class],
            started_at=started,
            cutoff=started,
            finished_at=started + timedelta(minutes=5),
            deleted=n,
        )


def entry(run: Run, data_class: str = "idv.photo") -> dict[str, Any]:
    run.refresh_from_db()
    return run.report["breaker"][data_class]


def check_fails(at: datetime) -> str:
    with freeze_time(at), pytest.raises(CommandError) as failed:
        call_command("retention_check", stdout=StringIO())
    return str(failed.value)


# --------------------------------------------------------------------------
# The two scenarios of the issue


def test_breaker__a_huge_legitimate_first_sweep_trips_is_reviewed_released_then_deleted(
    make_policy, now, approver
):
    make_policy()
    records = seed(1200, now=now)

    first = enforce(now=now)

    # Tripped: nothing of the class deleted, the run counts it, the report says why.
    assert first.status == RunStatus.FINISHED
    assert (first.eligible, first.claimed, disposed(first), first.tripped) == (1200, 0, 0, 1200)
    assert RetentionRecord.objects.filter(state=RecordState.ACTIVE).count() == 1200
    trip = BreakerTrip.objects.get()
    assert (trip.data_class, trip.state, trip.limit, trip.run_id) == (
        "idv.photo",
        BreakerState.TRIPPED,
        "fraction",
        first.pk,
    )
    figures = trip.figures
    assert (figures["about_to_delete"], figures["not_yet_deleted"], figures["fraction"]) == (
        1200,
        1200,
        1.0,
    )
    assert (figures["max_fraction"], figures["min_count"], figures["exceeded"]) == (
        0.25,
        1000,
        ["fraction"],
    )
    # A first sweep: no history, so the multiple rule has nothing to compare with.
    assert figures["daily"] == [0] * 14 and figures["multiple"] is None
    report = entry(first)
    assert report["held"] is True and report["trip_id"] == trip.pk
    assert "1,200 of its 1,200 not-yet-deleted records (100.0%)" in report["reason"]
    assert "over the limit of 25% (4.0x)" in report["reason"]
    # The sample: the first by deadline, ids and digests, never keys.
    assert len(trip.sample) == 20  # RETENTION_REPORT_SAMPLE_SIZE
    assert trip.sample[0]["record_id"] == records[0].pk
    assert trip.sample[0]["key_digest"] == records[0].key_digest
    assert not any(r.object_key in json.dumps(trip.sample) for r in records[:20])
    assert any("Volume breaker: idv.photo held, 1200 kept" in line for line in summary_lines(first))

    # Not released yet: held again, counted again, still one trip to review.
    second = enforce(now=now + timedelta(hours=1))
    assert (disposed(second), second.tripped) == (0, 1200)
    assert entry(second)["trip_id"] == trip.pk
    assert BreakerTrip.objects.count() == 1

    # The approver reviewed the sample and releases it for the next run.
    released = api.breaker_release(
        "idv.photo", by=approver, reason="backfill of 2025 uploads", now=now + timedelta(hours=2)
    )
    assert (released.pk, released.state, released.released_by) == (
        trip.pk,
        BreakerState.RELEASED,
        approver,
    )

    third = enforce(now=now + timedelta(hours=3))
    assert (disposed(third), third.tripped) == (1200, 0)
    assert RetentionRecord.objects.filter(state=RecordState.DELETED).count() == 1200
    trip.refresh_from_db()
    assert (trip.state, trip.used_by_run_id) == (BreakerState.USED, third.pk)
    assert entry(third) == {
        "about_to_delete": 1200,
        "held": False,
        "released_by_trip": trip.pk,
        "release_used": True,
    }
    # The release was for one run: nothing is held, and nothing is left to release.
    with pytest.raises(InvalidTransition, match="holds nothing"):
        api.breaker_release("idv.photo", by=approver, reason="again", now=now)


def test_breaker__a_1970_timestamp_bug_trips_and_stays_held_run_after_run(
    make_policy, now, client, settings
):
    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1"
    make_policy("pod.scan")
    # Normal: ~100 deletions a day, 5,000 live records.
    history("pod.scan", now=now, per_day=dict.fromkeys(range(1, 15), 100))
    seed(100, now=now, data_class="pod.scan")
    seed(4900, now=now, data_class="pod.scan", expired=False)
    # A bulk import wrote created_at = 1970: all of it is "expired".
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    imported = seed(2000, now=now, data_class="pod.scan", tenant_id="import", created=epoch)

    first = enforce(now=now)

    trip = BreakerTrip.objects.get()
    figures = trip.figures
    assert (first.tripped, disposed(first), trip.limit) == (2100, 0, "fraction")
    assert figures["not_yet_deleted"] == 7000 and figures["fraction"] == pytest.approx(0.3)
    assert figures["median_daily"] == 100.0 and figures["multiple"] == 21.0
    assert figures["exceeded"] == ["fraction", "multiple"]
    # The reviewer sees the 1970 creation times in the sample.
    assert trip.sample[0]["created_at"].startswith("1970-01-01")

    # Never released: every later run holds it again, one trip to review.
    for hours in (24, 48):
        later = enforce(now=now + timedelta(hours=hours))
        assert (later.tripped, disposed(later)) == (2100, 0)
    assert BreakerTrip.objects.filter(state=BreakerState.TRIPPED).count() == 1
    assert not RetentionRecord.objects.filter(pk__in=[r.pk for r in imported]).exclude(
        state=RecordState.ACTIVE
    )

    # retention_check fails on it, and the metrics show it.
    assert "pod.scan (" in check_fails(now + timedelta(hours=49))
    assert "held by the volume breaker for review" in check_fails(now + timedelta(hours=49))
    with freeze_time(now + timedelta(hours=49)):
        out = StringIO()
        with pytest.raises(CommandError):
            call_command("retention_check", "--json", stdout=out)
    (photo,) = json.loads(out.getvalue())["data_classes"]
    assert "breaker_tripped" in photo["broken"]
    assert photo["breaker_trip"]["trip_id"] == trip.pk
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(
            client.get(reverse("retention-metrics")).content.decode()
        )
        for s in family.samples
    }
    assert samples[("retention_breaker_tripped", (("data_class", "pod.scan"),))] == 1


# --------------------------------------------------------------------------
# The limits


def _tenth_due_after(usual_day: int, *, now: datetime, settings: Any) -> Run:
    """The run over 100 of 1,000 photos due, after 14 days of ``usual_day`` disposals each.

    A tenth is within the fraction limit; whether 100 trips the multiple
    limit depends on ``usual_day``.
    """
    settings.RETENTION_BREAKER_MIN_COUNT = 50
    history("idv.photo", now=now, per_day=dict.fromkeys(range(1, 15), usual_day))
    seed(100, now=now)
    seed(900, now=now, expired=False)
    return enforce(now=now)


def test_breaker__the_multiple_limit_trips_a_class_whose_share_is_normal(
    make_policy, now, settings
):
    make_policy()

    run = _tenth_due_after(5, now=now, settings=settings)

    trip = BreakerTrip.objects.get()
    assert (run.tripped, disposed(run), trip.limit) == (100, 0, "multiple")
    assert trip.figures["fraction"] == pytest.approx(0.1)
    assert (trip.figures["median_daily"], trip.figures["multiple"]) == (5.0, 20.0)
    assert "20.0x its median day of the last 14 (5), over the limit of 10x" in entry(run)["reason"]


def test_breaker__within_both_limits_deletes_and_keeps_the_figures(make_policy, now, settings):
    make_policy()

    run = _tenth_due_after(40, now=now, settings=settings)

    assert (disposed(run), run.tripped) == (100, 0)
    assert not BreakerTrip.objects.exists()
    figures = entry(run)["figures"]
    assert (figures["exceeded"], figures["multiple"], figures["fraction"]) == ([], 2.5, 0.1)


def test_breaker__a_median_day_of_zero_trips_on_any_volume_over_the_minimum(
    make_policy, now, settings
):
    # Swept on 3 days of 14: the median day deleted nothing.
    settings.RETENTION_BREAKER_MIN_COUNT = 10
    make_policy()
    history("idv.photo", now=now, per_day={1: 50, 5: 50, 9: 50})
    seed(20, now=now)
    seed(980, now=now, expired=False)

    run = enforce(now=now)

    assert BreakerTrip.objects.get().limit == "multiple"
    assert "its median day of the last 14 disposed of none" in entry(run)["reason"]


def test_breaker__below_the_minimum_count_never_trips(make_policy, now):
    make_policy()
    seed(999, now=now)

    run = enforce(now=now)

    assert (disposed(run), run.tripped) == (999, 0)
    assert entry(run) == {
        "about_to_delete": 999,
        "held": False,
        "figures": {
            "kind": "records",
            "about_to_delete": 999,
            "min_count": 1000,
            "max_fraction": 0.25,
            "max_multiple": 10.0,
            "exceeded": [],
        },
    }


def test_breaker__a_runs_limit_is_what_it_is_about_to_delete(make_policy, now, settings):
    settings.RETENTION_BREAKER_MIN_COUNT = 10
    make_policy()
    seed(200, now=now)

    run = enforce(now=now, start={"limit": 5})

    assert (disposed(run), run.tripped) == (5, 0)
    assert entry(run)["about_to_delete"] == 5


def test_breaker__history_of_a_run_of_several_classes_is_read_from_its_events_once(
    make_policy, now, settings
):
    settings.RETENTION_BREAKER_MIN_COUNT = 10_000
    make_policy()
    make_policy("pod.scan")
    seed(30, now=now - timedelta(days=3))
    seed(7, now=now - timedelta(days=3), data_class="pod.scan")
    past = enforce(now=now - timedelta(days=3))
    assert disposed(past) == 37
    settings.RETENTION_BREAKER_MIN_COUNT = 1
    seed(5, now=now)

    run = enforce(now=now, start={"data_classes": ["idv.photo"]})

    past.refresh_from_db()
    assert past.report[DISPOSED_KEY] == {"idv.photo": 30, "pod.scan": 7}
    daily = entry(run)["figures"]["daily"]
    assert daily[3] == 30 and sum(daily) == 30


def test_breaker__daily_disposals_count_days_without_any_as_zero(now):
    runs = [
        Run(started_at=now - timedelta(hours=h), report={DISPOSED_KEY: {"a": n}})
        for h, n in ((2, 10), (5, 5), (30, 7), (24 * 14 + 1, 99))
    ]

    days = daily_disposals("a", runs, now=now)

    assert days == [15, 7] + [0] * 12
    assert median_daily(days) == 0.0
    assert median_daily([4] * 7 + [0] * 7) == 2.0


# --------------------------------------------------------------------------
# Overrides, the switch, other classes


def test_breaker__a_versions_own_limits_let_a_known_large_first_sweep_through(make_policy, now):
    make_policy(breaker_min_count=5000)
    seed(1200, now=now)

    run = enforce(now=now)

    assert (disposed(run), run.tripped) == (1200, 0)
    assert entry(run)["figures"]["min_count"] == 5000
    assert not BreakerTrip.objects.exists()


@pytest.mark.parametrize(
    ("rule", "value"),
    [
        ("breaker_max_fraction", 0),
        ("breaker_max_fraction", 1.5),
        ("breaker_max_multiple", -1),
        ("breaker_min_count", -5),
        ("breaker_min_count", 2.5),
    ],
)
def test_breaker__a_version_refuses_limits_that_make_no_sense(author, now, rule, value):
    with pytest.raises(InvalidPolicyVersion, match=rule):
        api.propose_policy_version(
            data_class="idv.photo", retention_period=PERIOD, author=author, now=now, **{rule: value}
        )


def test_breaker__off_for_the_project_checks_nothing_and_holds_nothing(make_policy, now, settings):
    make_policy()
    seed(1200, now=now)
    enforce(now=now)
    assert BreakerTrip.objects.filter(state=BreakerState.TRIPPED).count() == 1
    settings.RETENTION_BREAKER_ENABLED = "false"

    run = enforce(now=now + timedelta(hours=1))

    assert (disposed(run), run.tripped) == (1200, 0)
    assert "breaker" not in run.report
    # Off, the open trip holds nothing: retention_check does not fail on it.
    with freeze_time(now + timedelta(hours=1)):
        call_command("retention_check", stdout=StringIO())


def test_breaker__other_classes_of_the_run_go_on(make_policy, now):
    make_policy()
    make_policy("pod.scan")
    seed(1200, now=now)
    seed(3, now=now, data_class="pod.scan")

    run = enforce(now=now)

    assert (disposed(run), run.tripped) == (3, 1200)
    assert RetentionRecord.objects.filter(data_class="pod.scan", state="deleted").count() == 3
    assert breaker_held(run) == {"idv.photo"}


def test_breaker__a_held_class_waits_for_none_of_its_retries(make_policy, now):
    make_policy()
    seed(1200, now=now)
    enforce(now=now)
    # A retry of the held class falls due within the run's wait: it is not the run's.
    RetentionRecord.objects.filter(pk=RetentionRecord.objects.first().pk).update(
        state=RecordState.FAILED, next_attempt_at=now + timedelta(seconds=5), attempts=1
    )
    slept: list[float] = []

    run = enforce(now=now + timedelta(seconds=10), sleep=slept.append, max_seconds=60)

    assert (run.status, slept) == (RunStatus.FINISHED, [])


def test_breaker__a_run_narrowed_to_a_tenant_leaves_the_release_to_the_sweep(
    make_policy, now, approver
):
    make_policy()
    seed(1200, now=now)
    seed(3, now=now, tenant_id="globex")
    enforce(now=now)
    api.breaker_release("idv.photo", by=approver, reason="backfill", now=now)

    narrowed = enforce(now=now, start={"tenant_id": "globex"})

    assert disposed(narrowed) == 3
    assert BreakerTrip.objects.get().state == BreakerState.RELEASED
    sweep = enforce(now=now)
    assert disposed(sweep) == 1200
    assert BreakerTrip.objects.get().state == BreakerState.USED


def test_breaker_release__needs_the_approve_permission_and_a_reason(make_policy, now, approver):
    make_policy()
    seed(1200, now=now)
    enforce(now=now)
    author = UserFactory(username="someone")

    with pytest.raises(NotAllowed, match="approvers only"):
        api.breaker_release("idv.photo", by=author, reason="looks fine", now=now)
    with pytest.raises(NotAllowed, match="needs a reason"):
        api.breaker_release("idv.photo", by=approver, reason="  ", now=now)
    assert BreakerTrip.objects.get().state == BreakerState.TRIPPED


# --------------------------------------------------------------------------
# Dry runs


def test_breaker__a_dry_run_never_trips_but_says_it_would(make_policy, now):
    make_policy()
    seed(1200, now=now)

    run = dry_run(now=now)

    assert run.tripped == 0 and not BreakerTrip.objects.exists()
    preview = entry(run)
    assert (preview["would_trip"], preview["limit"], len(preview["sample"])) == (
        True,
        "fraction",
        20,
    )
    lines = summary_lines(run)
    assert any("an enforcing run would trip on idv.photo" in line for line in lines)


# --------------------------------------------------------------------------
# Queued runs


def test_breaker__a_queued_run_publishes_no_batch_of_a_held_class(make_policy, now, approver):
    make_policy()
    make_policy("pod.scan")
    seed(1200, now=now)
    seed(3, now=now, data_class="pod.scan")

    run, _ = queued(now)

    assert run.status == RunStatus.FINISHED
    assert (disposed(run), run.tripped) == (3, 1200)
    assert set(RunBatch.objects.filter(run=run).values_list("data_class", flat=True)) == {
        "pod.scan"
    }
    assert BreakerTrip.objects.get().run_id == run.pk

    api.breaker_release("idv.photo", by=approver, reason="backfill", now=now)
    again, _ = queued(now + timedelta(hours=1))
    assert (disposed(again), again.tripped) == (1200, 0)


def test_breaker__a_batch_of_a_held_class_that_got_out_deletes_nothing(make_policy, now):
    make_policy()
    seed(1200, now=now)
    run, queue = queued(now)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, finished_at=None)
    batch = RunBatch.objects.create(
        token="00000000-0000-0000-0000-00000000000b",
        run=run,
        data_class="idv.photo",
        size=0,
        published_at=now,
        lease_expires_at=now + timedelta(minutes=5),
    )

    engine.batch_dispose(
        payload={"run_id": str(run.pk), "token": str(batch.token), "data_class": "idv.photo"},
        clock=lambda: now,
        publish=queue,
        guard=under_budget,
    )

    batch.refresh_from_db()
    assert batch.state == BatchState.RELEASED
    assert not RetentionRecord.objects.exclude(state=RecordState.ACTIVE).exists()


# --------------------------------------------------------------------------
# Model rows


@pytest.fixture
def logs(register_logs: Any, make_policy: Any) -> Any:
    register_logs()
    return make_policy("logs.request", timedelta(days=30), batch_size=1000)


def test_breaker__a_class_of_rows_trips_on_its_rows_and_deletes_after_release(logs, now, approver):
    RequestLog.objects.bulk_create(
        RequestLog(tenant_id="t1", path=f"/{i}", created_at=now - timedelta(days=40))
        for i in range(1100)
    )
    RequestLog.objects.bulk_create(
        RequestLog(tenant_id="t1", path=f"/new/{i}", created_at=now - timedelta(days=1))
        for i in range(100)
    )

    first = enforce(now=now)

    trip = BreakerTrip.objects.get()
    assert (first.tripped, first.deleted, RequestLog.objects.count()) == (1100, 0, 1200)
    assert (trip.figures["kind"], trip.figures["not_yet_deleted"]) == ("rows", 1200)
    oldest = RequestLog.objects.order_by("created_at", "pk").first()
    assert trip.sample[0]["pk"] == str(oldest.pk) and len(trip.sample[0]["key_digest"]) == 64

    api.breaker_release("logs.request", by=approver, reason="log backfill", now=now)
    second = enforce(now=now + timedelta(hours=1))

    assert (second.deleted, second.tripped, RequestLog.objects.count()) == (1100, 0, 100)


def test_breaker__a_queued_run_holds_a_class_of_rows(logs, now):
    RequestLog.objects.bulk_create(
        RequestLog(tenant_id="t1", path=f"/{i}", created_at=now - timedelta(days=40))
        for i in range(1100)
    )

    run, queue = queued(now)

    assert (run.status, run.tripped, run.deleted) == (RunStatus.FINISHED, 1100, 0)
    assert RequestLog.objects.count() == 1100
    assert not [p for f, p in queue.published if f == BATCH_TASK]
