"""What deleting one row of a registered model also deletes, nulls or is blocked by.

The approver of a version of a model-row class is shown this set, computed
from Django's model graph, and it is stored on the approved version. The
engine then compares every page's deletion ``Collector`` with the stored set:
a page that would touch another model (a relation the host added after the
approval) rolls back and the class stops for review, so no delete reaches
further than what someone approved.

The walk follows the relations Django's collector follows (reverse
one-to-one and many-to-one relations, including hidden ones and the
auto-created through models of many-to-many fields; multi-table parents;
generic relations), so the two agree. Models are named by the label of their
concrete model: a proxy's rows are its concrete model's rows.

A leaf module: it imports nothing of ``retention``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from django.db import models
from django.db.models import deletion
from django.db.models.deletion import Collector
from django.db.models.fields.related import ForeignObjectRel

# Where each ``on_delete`` puts the related model. Database-level variants
# (Django 6.1) are not collected by Django, but the database does the same.
_KINDS: dict[Any, tuple[str, str]] = {
    deletion.CASCADE: ("deletes", "cascade"),
    deletion.SET_NULL: ("nulls", "set_null"),
    deletion.PROTECT: ("blocks", "protect"),
    deletion.RESTRICT: ("other", "restrict"),
    deletion.SET_DEFAULT: ("other", "set_default"),
    deletion.DO_NOTHING: ("other", "do_nothing"),
}
for _name, _bucket in (
    ("DB_CASCADE", "deletes"),
    ("DB_SET_NULL", "nulls"),
    ("DB_SET_DEFAULT", "other"),
):
    if hasattr(deletion, _name):
        _KINDS[getattr(deletion, _name)] = (_bucket, _name.lower())

# Kinds of "other" the collector turns into updates: shown at approval, so allowed.
UPDATE_KINDS = frozenset({"set", "set_default", "custom"})
BUCKETS = ("deletes", "nulls", "blocks", "other")


def label(model: type[models.Model]) -> str:
    """``app_label.ModelName`` of the model's concrete model."""
    return str(model._meta.concrete_model._meta.label)  # type: ignore[union-attr]


def _classify(on_delete: Any) -> tuple[str, str]:
    try:
        known = _KINDS.get(on_delete)
    except TypeError:  # an unhashable callable
        known = None
    if known is not None:
        return known
    deconstruct = getattr(on_delete, "deconstruct", None)
    if callable(deconstruct) and deconstruct()[0] == "django.db.models.SET":
        return "other", "set"
    return "other", "custom"


def _relations(model: type[models.Model]) -> list[ForeignObjectRel]:
    # Django's own choice of candidates (hidden relations included), so the
    # walk and the collector never disagree about what a delete visits.
    candidates: Iterable[Any] = deletion.get_candidate_relations_to_delete(model._meta)
    return [rel for rel in candidates if isinstance(rel, ForeignObjectRel)]


def _parents(model: type[models.Model]) -> list[tuple[type[models.Model], str]]:
    """Every multi-table ancestor with the pointer that reaches it, nearest first."""
    found: list[tuple[type[models.Model], str]] = []
    todo = [model._meta.concrete_model]
    while todo:
        current = todo.pop(0)
        assert current is not None
        for parent, ptr in current._meta.parents.items():
            if ptr is not None:
                found.append((parent, ptr.name))
                todo.append(parent)
    return found


def cascade_of(model: type[models.Model]) -> dict[str, Any]:
    """The cascade of deleting one row of ``model``, as JSON-able, sorted lists.

    ``deletes``: ``{"model", "via", "path", "kind"}`` (kind ``cascade``,
    ``m2m`` for an auto-created through model, ``parent``, ``generic`` or
    ``db_cascade``); ``nulls`` and ``blocks``: ``{"model", "field", "path",
    "kind"}``; ``other``: the same for RESTRICT, SET_DEFAULT, SET(),
    DO_NOTHING and custom handlers, labelled by kind. ``path`` is the chain
    of deleted models from ``model`` to the one the relation points at.
    """
    root = model._meta.concrete_model
    assert root is not None
    found: dict[str, dict[tuple[str, str], dict[str, Any]]] = {b: {} for b in BUCKETS}
    # A model deleted as someone's parent has not had its own relations walked.
    walked: dict[type[models.Model], bool] = {root: True}
    todo: deque[tuple[type[models.Model], list[str]]] = deque([(root, [label(root)])])

    def delete(target: type[models.Model], via: str, path: list[str], kind: str) -> None:
        concrete = target._meta.concrete_model
        assert concrete is not None
        found["deletes"].setdefault(
            (label(concrete), via),
            {"model": label(concrete), "via": via, "path": list(path), "kind": kind},
        )
        if not walked.get(concrete, False):
            walked[concrete] = True
            todo.append((concrete, [*path, label(concrete)]))

    while todo:
        current, path = todo.popleft()
        for parent, ptr in _parents(current):
            key = (label(parent), ptr)
            found["deletes"].setdefault(
                key, {"model": label(parent), "via": ptr, "path": list(path), "kind": "parent"}
            )
            walked.setdefault(parent, False)
        for rel in _relations(current):
            field = rel.field
            related = rel.related_model
            assert isinstance(related, type)
            if field.remote_field.parent_link and related._meta.concrete_model is current:
                continue  # the row's own parent pointer, seen from its parent
            bucket, kind = _classify(field.remote_field.on_delete)
            if bucket == "deletes":
                through = related._meta.auto_created and kind == "cascade"
                delete(related, field.name, path, "m2m" if through else kind)
                continue
            entry = {"model": label(related), "field": field.name, "path": list(path), "kind": kind}
            found[bucket].setdefault((label(related), field.name), entry)
        for private in current._meta.private_fields:
            if hasattr(private, "bulk_related_objects"):
                delete(private.related_model, private.name, path, "generic")

    lists = {bucket: [entries[key] for key in sorted(entries)] for bucket, entries in found.items()}
    return {"model": label(root), **lists}


def cascade_models(cascade: dict[str, Any]) -> set[str]:
    """The models a delete of the class may touch: itself, what it deletes, nulls or sets."""
    if not cascade:
        return set()
    allowed = {str(cascade["model"])}
    allowed.update(str(e["model"]) for e in cascade.get("deletes", ()))
    allowed.update(str(e["model"]) for e in cascade.get("nulls", ()))
    allowed.update(
        str(e["model"]) for e in cascade.get("other", ()) if e.get("kind") in UPDATE_KINDS
    )
    return allowed


def collected_models(collector: Collector) -> set[str]:
    """The models a collected (not yet run) ``Collector`` would delete from or update.

    Fast deletes and SET_NULL updates are querysets the collector has not
    evaluated; they count whether or not they match a row, since each one
    is a relation of the graph the approval is about.
    """
    touched = {label(model) for model, instances in collector.data.items() if instances}
    touched.update(label(qs.model) for qs in collector.fast_deletes)
    touched.update(
        label(field.model) for (field, _), objs in collector.field_updates.items() if objs
    )
    return touched


def outside_cascade(cascade: dict[str, Any], collector: Collector) -> set[str]:
    """The models ``collector`` would touch that the approved ``cascade`` does not name."""
    return collected_models(collector) - cascade_models(cascade)
