"""Erasure requests at their edges: what must neither stop the engine nor pass unseen.

A subject id one class's field cannot hold, an erase run that fails, a
redacting class kept from its pages, a request left executing, and a replay
of rows without a time of their own.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from retention import api
from retention.engine.erasure import erasures_execute
from retention.engine.erasure_replay import erasures_replay
from retention.models import ErasureState, Policy, Run, RunMode, RunStatus
from retention.selectors.erasure_execution import RETRY_AFTER, erasures_due
from tests.engine.erasure.test_erasure_replay import _entry_for
from tests.rowhost.models import Account, WebSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(row_registry: Any, make_policy: Any) -> None:
    """Web sessions whose subject link is a UUID: an email names none of them."""
    api.register_model(
        WebSession,
        data_class="web.session",
        age_field="created_at",
        tenant_field="tenant_id",
        subject_field="key",
    )
    make_policy("web.session", timedelta(days=30))


def test_erase__a_subject_id_a_class_cannot_hold_completes_and_the_sweep_goes_on(
    host, sessions, approved, now
):
    request = approved()

    call_command("run_retention", stdout=StringIO(), stderr=StringIO())

    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED
    assert request.outcome["classes"]["web.session"]["left"] == 0
    assert Run.objects.filter(mode=RunMode.ENFORCE, status=RunStatus.FINISHED).exists()


def test_erase__an_unknown_subject_with_such_a_class_is_approved_and_completes(
    host, sessions, approved
):
    request = approved(subject_id="nobody@x.test")

    request.refresh_from_db()
    assert request.state == ErasureState.COMPLETED


def test_run_retention__a_failing_erase_run_does_not_stop_the_sweep(host, approved, monkeypatch):
    request = approved()

    from retention.engine import inline

    sweep = inline._execute

    def broken(stepper: Any, **kwargs: Any) -> Run:
        if stepper.run.mode == RunMode.ERASE:
            raise RuntimeError("the store fell over")
        return sweep(stepper, **kwargs)

    # The erase run's sweep fails (its run is closed as an error); the sweep runs after.
    monkeypatch.setattr(inline, "_execute", broken)
    call_command("run_retention", stdout=StringIO(), stderr=StringIO())

    assert Run.objects.get(erasure=request).status == RunStatus.ERROR
    assert Run.objects.filter(mode=RunMode.ENFORCE, status=RunStatus.FINISHED).exists()
    request.refresh_from_db()
    assert request.state == ErasureState.EXECUTING


def test_erase__a_redacting_class_kept_from_its_pages_is_not_completed(host, approved, now):
    request = approved()
    Policy.objects.filter(data_class="accounts.redact").update(review_reason="cascade left")

    erasures_execute(clock=lambda: now + timedelta(minutes=5))

    request.refresh_from_db()
    assert Account.objects.get(email="ann@x.test").name == "Ann"
    assert request.state == ErasureState.EXECUTING
    assert request.outcome["classes"]["accounts.redact"]["left"] == 1


def test_erase__an_executing_request_is_due_again_only_after_a_while(host, approved, now):
    request = approved()
    Policy.objects.filter(data_class="accounts.redact").update(review_reason="cascade left")
    later = now + timedelta(minutes=5)
    erasures_execute(clock=lambda: later)
    finished = Run.objects.get(erasure=request).finished_at

    assert erasures_due(now=finished + RETRY_AFTER - timedelta(seconds=1)) == []
    assert erasures_due(now=finished + RETRY_AFTER + timedelta(seconds=1)) == [request]


def test_replay__reaches_a_row_without_an_age_and_says_which_classes_are_bound_by_key(
    host, anchors, now
):
    # Carl's account is open: its closing date, the class's age column, is empty.
    carl = Account.objects.create(tenant_id="acme", name="Carl", email="carl@x.test")
    entry = _entry_for(
        "carl@x.test", received_at=now + timedelta(hours=1), classes=["accounts.redact"]
    )

    (done,) = erasures_replay(entries=[entry], clock=lambda: now + timedelta(days=1))

    assert (done.action, done.items) == ("replayed", 1)
    assert Account.objects.get(pk=carl.pk).name == "[redacted]"
    assert done.key_bound == ()
