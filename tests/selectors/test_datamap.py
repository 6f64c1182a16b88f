"""Which fields the data map flags as personal-looking, and why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import models
from django.test.utils import isolate_apps

from retention.selectors.personal_fields import personal_fields


class _AvatarField(models.ImageField):  # a host's own subclass
    pass


def _model(name: str, **fields: models.Field) -> type[models.Model]:
    attrs: dict[str, object] = {
        "__module__": __name__,
        "Meta": type("Meta", (), {"app_label": "rowhost", "managed": False}),
        **fields,
    }
    return type(name, (models.Model,), attrs)


def _flagged(model: type[models.Model]) -> dict[str, str]:
    return {f.name: f.why for f in personal_fields(model)}


@pytest.fixture(autouse=True)
def _own_registry() -> Iterator[None]:
    """The models below live in a registry of their own, not the project's."""
    with isolate_apps("tests.rowhost"):
        yield


def _names() -> type[models.Model]:
    return _model(
        "DataMapNames",
        username=models.CharField(max_length=10),
        client_ip=models.CharField(max_length=10),
        zip_code=models.CharField(max_length=10),
        description=models.TextField(),
        userAgent=models.CharField(max_length=10),
        user_agent_hash=models.CharField(max_length=10),
        agent=models.CharField(max_length=10),
        date_of_birth=models.DateField(),
        telephone=models.CharField(max_length=10),
        reset_token=models.CharField(max_length=10),
        iban=models.CharField(max_length=34),
        picture=_AvatarField(),
        scan=models.FileField(),
    )


def test_personal_fields__names_match_whole_words_or_long_words_inside_others():
    flagged = _flagged(_names())

    assert flagged["username"] == "name matches 'name'"
    assert flagged["client_ip"] == "name matches 'ip'"
    assert flagged["userAgent"] == "name matches 'user agent'"
    assert flagged["user_agent_hash"] == "name matches 'user agent'"
    assert flagged["date_of_birth"] == "name matches 'birth'"
    assert flagged["telephone"] == "name matches 'phone'"
    assert flagged["reset_token"] == "name matches 'token'"
    for innocent in ("zip_code", "description", "agent", "iban", "id"):
        assert innocent not in flagged


def test_personal_fields__file_and_image_fields_by_isinstance():
    flagged = _flagged(_names())

    assert flagged["picture"] == "image file (_AvatarField)"
    assert flagged["scan"] == "file (FileField)"


def test_personal_fields__a_host_adds_words_through_the_setting(settings):
    settings.RETENTION_PERSONAL_FIELD_NAMES = ["iban", "tax id"]
    taxed = _model("DataMapTaxed", taxId=models.CharField(max_length=10))

    assert _flagged(_names())["iban"] == "name matches 'iban'"
    assert _flagged(taxed) == {"taxId": "name matches 'tax id'"}


def test_personal_fields__the_setting_takes_the_environments_comma_separated_form(settings):
    settings.RETENTION_PERSONAL_FIELD_NAMES = " iban, ,passport "

    assert _flagged(_names())["iban"] == "name matches 'iban'"
