"""What an erasure request does to a class: each policy version says it (issue 29, point 2).

``on_erasure`` is ``delete``, ``redact`` (model rows registered with
strategies) or ``keep``, and ``keep`` needs its written legal basis
(``erasure_basis``). Left out, a version does what its disposition does.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction

from retention import api
from retention.admin.policies import DraftForm
from retention.exceptions import InvalidPolicyVersion
from retention.models import PolicyVersion
from retention.selectors.version_changes import version_diff

pytestmark = pytest.mark.django_db

BASIS = "Invoices are kept 10 years under tax law (AO §147)."


def _propose(author, data_class="idv.photo", **rules):
    return api.propose_policy_version(
        data_class=data_class, retention_period=timedelta(days=30), author=author, **rules
    )


def test_propose__without_on_erasure_a_version_does_what_its_disposition_does(
    author, register_accounts
):
    register_accounts()

    deleting = _propose(author)
    redacting = _propose(author, "accounts.redact", disposition="redact")

    assert (deleting.on_erasure, deleting.erasure_basis) == ("delete", "")
    assert redacting.on_erasure == "redact"


def test_propose__keep_is_stored_with_its_legal_basis(author):
    version = _propose(author, on_erasure="keep", erasure_basis=BASIS)

    version.refresh_from_db()
    assert (version.on_erasure, version.erasure_basis) == ("keep", BASIS)


@pytest.mark.parametrize("basis", ["", "   "])
def test_propose__keep_without_a_legal_basis_is_refused(author, basis):
    with pytest.raises(InvalidPolicyVersion, match="needs erasure_basis"):
        _propose(author, on_erasure="keep", erasure_basis=basis)

    assert not PolicyVersion.objects.exists()


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ({"on_erasure": "shred"}, "Unknown on_erasure 'shred': one of delete, redact, keep"),
        ({"on_erasure": "redact"}, "on_erasure 'redact' is for model rows"),
        ({"on_erasure": "keep", "erasure_basis": 10}, "erasure_basis is text"),
    ],
)
def test_propose__what_cannot_be_done_on_erasure_is_refused(author, rules, says):
    with pytest.raises(InvalidPolicyVersion, match=says):
        _propose(author, **rules)

    assert not PolicyVersion.objects.exists()


def test_propose__redact_on_erasure_needs_a_class_with_strategies(author, register_logs):
    register_logs()

    with pytest.raises(InvalidPolicyVersion, match="was registered without redact"):
        _propose(author, "logs.request", on_erasure="redact")


def test_database__refuses_keep_without_a_basis(author):
    version = _propose(author, on_erasure="keep", erasure_basis=BASIS)

    with pytest.raises(IntegrityError), transaction.atomic():
        PolicyVersion.objects.filter(pk=version.pk).update(erasure_basis="")


def test_version_diff__shows_a_change_of_what_an_erasure_does(author, approver):
    first = _propose(author)
    api.submit_policy_version(first, by=author)
    api.approve_policy_version(first, approver=approver)
    second = _propose(author, on_erasure="keep", erasure_basis=BASIS)

    changed = {
        row.name: (row.before, row.after) for row in version_diff(second, first) if row.changed
    }

    assert changed["on_erasure"] == ("delete", "keep")
    assert changed["erasure_basis"] == ("", BASIS)


def test_admin_form__offers_redact_only_to_a_class_with_strategies(register_accounts):
    register_accounts()

    def offered(data_class: str) -> list[str]:
        form = DraftForm(initial={"data_class": data_class})
        return [value for value, _label in form.fields["on_erasure"].choices]

    assert offered("idv.photo") == ["", "delete", "keep"]
    assert offered("accounts.redact") == ["", "delete", "redact", "keep"]


def _form(**data):
    base = {
        "data_class": "idv.photo",
        "retention_period": "30 days",
        "safety_margin": "0 seconds",
        "disposition": "delete",
        "batch_size": 500,
    }
    return DraftForm(data={**base, **data})


def test_admin_form__left_empty_on_erasure_is_the_disposition():
    form = _form()

    assert form.is_valid(), form.errors
    assert form.cleaned_data["on_erasure"] == "delete"


def test_admin_form__left_empty_on_a_redacting_class_it_redacts(register_accounts):
    register_accounts()

    form = _form(data_class="accounts.redact", disposition="redact")

    assert form.is_valid(), form.errors
    assert form.cleaned_data["on_erasure"] == "redact"


def test_admin_form__keep_needs_its_legal_basis():
    refused = _form(on_erasure="keep")
    kept = _form(on_erasure="keep", erasure_basis=BASIS)

    assert not refused.is_valid()
    assert refused.errors["erasure_basis"] == [
        "Keeping a subject's data after an erasure needs its legal basis."
    ]
    assert kept.is_valid(), kept.errors
    assert (kept.cleaned_data["on_erasure"], kept.cleaned_data["erasure_basis"]) == ("keep", BASIS)
