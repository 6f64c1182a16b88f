"""System checks of the data map: retention.E034, retention.E035 and retention.W008."""

from __future__ import annotations

from typing import Any

from django.core.checks import run_checks

from retention.datamap_checks import check_exempt_models, check_ungoverned_personal_models
from tests.rowhost.models import Subscriber


def _ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


def test_check_e034__an_exemption_without_a_reason_is_an_error_naming_the_model(settings):
    settings.RETENTION_EXEMPT_MODELS = {"rowhost.Subscriber": ""}

    (error,) = check_exempt_models()

    assert error.id == "retention.E034"
    assert "RETENTION_EXEMPT_MODELS['rowhost.Subscriber'] has no reason" in error.msg


def test_check_e034__exemptions_that_are_not_a_dict_are_an_error(settings):
    settings.RETENTION_EXEMPT_MODELS = ["rowhost.Subscriber"]

    assert _ids(check_exempt_models()) == ["retention.E034"]


def test_check_e035__an_unknown_label_is_an_error_naming_it(settings):
    settings.RETENTION_EXEMPT_MODELS = {
        "rowhost.Subscriber": "consent proofs",
        "rowhost.Subscribers": "a typo",
    }

    (error,) = check_exempt_models()

    assert error.id == "retention.E035"
    assert "'rowhost.Subscribers'" in error.msg


def test_check_e035__labels_of_auto_created_tables_and_either_case_are_known(settings):
    settings.RETENTION_EXEMPT_MODELS = {
        "auth.User_groups": "memberships",
        "rowhost.subscriber": "consent proofs",
        "migrations.Migration": "bookkeeping",
    }

    assert check_exempt_models() == []


def test_check_w008__lists_an_ungoverned_model_with_its_personal_looking_fields():
    (warning,) = check_ungoverned_personal_models()

    assert warning.id == "retention.W008"
    assert "rowhost.Subscriber (contact, origin)" in warning.msg
    assert "Silencing this check governs nothing" in warning.hint


def test_check_w008__is_silent_for_a_governed_or_exempt_model(settings, row_registry):
    settings.RETENTION_EXEMPT_MODELS = {"rowhost.Subscriber": "consent proofs"}
    exempt = check_ungoverned_personal_models()
    settings.RETENTION_EXEMPT_MODELS = {}
    row_registry.register_model(Subscriber, data_class="marketing.subs", age_field="created_at")
    governed = check_ungoverned_personal_models()

    for messages in (exempt, governed):
        assert all("rowhost.Subscriber" not in m.msg for m in messages)


def test_check_w008__is_a_deploy_check():
    assert "retention.W008" not in _ids(run_checks(tags=["retention"]))
    assert "retention.W008" in _ids(run_checks(tags=["retention"], include_deployment_checks=True))
