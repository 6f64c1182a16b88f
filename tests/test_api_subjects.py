"""Data subjects (issue 29, point 1): what links an item to the person it is about.

A tracked object's subject is the keyed digest of the id the host gives
``track(subject_id=)``, never the id; a row class names the field whose
value is a row's subject (``register_model(subject_field=)``), as part of
the registration a version approves.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.forms.models import model_to_dict

from retention import api
from retention.digest import key_digest, subject_digest
from retention.exceptions import RetentionError
from retention.models import RetentionRecord
from retention.rows.registration import fingerprint, registration_lines, registration_of
from retention.selectors.datamap import data_map
from tests.rowhost.models import Account

pytestmark = pytest.mark.django_db


def _track(key: str, **kwargs):
    storages["default"].save(key, ContentFile(b"x"))
    return api.track(tenant_id="acme", data_class="idv.photo", object_key=key, **kwargs)


def test_track__keeps_the_subject_as_a_keyed_digest_never_the_id(make_policy, settings):
    make_policy("idv.photo")

    record = _track("acme/a.jpg", subject_id="user-4711")

    record.refresh_from_db()
    assert record.subject_digest == subject_digest("user-4711")
    assert len(record.subject_digest) == 64
    assert not any("user-4711" in str(value) for value in model_to_dict(record).values())
    # Its own domain: an object key spelled like the id digests to something else.
    assert record.subject_digest != key_digest("user-4711")
    # Keyed: another digest key, another digest.
    settings.RETENTION_DIGEST_KEY = "another-key"
    assert subject_digest("user-4711") != record.subject_digest


def test_track__an_integer_id_is_its_text_and_no_subject_is_empty(make_policy):
    make_policy("idv.photo")

    by_int = _track("acme/a.jpg", subject_id=4711)
    by_text = _track("acme/b.jpg", subject_id="4711")
    without = _track("acme/c.jpg")

    assert by_int.subject_digest == by_text.subject_digest == subject_digest("4711")
    assert without.subject_digest == ""


@pytest.mark.parametrize("bad", ["", "   ", True, 3.5, b"4711", ["4711"]])
def test_track__refuses_a_subject_id_that_is_not_a_string_or_an_integer(make_policy, bad):
    make_policy("idv.photo")

    with pytest.raises(RetentionError, match="subject_id"):
        _track("acme/a.jpg", subject_id=bad)

    assert not RetentionRecord.objects.exists()


def test_register_model__names_the_subject_field_in_the_registration(row_registry):
    row = api.register_model(
        Account, data_class="accounts.closed", age_field="closed_at", subject_field="email"
    )

    assert row.subject_field == "email"
    registration = registration_of(row)
    assert registration["subject_field"] == "email"
    assert ("data subject column", "email") in registration_lines(registration)


def test_register_model__without_a_subject_field_the_registration_is_as_before(row_registry):
    row = api.register_model(Account, data_class="accounts.closed", age_field="closed_at")
    registration = registration_of(row)

    # Versions approved before subject links recorded no such key: their
    # fingerprint still matches the code's, so their classes go on.
    assert "subject_field" not in registration
    with_one = registration_of(
        api.register_model(
            Account, data_class="accounts.closed", age_field="closed_at", subject_field="email"
        )
    )
    assert fingerprint(with_one) != fingerprint(registration)
    assert fingerprint({k: v for k, v in with_one.items() if k != "subject_field"}) == (
        fingerprint(registration)
    )


@pytest.mark.parametrize("bad", ["", " ", 4, ("email",)])
def test_register_model__refuses_a_subject_field_that_is_not_a_name(row_registry, bad):
    with pytest.raises(ImproperlyConfigured, match="subject_field"):
        api.register_model(
            Account, data_class="accounts.closed", age_field="closed_at", subject_field=bad
        )


def _errors(data_class: str) -> list[str]:
    return [
        f"{m.id}: {m.msg}"
        for m in run_checks()
        if m.id and m.id.startswith("retention.E") and data_class in m.msg
    ]


@pytest.mark.parametrize("path", ["email", "referrer", "referrer__email"])
def test_checks__a_column_or_a_path_of_relations_to_one_is_fine(row_registry, path):
    api.register_model(
        Account, data_class="accounts.closed", age_field="closed_at", subject_field=path
    )

    assert _errors("accounts.closed") == []


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("mail", "retention.E016: rowhost.Account (data class 'accounts.closed'): subject_field"),
        ("name__email", "goes through 'name', which is not a relation of rowhost.Account"),
        ("referrer__mail", "subject_field 'referrer__mail'"),
        ("tags", "subject_field 'tags'"),
    ],
)
def test_checks__an_unknown_subject_field_is_e016(row_registry, path, says):
    api.register_model(
        Account, data_class="accounts.closed", age_field="closed_at", subject_field=path
    )

    (error,) = _errors("accounts.closed")
    assert error.startswith("retention.E016")
    assert says in error


def test_data_map__shows_the_subject_field_and_what_an_erasure_does(row_registry, make_policy, now):
    api.register_model(
        Account, data_class="accounts.closed", age_field="closed_at", subject_field="email"
    )
    make_policy("accounts.closed", timedelta(days=90))

    (governance,) = next(
        e for e in data_map(now=now).models if e.label == "rowhost.Account"
    ).governance
    assert (governance.subject_field, governance.on_erasure) == ("email", "delete")
