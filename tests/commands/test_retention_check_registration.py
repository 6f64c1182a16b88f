"""`retention_check` fails with `registration_changed` when the code no longer
matches the registration approved with a row class's version (issue 25)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import services
from tests.helpers import retention_check as check
from tests.helpers import submitted

pytestmark = pytest.mark.django_db

DATA_CLASS = "logs.request"


def _register(register_logs: Any, status: int) -> None:
    register_logs(tenant_field=None, scope=lambda qs: qs.filter(status=status))


@pytest.fixture
def logs(register_logs: Any, make_policy: Any, now: datetime) -> Any:
    _register(register_logs, 200)
    return make_policy(DATA_CLASS, timedelta(days=30), at=now)


def test_check__a_matching_registration_is_ok(logs, now):
    code, out, _ = check(at=now)

    assert code == 0
    assert "registration" not in out


def test_check__a_changed_scope_fails_with_registration_changed(logs, register_logs, now):
    _register(register_logs, 500)

    code, out, _ = check(at=now)
    json_code, json_out, _ = check("--json", at=now)

    assert code == 1
    assert f"{DATA_CLASS} [enforce] BROKEN: registration changed, nothing is disposed of" in out
    assert "approve a version that adopts it" in out
    report = json.loads(json_out)
    assert json_code == 1
    assert report["broken"] == [DATA_CLASS]
    [entry] = report["data_classes"]
    assert "registration_changed" in entry["broken"]


def test_check__a_report_only_class_is_not_checked(register_logs, make_policy, now):
    _register(register_logs, 200)
    make_policy(DATA_CLASS, timedelta(days=30), at=now, enforce=False)
    _register(register_logs, 500)

    code, _, _ = check(at=now)

    assert code == 0


def test_check__ok_again_once_a_version_adopting_the_registration_is_approved(
    logs, register_logs, author, approver, now
):
    _register(register_logs, 500)
    draft = submitted(DATA_CLASS, timedelta(days=30), author=author, now=now)
    services.policy_version_approve(version=draft, approver=approver, now=now)

    code, _, _ = check(at=now)

    assert code == 0
