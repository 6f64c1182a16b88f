"""POST /api/v1/runs/: the HMAC-signed control plane (SPEC §3.2)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ
from freezegun import freeze_time

from retention import api, engine
from retention.engine import DISPATCH_TASK as QUEUED_TASK
from retention.models import (
    BatchState,
    RecordState,
    Run,
    RunExecutor,
    RunMode,
    RunStatus,
    RunTrigger,
)
from retention.rest import signing
from retention.rest.models import SeenRequestSignature
from tests.helpers import put_tracked
from tests.rest.conftest import HMAC_KEYS

pytestmark = pytest.mark.django_db

PATH = "/api/v1/runs/"
KEY_ID = "ops-2026a"


def signed(body: bytes, *, key_id=KEY_ID, secret=None, timestamp=None, method="POST", path=PATH):
    secret = HMAC_KEYS[key_id] if secret is None else secret
    stamp = int(timezone.now().timestamp()) if timestamp is None else timestamp
    return signing.signed_headers(
        key_id=key_id, secret=secret, method=method, path=path, body=body, timestamp=stamp
    )


def post(client, body: bytes, headers: dict[str, str]):
    return client.post(PATH, data=body, content_type="application/json", headers=headers)


def trigger(client, payload: dict, **sign):
    body = json.dumps(payload).encode()
    return post(client, body, signed(body, **sign))


@pytest.fixture
def frozen(now):
    with freeze_time(now):
        yield now


def test_runs__signature_is_hmac_sha256_over_method_path_timestamp_and_body_digest(
    client, frozen, django_capture_on_commit_callbacks
):
    body = b'{"mode": "dry_run"}'
    stamp = str(int(frozen.timestamp()))
    message = f"POST\n{PATH}\n{stamp}\n{hashlib.sha256(body).hexdigest()}".encode()
    signature = hmac.new(HMAC_KEYS[KEY_ID].encode(), message, hashlib.sha256).hexdigest()

    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            client,
            body,
            {
                "X-Lethe-Key-Id": KEY_ID,
                "X-Lethe-Timestamp": stamp,
                "X-Lethe-Signature": signature,
            },
        )

    assert response.status_code == 202, response.json()


def test_runs__accepted_202_with_the_run_recorded_and_its_sweep_queued(
    client, make_policy, frozen, django_capture_on_commit_callbacks
):
    make_policy("idv.photo", timedelta(days=30))

    with django_capture_on_commit_callbacks() as publish:
        response = trigger(client, {"mode": "enforce", "data_classes": ["idv.photo"]})
        # Queued only once the run is committed, never before.
        assert OrmQ.objects.count() == 0
    for callback in publish:
        callback()

    assert response.status_code == 202
    body = response.json()
    run = Run.objects.get()
    assert body == {
        "run_id": str(run.pk),
        "status": "running",
        "mode": "enforce",
        "trigger": "api",
        "data_classes": ["idv.photo"],
        "tenant_id": None,
        "cutoff": "2026-03-14T12:00:00Z",
        "started_at": "2026-03-14T12:00:00Z",
    }
    assert (run.trigger, run.status) == (RunTrigger.API, RunStatus.RUNNING)
    queued = OrmQ.objects.get()
    assert queued.func() == QUEUED_TASK
    assert queued.task["args"][0] == {"run_id": str(run.pk)}
    assert run.executor == RunExecutor.QUEUE


@pytest.mark.django_db(transaction=True)
def test_runs__a_run_that_cannot_be_queued_is_closed_and_answers_503(
    client, make_policy, frozen, monkeypatch
):
    make_policy("idv.photo", timedelta(days=30))

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr("retention.broker.async_task", broker_down)
    response = trigger(client, {"mode": "enforce", "data_classes": ["idv.photo"]})

    assert response.status_code == 503
    assert response.json()["code"] == "queue_unavailable"
    run = Run.objects.get()
    assert run.status == RunStatus.ERROR
    assert "could not be queued" in run.status_reason
    # Its lease was released: the next trigger is not refused as "lease held".
    again = engine.run_start(mode=RunMode.ENFORCE, data_classes=["idv.photo"], now=frozen)
    assert again.status == RunStatus.RUNNING


def test_runs__the_queued_task_sweeps_the_run(
    client, make_policy, now, monkeypatch, django_capture_on_commit_callbacks
):
    make_policy("idv.photo", timedelta(days=30))
    record = put_tracked(now=now - timedelta(days=31))
    monkeypatch.setattr(Conf, "SYNC", True)

    with django_capture_on_commit_callbacks(execute=True):
        response = trigger(client, {"mode": "enforce", "data_classes": ["idv.photo"]})

    assert response.status_code == 202
    run = Run.objects.get(pk=response.json()["run_id"])
    assert (run.status, run.deleted) == (RunStatus.FINISHED, 1)
    record.refresh_from_db()
    assert record.state == RecordState.DELETED


def test_runs__either_of_two_rotation_keys_is_accepted(
    client, frozen, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        old = trigger(client, {"mode": "dry_run"}, key_id="ops-2026a")
        new = trigger(client, {"mode": "dry_run", "limit": 5}, key_id="ops-2026b")

    assert (old.status_code, new.status_code) == (202, 202)
    assert Run.objects.count() == 2


def _tampered(body: bytes) -> tuple[bytes, dict[str, str]]:
    return body.replace(b"dry_run", b"enforce"), signed(body)


REFUSALS = {
    "wrong_secret": (lambda b: (b, signed(b, secret="x" * 40)), "signature_invalid"),
    "tampered_body": (_tampered, "signature_invalid"),
    "other_path_signed": (lambda b: (b, signed(b, path="/api/v1/other/")), "signature_invalid"),
    "other_method_signed": (lambda b: (b, signed(b, method="PUT")), "signature_invalid"),
    "stale_timestamp": (
        lambda b: (b, signed(b, timestamp=int(timezone.now().timestamp()) - 301)),
        "signature_expired",
    ),
    "future_timestamp": (
        lambda b: (b, signed(b, timestamp=int(timezone.now().timestamp()) + 301)),
        "signature_expired",
    ),
    "unknown_key_id": (
        lambda b: (b, signed(b, key_id="ops-1999", secret="z" * 40)),
        "signature_key_unknown",
    ),
    "missing_signature": (
        lambda b: (b, {k: v for k, v in signed(b).items() if k != "X-Lethe-Signature"}),
        "signature_missing",
    ),
    "malformed_timestamp": (
        lambda b: (b, {**signed(b), "X-Lethe-Timestamp": "2026-03-14T12:00:00Z"}),
        "signature_malformed",
    ),
    "unsigned": (lambda b: (b, {}), "signature_missing"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_runs__refused_requests_answer_401_and_start_nothing(
    client, make_policy, frozen, case, django_capture_on_commit_callbacks
):
    make_policy("idv.photo", timedelta(days=30))
    build, code = REFUSALS[case]
    body, headers = build(b'{"mode": "dry_run"}')

    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, body, headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Lethe-HMAC-SHA256"
    assert response.json()["code"] == code
    assert not Run.objects.exists()
    assert not OrmQ.objects.exists()


def test_runs__the_window_is_300_seconds_either_way(
    client, frozen, django_capture_on_commit_callbacks
):
    stamp = int(frozen.timestamp())

    with django_capture_on_commit_callbacks(execute=True):
        past = trigger(client, {"mode": "dry_run"}, timestamp=stamp - 300)
        future = trigger(client, {"mode": "dry_run", "limit": 1}, timestamp=stamp + 300)

    assert (past.status_code, future.status_code) == (202, 202)


def test_runs__an_exact_replay_is_refused_and_starts_nothing(
    client, frozen, django_capture_on_commit_callbacks
):
    body = b'{"mode": "dry_run"}'
    headers = signed(body)

    with django_capture_on_commit_callbacks(execute=True):
        first = post(client, body, headers)
    with freeze_time(frozen + timedelta(seconds=200)):
        replay = post(client, body, headers)

    assert first.status_code == 202
    assert replay.status_code == 401
    assert replay.json()["code"] == "signature_replayed"
    assert Run.objects.count() == 1
    assert OrmQ.objects.count() == 1


def test_runs__seen_signatures_are_pruned_once_they_would_be_stale(
    client, frozen, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        trigger(client, {"mode": "dry_run"})
    assert SeenRequestSignature.objects.count() == 1

    with (
        freeze_time(frozen + timedelta(seconds=301)),
        django_capture_on_commit_callbacks(execute=True),
    ):
        trigger(client, {"mode": "dry_run"})

    assert SeenRequestSignature.objects.count() == 1
    assert SeenRequestSignature.objects.get().signed_at == frozen + timedelta(seconds=301)


def test_runs__lease_held_answers_409_run_refused_and_keeps_the_refusal(
    client, make_policy, frozen
):
    make_policy("idv.photo", timedelta(days=30))
    holder = engine.run_start(mode=RunMode.ENFORCE, data_classes=["idv.photo"], now=frozen)

    response = trigger(client, {"mode": "enforce", "data_classes": ["idv.photo"]})

    assert response.status_code == 409
    body = response.json()
    assert (body["code"], body["reason"]) == ("run_refused", "lease_held")
    assert str(holder.pk) in body["detail"]
    refused = Run.objects.get(pk=body["run_id"])
    assert (refused.status, refused.trigger) == (RunStatus.REFUSED, RunTrigger.API)
    assert not OrmQ.objects.exists()


def test_runs__paused_answers_409_paused(client, make_policy, approver, frozen):
    make_policy("idv.photo", timedelta(days=30))
    api.pause(by=approver, reason="incident", now=frozen)

    response = trigger(client, {"mode": "enforce"})

    assert response.status_code == 409
    assert response.json()["reason"] == "paused"


def test_runs__unknown_data_class_answers_400_bad_arguments(client, make_policy, frozen):
    make_policy("idv.photo", timedelta(days=30))

    response = trigger(client, {"mode": "dry_run", "data_classes": ["no.such"]})

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["reason"]) == ("run_refused", "bad_arguments")


@pytest.mark.parametrize(
    ("payload", "field"),
    [({}, "mode"), ({"mode": "wipe"}, "mode"), ({"mode": "dry_run", "limit": 0}, "limit")],
)
def test_runs__invalid_input_answers_400_invalid_and_starts_nothing(client, frozen, payload, field):
    response = trigger(client, payload)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert field in response.json()["field_errors"]
    assert not Run.objects.exists()


def test_runs__the_key_id_is_logged_never_the_secret(
    client, frozen, caplog, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.INFO, logger="retention.api")

    with django_capture_on_commit_callbacks(execute=True):
        accepted = trigger(client, {"mode": "dry_run"})
        refused = trigger(client, {"mode": "dry_run"}, secret="y" * 40)

    assert (accepted.status_code, refused.status_code) == (202, 401)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert logged.count(KEY_ID) >= 3  # accepted, run started, refused
    assert "signature_invalid" in logged
    for secret in [*HMAC_KEYS.values(), "y" * 40]:
        assert secret not in logged


def test_runs__unreadable_hmac_keys_refuse_every_signed_request(client, settings, frozen):
    settings.RETENTION_HMAC_KEYS = "ops-2026a-without-a-colon"

    response = trigger(client, {"mode": "dry_run"})

    assert response.status_code == 401
    assert response.json()["code"] == "signature_key_unknown"
    assert not Run.objects.exists()


# --------------------------------------------------------------------------
# GET /api/v1/runs/{id}/: the operators' scheduler follows a run (issue 16)


def get_run(client, run_id, **sign):
    path = f"{PATH}{run_id}/"
    return client.get(path, headers=signed(b"", method="GET", path=path, **sign))


def test_run_detail__signed_answers_status_counts_and_batches(client, make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    put_tracked(now=now - timedelta(days=31))
    put_tracked(now=now - timedelta(days=1))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)

    running = get_run(client, run.pk)
    engine.run_execute(run=run, clock=lambda: now)
    with freeze_time(timezone.now() + timedelta(seconds=2)):
        finished = get_run(client, run.pk)

    assert running.status_code == 200, running.json()
    assert running.json()["status"] == RunStatus.RUNNING
    body = finished.json()
    assert (body["run_id"], body["status"], body["mode"]) == (
        str(run.pk),
        RunStatus.FINISHED,
        RunMode.ENFORCE,
    )
    assert body["counts"]["deleted"] == 1 and body["counts"]["eligible"] == 1
    assert body["finished_at"] is not None
    assert body["batches"] == dict.fromkeys(BatchState.values, 0)
    # The same run object as run_retention --json: each class's cutoff, its unit, retried.
    assert body["cutoffs"] == {"idv.photo": body["cutoff"]}
    assert body["units"] == {"idv.photo": "records"}
    assert (body["retried"], body["oldest_due_at"]) == (0, body["oldest_eligible_at"])
    assert body["oldest_due_at"] is not None


def test_run_detail__unsigned_or_badly_signed_is_refused_and_unknown_is_404(client, make_policy):
    make_policy("idv.photo", timedelta(days=30))
    run = engine.run_start(mode=RunMode.DRY_RUN, now=timezone.now())
    path = f"{PATH}{run.pk}/"

    assert client.get(path).status_code == 401
    assert get_run(client, run.pk, secret="not-the-secret").status_code == 401
    unknown = get_run(client, "00000000-0000-0000-0000-000000000000")
    assert unknown.status_code == 404
