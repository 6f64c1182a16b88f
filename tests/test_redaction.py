"""The field strategies of the redact disposition: each result, and each column it refuses."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from retention import redaction
from retention.redaction import Constant, Digest, Empty, JsonDrop, Mask, Null, Strategy
from tests.rowhost.models import Account, Invoice, RequestLog, Shipment

KEY = "a-long-random-digest-key"


def field(model: type[models.Model], name: str) -> models.Field:
    return model._meta.get_field(name)


@pytest.fixture
def digest_key(settings):
    settings.RETENTION_DIGEST_KEY = KEY
    return settings


# --------------------------------------------------------------------------
# Results


def test_null__gives_none():
    assert redaction.apply(Null(), "Ada", field(Account, "nickname")) is None


@pytest.mark.parametrize(
    ("model", "name", "value", "expected"),
    [
        (Account, "name", "Ada Lovelace", ""),
        (Account, "email", "ada@example.com", ""),
        (Account, "avatar", "avatars/ada.png", ""),
        (Account, "profile", {"contact": {"email": "a@x"}}, {}),
        (Account, "profile", [1, 2], []),
        (Account, "profile", None, {}),
    ],
)
def test_empty__gives_the_empty_value_of_the_column(model, name, value, expected):
    assert redaction.apply(Empty(), value, field(model, name)) == expected


def test_empty__a_json_field_defaulting_to_a_list_empties_a_null_to_a_list():
    tags = models.JSONField(default=list, null=True)

    assert redaction.apply(Empty(), None, tags) == []


def test_empty__on_text_field():
    assert redaction.apply(Empty(), "some note", models.TextField()) == ""


def test_constant__gives_its_value_whatever_the_old_one():
    strategy = Constant("redacted")

    assert redaction.apply(strategy, "Ada", field(Account, "name")) == "redacted"
    assert redaction.apply(strategy, None, field(Account, "name")) == "redacted"


def test_digest__is_the_hmac_sha256_of_the_value_under_the_digest_key(digest_key):
    expected = hmac.new(KEY.encode(), b"+44 20 7946 0000", hashlib.sha256).hexdigest()

    result = redaction.apply(Digest(), "+44 20 7946 0000", models.TextField())

    assert result == expected
    assert len(result) == 64


def test_digest__is_cut_to_the_columns_max_length(digest_key):
    phone = field(Account, "phone")  # max_length=30
    full = hmac.new(KEY.encode(), b"+44 20 7946 0000", hashlib.sha256).hexdigest()

    assert redaction.apply(Digest(), "+44 20 7946 0000", phone) == full[:30]


def test_digest__same_input_and_key_give_the_same_digest(digest_key):
    email = field(Account, "email")

    assert redaction.apply(Digest(), "ada@example.com", email) == redaction.apply(
        Digest(), "ada@example.com", email
    )
    assert redaction.apply(Digest(), "ada@example.com", email) != redaction.apply(
        Digest(), "bob@example.com", email
    )


def test_digest__another_key_gives_another_digest(settings):
    email = field(Account, "email")
    settings.RETENTION_DIGEST_KEY = KEY
    first = redaction.apply(Digest(), "ada@example.com", email)
    settings.RETENTION_DIGEST_KEY = KEY + "-rotated"

    assert redaction.apply(Digest(), "ada@example.com", email) != first


def test_digest__keeps_a_null_null(digest_key):
    assert redaction.apply(Digest(), None, field(Account, "nickname")) is None


def test_digest__without_a_digest_key_refuses_to_run(settings):
    settings.RETENTION_DIGEST_KEY = ""

    with pytest.raises(ImproperlyConfigured, match="RETENTION_DIGEST_KEY"):
        redaction.apply(Digest(), "ada@example.com", field(Account, "email"))


@pytest.mark.parametrize(
    ("strategy", "value", "expected"),
    [
        (Mask(keep_last=4), "4111111111111111", "************1111"),
        (Mask(), "secret", "******"),
        (Mask(keep_last=2, char="#"), "abcdef", "####ef"),
        (Mask(keep_last=4), "abcd", "****"),  # keeping all would hide nothing
        (Mask(keep_last=4), "ab", "**"),
        (Mask(keep_last=4), "", ""),
        (Mask(keep_last=4), None, None),
    ],
)
def test_mask__hides_all_but_the_last_characters(strategy, value, expected):
    assert redaction.apply(strategy, value, field(Account, "phone")) == expected


def test_json_drop__drops_top_level_and_nested_keys():
    profile = {"contact": {"email": "a@x", "city": "London"}, "ssn": "123", "plan": "pro"}

    result = redaction.apply(JsonDrop(["contact.email", "ssn"]), profile, field(Account, "profile"))

    assert result == {"contact": {"city": "London"}, "plan": "pro"}
    assert profile["contact"]["email"] == "a@x"  # the old value is not mutated


def test_json_drop__missing_paths_are_fine():
    profile = {"contact": "not a dict", "plan": "pro"}
    strategy = JsonDrop(["contact.email", "nowhere.deep.down", "absent"])

    assert redaction.apply(strategy, profile, field(Account, "profile")) == profile


def test_json_drop__walks_the_elements_of_a_list_on_the_way():
    payload = {"contacts": [{"email": "a@x", "name": "A"}, {"name": "B"}, "stray"]}

    result = redaction.apply(JsonDrop("contacts.email"), payload, field(RequestLog, "payload"))

    assert result == {"contacts": [{"name": "A"}, {"name": "B"}, "stray"]}


def test_json_drop__leaves_a_value_that_is_not_an_object_alone():
    assert redaction.apply(JsonDrop(["a"]), None, field(Account, "profile")) is None
    assert redaction.apply(JsonDrop(["a"]), "text", field(Account, "profile")) == "text"


def test_callable__is_a_strategy_of_its_own():
    def initials(value):
        return "".join(part[0] for part in value.split())

    assert redaction.apply(initials, "Ada King Lovelace", field(Account, "name")) == "AKL"
    assert redaction.problem(initials, field(Account, "name")) is None


def test_apply__refuses_what_is_not_a_strategy():
    with pytest.raises(TypeError):
        redaction.apply("null", "Ada", field(Account, "name"))


# --------------------------------------------------------------------------
# Unique safety and the one-UPDATE path


def test_unique_safe__digest_and_null_keep_distinct_values_distinct():
    assert Digest.unique_safe and Null.unique_safe
    assert not any(s.unique_safe for s in (Empty(), Constant("x"), Mask(), JsonDrop(["a"])))
    assert redaction.unique_safe(Digest()) and redaction.unique_safe(Null())
    assert not redaction.unique_safe(Constant("x"))


def test_unique_safe__a_callable_is_not_unless_it_says_so():
    def pseudonym(value):
        return f"user-{hash(value)}"

    assert not redaction.unique_safe(pseudonym)
    pseudonym.unique_safe = True
    assert redaction.unique_safe(pseudonym)


def test_sql_constant__null_and_constant_do_not_depend_on_the_old_value():
    assert redaction.sql_constant(Null()) == (True, None)
    assert redaction.sql_constant(Constant("redacted")) == (True, "redacted")


def test_sql_constant__empty_is_constant_on_text_and_file_columns():
    assert redaction.sql_constant(Empty(), field(Account, "name")) == (True, "")
    assert redaction.sql_constant(Empty(), field(Account, "avatar")) == (True, "")


def test_sql_constant__empty_on_json_or_without_a_field_follows_the_old_value():
    assert redaction.sql_constant(Empty(), field(Account, "profile")) == (False, None)
    assert redaction.sql_constant(Empty()) == (False, None)


def test_sql_constant__value_dependent_strategies_are_not_constant():
    for strategy in (Digest(), Mask(keep_last=4), JsonDrop(["a"]), str.upper):
        assert redaction.sql_constant(strategy) == (False, None)


# --------------------------------------------------------------------------
# Problems: what a column cannot take


@pytest.mark.parametrize(
    ("strategy", "model", "name"),
    [
        (Null(), Account, "nickname"),
        (Null(), Account, "referrer"),
        (Null(), Account, "closed_at"),
        (Empty(), Account, "name"),
        (Empty(), Account, "profile"),
        (Empty(), Account, "avatar"),
        (Empty(), Shipment, "proof"),
        (Constant("redacted"), Account, "name"),
        (Constant(0), RequestLog, "status"),
        (Constant({}), Account, "profile"),
        (Digest(), Account, "email"),
        (Mask(keep_last=4), Account, "phone"),
        (JsonDrop(["contact.email"]), Account, "profile"),
        (str.upper, Account, "name"),
    ],
)
def test_problem__none_when_the_strategy_fits_the_column(strategy, model, name):
    assert redaction.problem(strategy, field(model, name)) is None


@pytest.mark.parametrize(
    ("strategy", "model", "name", "says"),
    [
        (Null(), Account, "name", "NOT NULL"),
        (Null(), RequestLog, "created_at", "NOT NULL"),
        (Empty(), RequestLog, "status", "no empty value"),
        (Empty(), RequestLog, "created_at", "no empty value"),
        (Mask(keep_last=4), RequestLog, "status", "for text fields"),
        (Mask(keep_last=4), Account, "profile", "for text fields"),
        (Digest(), RequestLog, "created_at", "for text fields"),
        (JsonDrop(["a"]), Account, "name", "for JSON fields"),
        (Constant("x" * 101), Account, "name", "at most 100"),
        (Constant("not a number"), RequestLog, "status", "not a value of the column"),
        (Constant(None), Account, "name", "NOT NULL"),
    ],
)
def test_problem__a_strategy_the_column_cannot_take(strategy, model, name, says):
    assert says in redaction.problem(strategy, field(model, name))


@pytest.mark.parametrize(
    "strategy", [Empty(), Constant(1), Digest(), Mask(), JsonDrop(["a"]), str.upper]
)
def test_problem__a_foreign_key_takes_only_null(strategy):
    assert "takes only Null()" in redaction.problem(strategy, field(Account, "referrer"))


def test_problem__null_on_a_non_nullable_foreign_key():
    assert "NOT NULL" in redaction.problem(Null(), field(Invoice, "account"))


@pytest.mark.parametrize("strategy", [Constant("x.png"), Digest(), Mask(), str.upper])
def test_problem__a_file_field_takes_only_empty_or_null(strategy):
    assert "takes only Empty() or Null()" in redaction.problem(strategy, field(Account, "avatar"))


def test_problem__null_on_a_non_nullable_file_field():
    assert "NOT NULL" in redaction.problem(Null(), field(Account, "avatar"))


@pytest.mark.parametrize("strategy", [Null(), Empty(), Constant(()), str.upper])
def test_problem__a_many_to_many_field_takes_no_strategy(strategy):
    assert "many-to-many" in redaction.problem(strategy, field(Account, "tags"))


def test_problem__a_reverse_relation_is_not_a_column():
    assert "not a column" in redaction.problem(Null(), field(Account, "notes"))


def test_problem__what_is_neither_a_strategy_nor_a_callable():
    assert "is not a strategy" in redaction.problem("null", field(Account, "name"))


@pytest.mark.parametrize(
    ("strategy", "says"),
    [
        (Mask(keep_last=-1), "must not be negative"),
        (Mask(keep_last=True), "whole number"),
        (Mask(char="**"), "one character"),
        (Mask(char=""), "one character"),
        (JsonDrop([]), "names no path"),
        (JsonDrop(["contact..email"]), "not a dotted path"),
        (JsonDrop([""]), "not a dotted path"),
    ],
)
def test_problem__a_strategy_built_wrong(strategy, says):
    column = field(Account, "profile") if isinstance(strategy, JsonDrop) else models.TextField()

    assert says in redaction.problem(strategy, column)


def test_strategy__the_base_class_needs_a_subclass():
    assert Strategy().problem(models.TextField()) is None
    with pytest.raises(NotImplementedError):
        Strategy().redact("x", models.TextField())


def test_strategies__are_values_with_a_readable_repr():
    assert Mask(keep_last=4) == Mask(keep_last=4)
    assert repr(Mask(keep_last=4)) == "Mask(keep_last=4, char='*')"
    assert repr(JsonDrop("a.b")) == "JsonDrop(paths=('a.b',))"
    assert repr(Constant("redacted")) == "Constant(value='redacted')"
