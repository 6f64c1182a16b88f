"""The registration is part of what is approved (issue 25, deliverable 2).

Editing ``scope=`` (or the age or tenant field, the strategies, ``files=``,
the evidence mode, or the model graph behind the cascade) in the host's
``register_model`` call must not change what an approved version disposes
of: the class disposes of nothing until a version that adopts the change is
approved.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from retention import api, redaction, services
from retention.engine import run_execute, run_start
from retention.exceptions import InvalidPolicyVersion
from retention.models import PolicyVersion, Run
from retention.rows.registration import (
    check_stable_scopes,
    fingerprint,
    registration_of,
    stable_repr,
)
from retention.selectors.version_changes import registration_drift
from tests.helpers import submitted
from tests.rowhost.models import Account, RequestLog

pytestmark = pytest.mark.django_db

DATA_CLASS = "logs.request"


def _only_ok(qs: Any) -> Any:
    return qs.filter(status=200)


def _only_errors(qs: Any) -> Any:
    return qs.filter(status__gte=500)


def _register(row_registry: Any, **options: Any) -> Any:
    defaults: dict[str, Any] = {
        "data_class": DATA_CLASS,
        "age_field": "created_at",
        "tenant_field": "tenant_id",
        "scope": _only_ok,
    }
    return row_registry.register_model(RequestLog, **{**defaults, **options})


@pytest.fixture
def logs(row_registry: Any, make_policy: Any) -> PolicyVersion:
    _register(row_registry)
    version: PolicyVersion = make_policy(DATA_CLASS, timedelta(days=30))
    return version


def _rows(now: datetime) -> None:
    RequestLog.objects.bulk_create(
        [
            RequestLog(tenant_id="t1", path=f"/ok/{i}", status=200, created_at=now - timedelta(40))
            for i in range(4)
        ]
        + [
            RequestLog(tenant_id="t1", path=f"/err/{i}", status=500, created_at=now - timedelta(40))
            for i in range(3)
        ]
    )


def _run(now: datetime, mode: str = "enforce") -> Run:
    run = run_start(mode=mode, data_classes=[DATA_CLASS], now=now)
    return run_execute(run=run, clock=lambda: now)


def _adopt(author: Any, approver: Any, now: datetime) -> PolicyVersion:
    """A draft from the version in force, approved: it records the registration now."""
    draft = submitted(DATA_CLASS, timedelta(days=30), author=author, now=now)
    return services.policy_version_approve(version=draft, approver=approver, now=now)


# --------------------------------------------------------------------------
# What a version records


def test_approval__records_the_registration_and_its_fingerprint(logs):
    registration = logs.registration

    assert registration["model"] == "rowhost.RequestLog"
    assert registration["table"] == "rowhost_requestlog"
    assert registration["age_field"] == "created_at"
    assert registration["expires_field"] is None
    assert registration["tenant_field"] == "tenant_id"
    assert '"status" = %s' in registration["scope"]["sql"]
    assert registration["scope"]["params"] == ["200"]
    assert registration["evidence"] == "per_row"
    assert logs.registration_fingerprint == fingerprint(registration)
    assert len(logs.registration_fingerprint) == 64
    assert registration_drift(logs) is None


def test_approval__a_class_of_tracked_objects_records_no_registration(make_policy):
    version = make_policy("idv.photo", timedelta(days=30))

    assert version.registration is None
    assert version.registration_fingerprint == ""
    assert registration_drift(version) is None


@pytest.mark.parametrize(
    "change",
    [
        {"scope": _only_errors},
        {"scope": None},
        {"tenant_field": None},
        {"age_field": None, "expires_field": "created_at"},
        {"evidence": "per_batch"},
    ],
    ids=["scope", "no-scope", "tenant", "expiry", "evidence"],
)
def test_fingerprint__every_part_of_the_registration_changes_it(row_registry, change):
    before = fingerprint(registration_of(_register(row_registry)))

    after = fingerprint(registration_of(_register(row_registry, **change)))

    assert after != before


def test_fingerprint__strategies_and_files_change_it(row_registry):
    def account(**options: Any) -> str:
        row = row_registry.register_model(
            Account, data_class="crm.account", age_field="closed_at", **options
        )
        return fingerprint(registration_of(row))

    plain = account()
    redacting = account(redact={"name": redaction.Constant("[redacted]")})
    other_value = account(redact={"name": redaction.Constant("-")})
    with_files = account(files=("avatar",))

    assert len({plain, redacting, other_value, with_files}) == 4


def test_fingerprint__the_same_scope_written_another_way_is_the_same(row_registry):
    before = fingerprint(registration_of(_register(row_registry)))

    after = fingerprint(
        registration_of(_register(row_registry, scope=lambda qs: qs.filter(status__exact=200)))
    )

    assert after == before


def test_fingerprint__a_fixed_date_in_the_scope_is_stable_and_read_as_a_date(row_registry):
    since = datetime(2026, 1, 1, tzinfo=UTC)
    row = _register(row_registry, scope=lambda qs: qs.filter(created_at__gte=since))

    registration = registration_of(row)

    assert check_stable_scopes() == []
    assert registration == registration_of(row)
    assert "2026-01-01" in registration["scope"]["params"][0]


def test_stable_repr__an_object_without_a_readable_repr_has_no_address():
    class Upper:
        def __init__(self) -> None:
            self.suffix = "!"

    text = stable_repr(Upper())

    assert " at 0x" not in text
    assert text.endswith("Upper({'suffix': '!'})")
    assert stable_repr(redaction.Mask(keep_last=2)) == "Mask(keep_last=2, char='*')"


# --------------------------------------------------------------------------
# A registration changed in the code: nothing is disposed of


def test_run__a_changed_scope_disposes_of_nothing_and_the_run_says_why(logs, row_registry, now):
    _rows(now)
    _register(row_registry, scope=_only_errors)

    run = _run(now)

    assert run.status == "finished"
    assert (run.deleted, run.redacted) == (0, 0)
    assert RequestLog.objects.count() == 7
    reason = run.report["rules"][DATA_CLASS]["registration_changed"]
    assert "registration of logs.request in the code differs" in reason
    assert "scope" in reason
    assert "approve a version that adopts it" in reason


def test_queued_run__a_changed_scope_publishes_no_page_of_the_class(logs, row_registry, now):
    from retention import engine
    from retention.engine.guard import GuardReading
    from retention.engine.publish import BATCH_TASK

    def quiet(*, now: datetime) -> GuardReading:
        return GuardReading(over_budget=False, value=0.0, budget=30.0, detail="")

    delivered: list[dict[str, Any]] = []

    def publish(func: str, payload: dict[str, Any], name: str) -> None:
        if func == BATCH_TASK:
            delivered.append(payload)
            engine.batch_dispose(payload=payload, clock=lambda: now, publish=publish, guard=quiet)

    _rows(now)
    _register(row_registry, scope=_only_errors)

    run = engine.run_enqueue(
        mode="enforce", trigger="command", data_classes=[DATA_CLASS], now=now, publish=publish
    )
    engine.run_arm(run_id=run.pk, clock=lambda: now, publish=publish, guard=quiet)

    run.refresh_from_db()
    assert run.status == "finished"
    assert run.deleted == 0
    assert delivered == []
    assert RequestLog.objects.count() == 7
    assert run.report["rules"][DATA_CLASS]["registration_changed"]


def test_dry_run__still_counts_the_rows_under_the_scope_in_the_code(logs, row_registry, now):
    _rows(now)
    _register(row_registry, scope=_only_errors)

    run = _run(now, mode="dry_run")

    assert run.eligible == 3
    assert run.report["rules"][DATA_CLASS]["registration_changed"]


def test_run__a_changed_cascade_disposes_of_nothing(logs, now):
    _rows(now)
    # As if the version had been approved before a relation was added.
    cascade = dict(logs.cascade)
    cascade["nulls"] = [{"model": "rowhost.Gone", "field": "log", "path": [], "kind": "set_null"}]
    PolicyVersion.objects.filter(pk=logs.pk).update(cascade=cascade)

    run = _run(now)

    assert run.deleted == 0
    assert RequestLog.objects.count() == 7
    assert (
        "what deleting a row also deletes"
        in run.report["rules"][DATA_CLASS]["registration_changed"]
    )


def test_run__a_version_approved_before_registrations_were_recorded_disposes_of_nothing(logs, now):
    _rows(now)
    PolicyVersion.objects.filter(pk=logs.pk).update(registration=None, registration_fingerprint="")

    run = _run(now)

    assert run.deleted == 0
    assert (
        "was not recorded when v1 was approved"
        in run.report["rules"][DATA_CLASS]["registration_changed"]
    )


def test_adopting_version__approved_the_class_runs_again_under_the_new_scope(
    logs, row_registry, author, approver, now
):
    _rows(now)
    _register(row_registry, scope=_only_errors)
    assert _run(now).deleted == 0

    adopted = _adopt(author, approver, now)
    run = _run(now)

    assert registration_drift(adopted) is None
    assert adopted.registration["scope"]["params"] == ["500"]
    assert run.deleted == 3
    assert set(RequestLog.objects.values_list("status", flat=True)) == {200}


def test_approval__refused_when_the_code_changed_after_the_version_was_drafted(
    logs, row_registry, author, approver, now
):
    draft = submitted(DATA_CLASS, timedelta(days=60), author=author, now=now)
    _register(row_registry, scope=_only_errors)

    with pytest.raises(InvalidPolicyVersion, match="changed after v2 was drafted"):
        services.policy_version_approve(version=draft, approver=approver, now=now)


# --------------------------------------------------------------------------
# A scope that reads the clock


def _recent(qs: Any) -> Any:
    return qs.filter(created_at__gte=timezone.now() - timedelta(days=1))


def test_register__a_scope_that_reads_the_clock_is_refused(row_registry):
    with pytest.raises(ImproperlyConfigured) as refused:
        api.register_model(RequestLog, data_class=DATA_CLASS, age_field="created_at", scope=_recent)

    message = str(refused.value)
    assert "gives other SQL each time it is called" in message
    assert "time belongs to the class's date field" in message
    assert "the run's cutoff" in message
    assert DATA_CLASS not in row_registry.row_classes()


def test_check__a_clock_scope_registered_while_models_load_is_e032(row_registry, monkeypatch):
    # The ``registered`` decorator runs while the app registry loads: no refusal yet.
    monkeypatch.setattr(apps, "models_ready", False)
    api.register_model(RequestLog, data_class=DATA_CLASS, age_field="created_at", scope=_recent)
    monkeypatch.setattr(apps, "models_ready", True)

    messages = check_stable_scopes()

    assert [m.id for m in messages] == ["retention.E032"]
    assert "time belongs to the class's date field" in messages[0].msg


def test_check__a_fixed_scope_passes(row_registry):
    _register(row_registry)

    assert check_stable_scopes() == []


def test_propose__a_clock_scope_cannot_be_drafted(row_registry, monkeypatch, author, now):
    monkeypatch.setattr(apps, "models_ready", False)
    api.register_model(RequestLog, data_class=DATA_CLASS, age_field="created_at", scope=_recent)
    monkeypatch.setattr(apps, "models_ready", True)

    with pytest.raises(InvalidPolicyVersion, match="gives other SQL"):
        services.policy_version_propose(
            data_class=DATA_CLASS, retention_period=timedelta(days=30), author=author, now=now
        )
