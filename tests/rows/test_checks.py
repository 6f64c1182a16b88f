"""One test per system check id of registered model rows (retention.E016-E024, W004)."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.core import checks
from django.db import models
from django.test.utils import isolate_apps

from retention.redaction import Constant, Digest, Empty, JsonDrop, Mask, Null
from retention.rows.checks import check_row_classes
from tests.rowhost.models import Account, RequestLog, Shipment


def messages(data_class: str) -> list[checks.CheckMessage]:
    return [m for m in check_row_classes() if repr(data_class) in m.msg]


def ids(data_class: str) -> list[str]:
    return [m.id for m in messages(data_class)]


def _accounts(row_registry: Any, **options: Any) -> None:
    """rowhost.Account as "crm.accounts", closed accounts, with ``options``."""
    row_registry.register_model(
        Account, data_class="crm.accounts", age_field="closed_at", **options
    )


def lowercase(value: str) -> str:
    return value.lower()


# Good registrations


def test_checks__a_good_registration_of_every_kind_gives_no_message(row_registry):
    row_registry.register_model(
        RequestLog,
        data_class="logs.requests",
        age_field="created_at",
        tenant_field="tenant_id",
        redact={
            "path": Mask(keep_last=4),
            "payload": JsonDrop(["contact.email", "headers.authorization"]),
            "status": Constant(0),
        },
        evidence="per_batch",
    )
    _accounts(
        row_registry,
        tenant_field="referrer__tenant_id",
        redact={
            "email": Digest(),
            "name": Constant("redacted"),
            "phone": Empty(),
            "nickname": Null(),
            "profile": Empty(),
            "avatar": Empty(),
            "referrer": Null(),
            "tenant_id": lowercase,
        },
        files=("avatar",),
    )
    row_registry.register_model(
        Shipment,
        data_class="ops.shipments",
        expires_field="expires_at",
        tenant_field="tenant_id",
        files=["proof"],
    )
    row_registry.register_model(Shipment, data_class="ops.deliveries", age_field="delivered_at")

    assert check_row_classes() == []


def test_checks__are_registered_with_the_app(row_registry):
    row_registry.register_model(Account, data_class="crm.accounts", age_field="name")

    found = checks.run_checks(tags=["retention"])

    assert "retention.E017" in [m.id for m in found if "'crm.accounts'" in m.msg]


def test_checks__only_the_apps_asked_for_are_checked(row_registry):
    row_registry.register_model(Account, data_class="crm.accounts", age_field="name")

    assert check_row_classes(app_configs=[apps.get_app_config("retention")]) == []
    assert check_row_classes(app_configs=[apps.get_app_config("rowhost")]) != []


# E016: a field that is not a column of the model


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"age_field": "opened_at"}, "'opened_at'"),
        ({"expires_field": "expiry"}, "'expiry'"),
        ({"age_field": "closed_at", "redact": {"surname": Null()}}, "'surname'"),
        ({"age_field": "closed_at", "redact": {"notes": Null()}}, "'notes'"),
        ({"age_field": "closed_at", "files": ("photo",)}, "'photo'"),
        ({"age_field": "closed_at", "tenant_field": "tenant"}, "'tenant'"),
        ({"age_field": "closed_at", "tenant_field": "referrer__tenant"}, "'tenant'"),
        ({"age_field": "closed_at", "tenant_field": "name__tenant_id"}, "'name'"),
        ({"age_field": "closed_at", "tenant_field": "manager__tenant_id"}, "'manager'"),
        ({"age_field": "closed_at", "tenant_field": "referrer__tags"}, "'tags'"),
    ],
)
def test_check_e016__an_unknown_field(row_registry, options, named):
    row_registry.register_model(Account, data_class="crm.accounts", **options)

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.E016"]
    assert "rowhost.Account" in found[0].msg
    assert named in found[0].msg


def test_check_e016__a_tenant_path_through_relations_passes(row_registry):
    _accounts(row_registry, tenant_field="referrer__referrer__tenant_id")

    assert ids("crm.accounts") == []


# E017: the age or expiry column is not a date


def test_check_e017__an_age_field_that_is_not_a_date(row_registry):
    row_registry.register_model(Account, data_class="crm.accounts", age_field="name")
    row_registry.register_model(RequestLog, data_class="logs.requests", expires_field="status")

    assert ids("crm.accounts") == ["retention.E017"]
    assert ids("logs.requests") == ["retention.E017"]
    assert "'name' is a CharField" in messages("crm.accounts")[0].msg
    assert "rowhost.RequestLog" in messages("logs.requests")[0].msg


# E018: Null() on a NOT NULL column


def test_check_e018__null_on_a_column_that_is_not_nullable(row_registry):
    _accounts(row_registry, redact={"name": Null()})
    row_registry.register_model(
        Account, data_class="crm.nicknames", age_field="closed_at", redact={"nickname": Null()}
    )

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.E018"]
    assert "rowhost.Account" in found[0].msg
    assert "'name'" in found[0].msg
    assert ids("crm.nicknames") == []


# E019: a strategy that makes distinct rows equal, on a unique column


@pytest.mark.parametrize("strategy", [Constant("gone@example.invalid"), Mask(keep_last=4), Empty()])
def test_check_e019__a_strategy_that_is_not_unique_safe_on_a_unique_column(row_registry, strategy):
    _accounts(row_registry, redact={"email": strategy})

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.E019"]
    assert "'email' is unique" in found[0].msg
    assert "rowhost.Account" in found[0].msg


def test_check_e019__a_callable_on_a_unique_column_unless_it_says_it_is_safe(row_registry):
    def pseudonym(value: str) -> str:
        return f"user-{value.__hash__()}@example.invalid"

    _accounts(row_registry, redact={"email": pseudonym})
    assert ids("crm.accounts") == ["retention.E019"]

    pseudonym.unique_safe = True  # type: ignore[attr-defined]
    assert ids("crm.accounts") == []


@isolate_apps("tests.rowhost")
def test_check_e019__a_one_column_unique_constraint_counts(row_registry):
    class Member(models.Model):
        handle = models.CharField(max_length=30)
        team = models.CharField(max_length=30)
        nick = models.CharField(max_length=30)
        joined_at = models.DateTimeField(db_index=True)

        class Meta:
            app_label = "rowhost"
            constraints = [
                models.UniqueConstraint(fields=["handle"], name="one_handle"),
                models.UniqueConstraint(fields=["team", "nick"], name="one_nick_per_team"),
            ]

        def __str__(self) -> str:
            return f"member {self.pk}"

    row_registry.register_model(
        Member, data_class="crm.members", age_field="joined_at", redact={"handle": Empty()}
    )
    row_registry.register_model(
        Member, data_class="crm.nicks", age_field="joined_at", redact={"nick": Empty()}
    )
    row_registry.register_model(
        Member, data_class="crm.handles", age_field="joined_at", redact={"handle": Digest()}
    )

    assert ids("crm.members") == ["retention.E019"]
    assert ids("crm.nicks") == []  # only a one-column constraint is checked
    assert ids("crm.handles") == []


# E020: a strategy on a many-to-many field


def test_check_e020__any_strategy_on_a_many_to_many_field(row_registry):
    _accounts(row_registry, redact={"tags": Null()})

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.E020"]
    assert "'tags' is a many-to-many field" in found[0].msg
    assert "rowhost.Account" in found[0].msg


# E021: a relation or a file given a strategy not meant for it


@pytest.mark.parametrize(
    ("name", "strategy", "meant"),
    [
        ("referrer", Constant(1), "takes only Null()"),
        ("referrer", lowercase, "takes only Null()"),
        ("avatar", Digest(), "takes only Null() or Empty()"),
        ("avatar", Constant("avatars/blank.png"), "takes only Null() or Empty()"),
    ],
)
def test_check_e021__a_foreign_key_or_file_given_a_strategy_not_meant_for_it(
    row_registry, name, strategy, meant
):
    _accounts(row_registry, redact={name: strategy})

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.E021"]
    assert f"redact[{name!r}]" in found[0].msg
    assert "rowhost.Account" in found[0].msg
    assert meant in found[0].hint


def test_check_e021__null_on_a_nullable_foreign_key_and_empty_on_a_file_pass(row_registry):
    _accounts(row_registry, redact={"referrer": Null(), "avatar": Empty()})

    assert ids("crm.accounts") == []


# E022: files names a field that is not a FileField


def test_check_e022__a_files_entry_that_is_not_a_file_field(row_registry):
    _accounts(row_registry, files=("avatar", "name"))

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.E022"]
    assert "'name', a CharField" in found[0].msg
    assert "rowhost.Account" in found[0].msg


# E023: a data class name the policies would refuse


@pytest.mark.parametrize("name", ["CRM Accounts", "crm/accounts", ".crm", ""])
def test_check_e023__a_data_class_name_that_is_refused(row_registry, name):
    row_registry.register_model(Account, data_class=name, age_field="closed_at")

    found = messages(name)

    assert [m.id for m in found] == ["retention.E023"]
    assert "rowhost.Account" in found[0].msg


# E024: a strategy the column cannot take otherwise


@pytest.mark.parametrize(
    ("name", "strategy", "says"),
    [
        ("closed_at", Empty(), "no empty value"),
        ("phone", JsonDrop(["a"]), "for JSON fields"),
        ("profile", Mask(), "for text fields"),
        ("phone", Mask(keep_last=-2), "must not be negative"),
        ("name", Constant("x" * 101), "at most 100"),
        ("name", "null", "is not a strategy"),
    ],
)
def test_check_e024__a_strategy_the_column_cannot_take(row_registry, name, strategy, says):
    _accounts(row_registry, redact={name: strategy})

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.E024"]
    assert says in found[0].msg
    assert f"redact[{name!r}]" in found[0].msg
    assert "rowhost.Account" in found[0].msg


def test_check_e024__each_field_is_reported_at_once(row_registry):
    _accounts(
        row_registry,
        redact={"closed_at": Empty(), "profile": Mask(), "tags": Null(), "name": Null()},
    )

    assert sorted(ids("crm.accounts")) == [
        "retention.E018",
        "retention.E020",
        "retention.E024",
        "retention.E024",
    ]


# W004: the age or expiry column has no index


def test_check_w004__an_age_field_without_an_index(row_registry):
    row_registry.register_model(Account, data_class="crm.accounts", age_field="last_seen_at")

    found = messages("crm.accounts")

    assert [m.id for m in found] == ["retention.W004"]
    assert isinstance(found[0], checks.Warning)
    assert "rowhost.Account" in found[0].msg
    assert "'last_seen_at' has no index" in found[0].msg
    assert "Add db_index=True to rowhost.Account.last_seen_at and run makemigrations" in (
        found[0].hint
    )
    assert (
        'migrations.AddIndex(model_name="account", index=models.Index('
        'fields=["last_seen_at", "id"], name="rowhost_acc_last_se_42cf67_idx"))'
    ) in found[0].hint
    assert (
        'put retention.migration_ops.AddIndexOnModel("rowhost", "account", '
        'fields=["last_seen_at", "id"], name="rowhost_acc_last_se_42cf67_idx") in a migration'
    ) in found[0].hint


@isolate_apps("tests.rowhost")
def test_check_w004__an_index_or_unique_constraint_led_by_the_field_passes(row_registry):
    class Event(models.Model):
        kind = models.CharField(max_length=20)
        at = models.DateTimeField()
        until = models.DateTimeField()
        seen = models.DateTimeField()
        day = models.DateField(db_index=True)

        class Meta:
            app_label = "rowhost"
            indexes = [
                models.Index(fields=["-at", "id"], name="event_at"),
                models.Index(fields=["kind", "seen"], name="event_kind_seen"),
            ]
            constraints = [models.UniqueConstraint(fields=["until", "kind"], name="one_until")]

        def __str__(self) -> str:
            return f"event {self.pk}"

    row_registry.register_model(Event, data_class="ev.by-age", age_field="at")
    row_registry.register_model(Event, data_class="ev.by-expiry", expires_field="until")
    row_registry.register_model(Event, data_class="ev.by-seen", age_field="seen")
    row_registry.register_model(Event, data_class="ev.by-day", age_field="day")

    assert ids("ev.by-age") == []
    assert ids("ev.by-expiry") == []
    assert ids("ev.by-seen") == ["retention.W004"]  # seen is not the index's first column
    assert ids("ev.by-day") == []  # a DateField is a date too (E017)


# W004 and models of other apps (issue 25): satisfiable from the host's own app


def _w004(data_class: str, **kwargs: object) -> list[checks.CheckMessage]:
    return [
        m
        for m in check_row_classes(**kwargs)
        if m.id == "retention.W004" and repr(data_class) in m.msg
    ]


def test_check_w004__a_third_party_model_is_offered_an_operation_in_the_hosts_own_app(
    row_registry,
):
    from django_q.models import Failure, Success

    row_registry.register_model(Success, data_class="tasks.q_success", age_field="stopped")
    row_registry.register_model(Failure, data_class="tasks.q_failure", age_field="stopped")

    success, failure = _w004("tasks.q_success"), _w004("tasks.q_failure")

    assert len(success) == len(failure) == 1
    hint = success[0].hint
    assert "installed app 'django_q'" in hint
    assert "do not edit it or add a migration to it" in hint
    assert "migrations.AddIndex(" not in hint and "db_index=True" not in hint
    assert (
        'retention.migration_ops.AddIndexOnModel("django_q", "task", '
        'fields=["stopped", "id"], name="django_q_ta_stopped_'
    ) in hint
    assert "atomic = False" in hint
    # The two proxies share one table: one index, the same one, serves both.
    name = hint.split('name="')[1].split('"')[0]
    assert f'name="{name}"' in failure[0].hint
    assert "it also serves 'tasks.q_failure'" in hint
    assert "it also serves 'tasks.q_success'" in failure[0].hint
    assert "django_q_task" in success[0].msg


def test_check_w004__djangos_own_apps_count_as_installed_packages(row_registry):
    from django.contrib.sessions.models import Session

    row_registry.register_model(Session, data_class="web.sessions", expires_field="expire_date")

    # Session.expire_date has db_index=True: nothing to say.
    assert _w004("web.sessions") == []

    from django.contrib.admin.models import LogEntry

    row_registry.register_model(LogEntry, data_class="admin.log", age_field="action_time")

    [found] = _w004("admin.log")
    assert "installed app 'admin'" in found.hint
    assert 'AddIndexOnModel("admin", "logentry", fields=["action_time", "id"]' in found.hint


def test_check_w004__a_class_accepted_with_a_reason_is_silent(row_registry, settings):
    row_registry.register_model(Account, data_class="crm.accounts", age_field="last_seen_at")
    assert 'RETENTION_ACCEPT_UNINDEXED = {"crm.accounts": "<reason>"}' in (
        _w004("crm.accounts")[0].hint
    )

    settings.RETENTION_ACCEPT_UNINDEXED = {"crm.accounts": ""}
    assert len(_w004("crm.accounts")) == 1  # a reason is required

    settings.RETENTION_ACCEPT_UNINDEXED = {"crm.other": "small table"}
    assert len(_w004("crm.accounts")) == 1  # another class's reason is not this one's

    settings.RETENTION_ACCEPT_UNINDEXED = {"crm.accounts": "under 5,000 rows, ever"}
    assert _w004("crm.accounts") == []


@pytest.mark.django_db
def test_check_w004__a_real_index_of_the_database_led_by_the_column_passes(row_registry):
    from django.db import connection
    from django_q.models import Success, Task

    row_registry.register_model(Success, data_class="tasks.q_success", age_field="stopped")
    quote = connection.ops.quote_name
    table = quote(Task._meta.db_table)

    assert len(_w004("tasks.q_success", databases=["default"])) == 1
    with connection.cursor() as cursor:
        # An index that merely contains the column does not lead with it.
        cursor.execute(f"CREATE INDEX h5_name_stopped ON {table} (name, stopped)")
    assert len(_w004("tasks.q_success", databases=["default"])) == 1
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE INDEX h5_stopped_func ON {table} (stopped, func)")

    assert _w004("tasks.q_success", databases=["default"]) == []
    # Without databases (a plain `manage.py check`) nothing is asked.
    assert len(_w004("tasks.q_success")) == 1


def test_check_w004__an_unreachable_database_is_passed_over(row_registry, monkeypatch):
    from django.db import DatabaseError, connections
    from django_q.models import Success

    row_registry.register_model(Success, data_class="tasks.q_success", age_field="stopped")

    def refuse() -> None:
        raise DatabaseError("connection refused")

    monkeypatch.setattr(connections["default"], "cursor", refuse)

    assert len(_w004("tasks.q_success", databases=["default"])) == 1


def test_check_w004__an_add_index_on_model_in_the_migrations_satisfies_it(row_registry, settings):
    from django_q.models import Success

    from retention.rows import checks as row_checks

    row_registry.register_model(Success, data_class="tasks.q_success", age_field="stopped")
    assert len(_w004("tasks.q_success")) == 1

    settings.MIGRATION_MODULES = {"rowhost": "tests.rows.index_migrations"}
    try:
        assert _w004("tasks.q_success") == []
    finally:
        row_checks._planned_indexes_in.cache_clear()
