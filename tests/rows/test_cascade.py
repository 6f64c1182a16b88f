"""The cascade of a model-row class: from the model graph, checked against the collector."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models.deletion import Collector
from django.test.utils import isolate_apps

from retention.models import Policy
from retention.rows.cascade import cascade_models, cascade_of, collected_models, outside_cascade
from tests.rowhost.models import Account, AccountNote, RequestLog, Tag, Ticket

ACCOUNT = ["rowhost.Account"]


class _Graph(models.Model):
    """A model of one test's own graph (under ``isolate_apps``): relations, no table."""

    class Meta:
        abstract = True
        app_label = "rowhost"

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.pk}"


def _on(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["model"], e.get("via") or e["field"]) for e in entries]


def test_cascade_of__account_deletes_notes_and_tag_links_nulls_tickets_and_is_blocked_by_invoices():
    cascade = cascade_of(Account)

    assert cascade == {
        "model": "rowhost.Account",
        "deletes": [
            {"model": "rowhost.AccountNote", "via": "account", "path": ACCOUNT, "kind": "cascade"},
            {"model": "rowhost.Account_tags", "via": "account", "path": ACCOUNT, "kind": "m2m"},
        ],
        "nulls": [
            {"model": "rowhost.Account", "field": "referrer", "path": ACCOUNT, "kind": "set_null"},
            {"model": "rowhost.Ticket", "field": "account", "path": ACCOUNT, "kind": "set_null"},
        ],
        "blocks": [
            {"model": "rowhost.Invoice", "field": "account", "path": ACCOUNT, "kind": "protect"},
        ],
        "other": [],
    }


def test_cascade_of__a_model_without_relations_touches_nothing_else():
    assert cascade_of(RequestLog) == {
        "model": "rowhost.RequestLog",
        "deletes": [],
        "nulls": [],
        "blocks": [],
        "other": [],
    }


def test_cascade_of__follows_a_cascade_into_the_related_models_relations():
    cascade = cascade_of(ContentType)

    permission_links = [e for e in cascade["deletes"] if e["via"] == "permission"]
    assert {e["model"] for e in permission_links} == {
        "auth.Group_permissions",
        "auth.User_user_permissions",
    }
    assert {tuple(e["path"]) for e in permission_links} == {
        ("contenttypes.ContentType", "auth.Permission")
    }
    assert ("admin.LogEntry", "content_type") in _on(cascade["nulls"])


def test_cascade_of__is_json_and_the_same_each_time():
    cascade = cascade_of(Account)

    assert json.loads(json.dumps(cascade)) == cascade
    assert cascade_of(Account) == cascade


@isolate_apps("tests.rowhost")
def test_cascade_of__a_cycle_of_cascades_ends():
    class Node(_Graph):
        parent = models.ForeignKey("self", null=True, on_delete=models.CASCADE)

    class Leaf(_Graph):
        node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
        back = models.ForeignKey("Back", null=True, on_delete=models.SET_NULL)

    class Back(_Graph):
        leaf = models.ForeignKey(Leaf, on_delete=models.CASCADE, related_name="+")

    cascade = cascade_of(Node)

    assert _on(cascade["deletes"]) == [
        ("rowhost.Back", "leaf"),
        ("rowhost.Leaf", "node"),
        ("rowhost.Node", "parent"),
    ]
    assert cascade["deletes"][0]["path"] == ["rowhost.Node", "rowhost.Leaf"]
    assert _on(cascade["nulls"]) == [("rowhost.Leaf", "back")]


@isolate_apps("tests.rowhost")
def test_cascade_of__other_handlers_are_labelled_by_kind():
    class Owner(_Graph):
        pass

    def keep(collector: Any, field: Any, sub_objs: Any, using: Any) -> None:
        pass

    class Related(_Graph):
        restricted = models.ForeignKey(Owner, on_delete=models.RESTRICT, related_name="+")
        defaulted = models.ForeignKey(
            Owner, null=True, default=None, on_delete=models.SET_DEFAULT, related_name="+"
        )
        set_to = models.ForeignKey(Owner, null=True, on_delete=models.SET(None), related_name="+")
        ignored = models.ForeignKey(Owner, on_delete=models.DO_NOTHING, related_name="+")
        custom = models.ForeignKey(Owner, on_delete=keep, related_name="+")

    cascade = cascade_of(Owner)

    assert {e["field"]: e["kind"] for e in cascade["other"]} == {
        "custom": "custom",
        "defaulted": "set_default",
        "ignored": "do_nothing",
        "restricted": "restrict",
        "set_to": "set",
    }
    assert cascade_models(cascade) == {"rowhost.Owner", "rowhost.Related"}


