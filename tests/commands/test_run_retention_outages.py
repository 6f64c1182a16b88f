"""Outages end in a clear answer (issue 26, point 3): ``--wait``, S3, counts.

- ``run_retention --enqueue --wait`` follows its run through a lost database
  connection, and exits non-zero when the run ends ``error`` or ``abandoned``;
  a database that stays away ends it with one line and exit status 1.
- An S3 endpoint that stops answering logs one WARNING when it stops and one
  when it answers again, with the count, never a key or the endpoint's URL.
- ``retried`` is in ``--json`` (beside ``counts``) and in the metrics.

The restart of a real PostgreSQL cluster under an inline run is in
tests/commands/test_database_outage.py.
"""

from __future__ import annotations

import json
import logging
import types
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.urls import reverse
from storages.backends.s3 import S3Storage

from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.models import RecordState, RetentionRecord, Run, RunStatus
from retention.storage import KeyResult, Outcome
from retention.storage.s3 import S3Adapter
from tests.helpers import put_tracked
from tests.motoserver import DUMMY_CREDENTIALS, REGION

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quick_follow(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--wait`` polls without sleeping half a second each time."""
    from retention.management.commands import run_retention

    monkeypatch.setattr(
        run_retention, "time", types.SimpleNamespace(sleep=lambda _s: None, monotonic=lambda: 0.0)
    )


def enqueue_and_wait(**options: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("run_retention", "--enqueue", "--wait", stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def ends_as(status: str, reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers close the run as ``status`` while the command follows it."""
    real = Run.refresh_from_db

    def refresh(self: Run, *args: Any, **kwargs: Any) -> None:
        Run.objects.filter(pk=self.pk, status=RunStatus.RUNNING).update(
            status=status, status_reason=reason, finished_at=self.started_at
        )
        real(self, *args, **kwargs)

    monkeypatch.setattr(Run, "refresh_from_db", refresh)


@pytest.mark.parametrize(
    ("status", "reason"),
    [(RunStatus.ERROR, "task queue unavailable"), (RunStatus.ABANDONED, "lease expired")],
)
def test_run_retention_wait__exits_non_zero_when_the_run_ends_error_or_abandoned(
    make_policy, now, monkeypatch, quick_follow, status, reason
):
    make_policy()
    put_tracked(now=now - timedelta(days=40))
    ends_as(status, reason, monkeypatch)

    with pytest.raises(CommandError) as refused:
        enqueue_and_wait()

    assert str(refused.value).endswith(f"ended {status}: {reason}")


def test_run_retention_wait__a_finished_run_exits_zero(make_policy, now, monkeypatch, quick_follow):
    make_policy()
    ends_as(RunStatus.FINISHED, "", monkeypatch)

    out, _ = enqueue_and_wait(as_json=True)

    assert json.loads(out.splitlines()[-1])["status"] == RunStatus.FINISHED


def _lost_connection(monkeypatch: pytest.MonkeyPatch, failures: int | None) -> None:
    """The next ``failures`` reads of the run (None: every one) find the connection lost."""
    real = Run.refresh_from_db
    seen = [0]

    def refresh(self: Run, *args: Any, **kwargs: Any) -> None:
        seen[0] += 1
        if failures is None or seen[0] <= failures:
            raise OperationalError("server closed the connection unexpectedly")
        Run.objects.filter(pk=self.pk).update(
            status=RunStatus.FINISHED, finished_at=self.started_at
        )
        real(self, *args, **kwargs)

    monkeypatch.setattr(Run, "refresh_from_db", refresh)
    # What a lost connection looks like to the retry: the connection is not usable.
    monkeypatch.setattr("retention.engine.outage.connection_lost", lambda exc: True)


def test_run_retention_wait__follows_the_run_through_a_lost_database_connection(
    make_policy, now, monkeypatch, quick_follow
):
    make_policy()
    _lost_connection(monkeypatch, failures=2)

    out, err = enqueue_and_wait(as_json=True)

    assert json.loads(out.splitlines()[-1])["status"] == RunStatus.FINISHED
    assert "Traceback" not in err


def test_run_retention_wait__a_database_away_too_long_ends_with_one_line_and_exit_1(
    make_policy, now, monkeypatch, quick_follow, settings
):
    make_policy()
    settings.RETENTION_DATABASE_RETRY_SECONDS = 0.3
    _lost_connection(monkeypatch, failures=None)

    err = StringIO()
    with pytest.raises(SystemExit) as stopped:
        call_command("run_retention", "--enqueue", "--wait", stdout=StringIO(), stderr=err)

    assert stopped.value.code == 1
    # One line, nothing chained: what the operator reads.
    assert err.getvalue().splitlines()[-1] == (
        "database unavailable: server closed the connection unexpectedly"
    )
    assert "Traceback" not in err.getvalue()


def test_run_retention_json__says_how_many_deletes_were_retried(make_policy, now, settings):
    make_policy()
    put_tracked(now=now - timedelta(days=40))

    class Unanswered(ObjectDisposer):
        def dispose(self, items: Any, **kwargs: Any) -> dict[int, KeyResult]:
            return {
                i.record_id: KeyResult(i.object_key, Outcome.TRANSIENT, "ConnectTimeoutError")
                for i in items
            }

    monkeypatch = pytest.MonkeyPatch()
    settings.RETENTION_RETRY_WAIT_IN_RUN_SECONDS = 0
    with monkeypatch.context() as patch:
        patch.setattr("retention.engine.inline.ObjectDisposer", Unanswered)
        out = StringIO()
        call_command("run_retention", "--json", stdout=out)

    printed = json.loads(out.getvalue())
    assert printed["counts"]["deleted"] == 0
    assert printed["retried"] == Run.objects.get(pk=printed["run_id"]).retried >= 1


def test_metrics__records_waiting_for_a_retry_are_a_gauge_per_class(
    make_policy, now, client, settings
):
    make_policy()
    record = put_tracked(now=now - timedelta(days=40))
    RetentionRecord.objects.filter(pk=record.pk).update(
        state=RecordState.FAILED, retryable=True, next_attempt_at=now
    )
    settings.RETENTION_METRICS_ALLOWED_IPS = "127.0.0.1"

    body = client.get(reverse("retention-metrics")).content.decode()

    assert 'retention_retrying_records{data_class="idv.photo"} 1.0' in body


def test_s3_unreachable__one_warning_when_it_stops_answering_and_one_with_the_count_when_back(
    s3_server, s3_bucket, caplog
):
    storage = S3Storage(
        bucket_name=s3_bucket,
        endpoint_url=s3_server.endpoint_url,
        access_key=DUMMY_CREDENTIALS,
        secret_key=DUMMY_CREDENTIALS,
        region_name=REGION,
    )
    keys = [storage.save(f"tenant-1/secret-{n}.jpg", ContentFile(b"x")) for n in range(3)]
    adapter = S3Adapter.from_storage("uploads", storage)
    real = adapter.client.delete_objects
    down = [True]

    def delete_objects(**kwargs: Any) -> Any:
        if down[0]:
            raise EndpointConnectionError(endpoint_url=s3_server.endpoint_url)
        return real(**kwargs)

    adapter.client.delete_objects = delete_objects  # type: ignore[method-assign]
    disposer = ObjectDisposer(lambda _alias: adapter)
    items = [
        DisposalItem(record_id=n, storage="uploads", object_key=k, probe=False)
        for n, k in enumerate(keys)
    ]

    from retention.engine.pacing import gate_for

    gate = gate_for(data_class="idv.photo")
    with caplog.at_level(logging.INFO, logger="retention.storage"):
        for _ in range(3):
            failed = disposer.dispose(items, erase_versions=False, gate=gate)
            assert {r.outcome for r in failed.values()} == {Outcome.TRANSIENT}
        down[0] = False
        done = disposer.dispose(items, erase_versions=False, gate=gate)

    assert {r.outcome for r in done.values()} == {Outcome.DELETED}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "does not answer (EndpointConnectionError)" in warnings[0]
    assert "answers again" in warnings[1] and "9 deletes went without an answer" in warnings[1]
    for message in warnings:
        assert s3_server.endpoint_url not in message and "secret-" not in message
        assert s3_bucket not in message