@isolate_apps("tests.rowhost")
def test_cascade_of__a_child_row_deletes_its_parent_row_and_generic_relations():
    class Comment(_Graph):
        content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE, related_name="+")
        object_id = models.PositiveIntegerField()
        target = GenericForeignKey("content_type", "object_id")

    class Place(_Graph):
        comments = GenericRelation(Comment)

    class Restaurant(Place):
        class Meta:
            app_label = "rowhost"

    class Review(_Graph):
        place = models.ForeignKey(Place, on_delete=models.CASCADE, related_name="+")

    cascade = cascade_of(Restaurant)

    assert [(e["model"], e["via"], e["kind"]) for e in cascade["deletes"]] == [
        ("rowhost.Comment", "comments", "generic"),
        ("rowhost.Place", "place_ptr", "parent"),
        ("rowhost.Review", "place", "cascade"),
    ]
    assert ("rowhost.Restaurant", "place_ptr") in _on(cascade_of(Place)["deletes"])


def test_cascade_models__the_model_and_what_it_deletes_or_nulls_not_what_blocks_it():
    assert cascade_models(cascade_of(Account)) == {
        "rowhost.Account",
        "rowhost.AccountNote",
        "rowhost.Account_tags",
        "rowhost.Ticket",
    }


def test_cascade_models__an_empty_cascade_allows_nothing():
    assert cascade_models({}) == set()


def _account(n: int, **fields: Any) -> Account:
    return Account.objects.create(
        tenant_id="t1",
        name=f"account {n}",
        email=f"a{n}@example.com",
        closed_at=datetime(2020, 1, 1, tzinfo=UTC),
        **fields,
    )


def _collector_over_accounts() -> Collector:
    first = _account(1)
    second = _account(2, referrer=first)
    first.tags.add(Tag.objects.create(name="vip"))
    AccountNote.objects.create(account=first, text="called")
    Ticket.objects.create(account=second, subject="help")
    collector = Collector(using="default", origin=Account)
    collector.collect(Account.objects.filter(pk__in=[first.pk, second.pk]))
    return collector


@pytest.mark.django_db
def test_collected_models__a_collector_over_real_accounts_agrees_with_the_cascade():
    collector = _collector_over_accounts()

    assert collected_models(collector) == cascade_models(cascade_of(Account))
    assert outside_cascade(cascade_of(Account), collector) == set()


@pytest.mark.django_db
def test_collected_models__a_table_without_relations_is_one_fast_delete():
    RequestLog.objects.create(tenant_id="t1", path="/", created_at=datetime(2020, 1, 1, tzinfo=UTC))
    collector = Collector(using="default", origin=RequestLog)
    collector.collect(RequestLog.objects.all())

    assert collected_models(collector) == {"rowhost.RequestLog"}
    assert outside_cascade(cascade_of(RequestLog), collector) == set()


@pytest.mark.django_db
def test_outside_cascade__names_a_relation_the_approved_cascade_did_not_have():
    approved = cascade_of(Account)
    approved["deletes"] = [e for e in approved["deletes"] if e["model"] != "rowhost.AccountNote"]

    assert outside_cascade(approved, _collector_over_accounts()) == {"rowhost.AccountNote"}


@pytest.mark.django_db
def test_outside_cascade__without_an_approved_cascade_every_model_is_outside():
    assert outside_cascade({}, _collector_over_accounts()) == cascade_models(cascade_of(Account))


# At approval


@pytest.mark.django_db
def test_approve__stores_the_cascade_of_a_model_row_class_on_the_version(make_policy, row_registry):
    row_registry.register_model(Account, data_class="crm.account", age_field="closed_at")

    version = make_policy("crm.account")

    assert version.cascade == cascade_of(Account)


@pytest.mark.django_db
def test_approve__a_class_of_tracked_objects_has_no_cascade(make_policy):
    assert make_policy("idv.photo").cascade is None


@pytest.mark.django_db
def test_approve__a_new_version_ends_a_stop_for_review(make_policy, row_registry, now):
    row_registry.register_model(Account, data_class="crm.account", age_field="closed_at")
    make_policy("crm.account")
    Policy.objects.filter(data_class="crm.account").update(
        review_reason="deleting rows would also touch rowhost.Audit", review_since=now
    )

    make_policy("crm.account", timedelta(days=60), at=now)

    policy = Policy.objects.get(data_class="crm.account")
    assert policy.review_reason == ""
    assert policy.review_since is None
