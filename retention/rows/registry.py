"""Host models registered as data classes (``retention.api.register_model``).

A registration is configuration, made in the host's ``AppConfig.ready()``:
it lives in this process's memory, like Django's own model registry. What
a policy version approves of it is stored with the version
(``retention.rows.registration``), so a code change that alters it stops
the class until a new version adopts it. What cannot work (an unknown field, a strategy a
column cannot take) is reported by the system checks of
``retention.rows.checks`` with stable ids, so ``manage.py check`` names
every problem at once instead of the first ``ready()`` that raised.

A leaf module: it imports no model, selector or service of ``retention``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from retention.rows.registration import unstable_scope

EVIDENCE_MODES = ("per_row", "per_batch")
Evidence = Literal["per_row", "per_batch"]
Scope = Callable[[models.QuerySet[Any]], models.QuerySet[Any]]


@dataclass(frozen=True, eq=False)
class RowClass:
    """One host model's rows as a data class."""

    model: type[models.Model]
    data_class: str
    age_field: str | None = None
    expires_field: str | None = None
    tenant_field: str | None = None
    scope: Scope | None = None
    redact: Mapping[str, Any] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    evidence: Evidence = "per_row"
    subject_field: str | None = None

    @property
    def label(self) -> str:
        """The model's label, ``app_label.ModelName``, as events name it."""
        return str(self.model._meta.label)

    @property
    def time_field(self) -> str:
        """The column pages are ordered and cut by: the age or the expiry."""
        return self.age_field or self.expires_field or ""

    @property
    def by_expiry(self) -> bool:
        """True when the host fills the deadline at write time (``expires_field``)."""
        return self.expires_field is not None

    def queryset(self) -> models.QuerySet[Any]:
        """Every row the class covers: what the model's default manager returns, then the scope.

        The default manager, not the base one: a proxy model (django-q2's
        ``Success`` and ``Failure`` share one table) or a model whose manager
        filters is governed by what that manager returns, so two classes on
        one table never touch each other's rows.
        """
        qs: models.QuerySet[Any] = self.model._default_manager.all()
        if self.scope is not None:
            qs = self.scope(qs)
        return qs


_registry: dict[str, RowClass] = {}


def register_model(
    model: type[models.Model],
    *,
    data_class: str,
    age_field: str | None = None,
    expires_field: str | None = None,
    tenant_field: str | None = None,
    scope: Scope | None = None,
    redact: Mapping[str, Any] | None = None,
    files: tuple[str, ...] | list[str] = (),
    evidence: Evidence = "per_row",
    subject_field: str | None = None,
) -> RowClass:
    """Govern a host model's rows as the data class ``data_class``; call it in ``ready()``.

    Rows come due by ``age_field`` (their own timestamp, against a run's
    cutoff) or ``expires_field`` (a deadline the host fills): exactly one.
    ``tenant_field`` (a column or a path such as ``"account__tenant_id"``)
    lets tenant holds and reports reach the rows; ``subject_field`` (a
    column or a path, e.g. ``"user"`` or ``"order__customer_id"``) names the
    value that identifies a row's data subject, for erasure requests;
    ``scope`` narrows the
    queryset; ``redact`` maps fields to ``retention.redaction`` strategies
    for the redact disposition; ``files`` names FileFields whose files go
    with the row. What cannot work is reported by ``manage.py check``.

    ``retention.api`` names this function itself rather than a wrapper.
    Calling it again for the same data class and model replaces the
    registration (``ready()`` may run more than once in tests); the same
    data class for another model is refused.
    """
    if not (isinstance(model, type) and issubclass(model, models.Model)):
        raise ImproperlyConfigured(f"register_model() needs a model class, not {model!r}.")
    if (age_field is None) == (expires_field is None):
        raise ImproperlyConfigured(
            f"register_model({model._meta.label}): give exactly one of age_field= "
            "(the row's own timestamp) or expires_field= (a deadline the host fills)."
        )
    if evidence not in EVIDENCE_MODES:
        raise ImproperlyConfigured(
            f"register_model({model._meta.label}): evidence must be one of "
            f"{', '.join(EVIDENCE_MODES)}, not {evidence!r}."
        )
    if scope is not None and not callable(scope):
        raise ImproperlyConfigured(
            f"register_model({model._meta.label}): scope must be a callable "
            "taking a queryset and returning one."
        )
    for option, path in (("tenant_field", tenant_field), ("subject_field", subject_field)):
        if path is not None and (not isinstance(path, str) or not path.strip()):
            raise ImproperlyConfigured(
                f"register_model({model._meta.label}): {option} is a field name or a "
                f"lookup path such as 'account__tenant_id', not {path!r}."
            )
    if isinstance(files, str):
        raise ImproperlyConfigured(
            f"register_model({model._meta.label}): files is a tuple of field names, "
            f"not the string {files!r}."
        )
    existing = _registry.get(data_class)
    if existing is not None and existing.model is not model:
        raise ImproperlyConfigured(
            f"Data class {data_class!r} is already registered for {existing.label}; "
            f"one data class governs one model."
        )
    row_class = RowClass(
        model=model,
        data_class=data_class,
        age_field=age_field,
        expires_field=expires_field,
        tenant_field=tenant_field,
        scope=scope,
        redact=dict(redact or {}),
        files=tuple(files),
        evidence=evidence,
        subject_field=subject_field,
    )
    if apps.models_ready:
        # In ready(): a scope that reads the clock is refused now. Registered
        # while the models load (the decorator), it is ``retention.E032``.
        problem = unstable_scope(row_class)
        if problem is not None:
            raise ImproperlyConfigured(problem)
    _registry[data_class] = row_class
    return row_class


def registered(**options: Any) -> Callable[[type[models.Model]], type[models.Model]]:
    """The decorator form: ``@registered(data_class="logs.api", age_field="created_at")``.

    The model is registered when its module is imported, which for a model
    module is while the app registry loads; ``AppConfig.ready()`` is the
    documented place, the decorator is for a model the host owns.
    """

    def decorate(model: type[models.Model]) -> type[models.Model]:
        register_model(model, **options)
        return model

    return decorate


def unregister(data_class: str) -> None:
    """Forget a registration (for tests)."""
    _registry.pop(data_class, None)


def row_class(data_class: str) -> RowClass | None:
    """The registration of a data class, or None for a class of tracked objects."""
    return _registry.get(data_class)


def row_class_required(data_class: str) -> RowClass:
    """The registration of a data class known to be model rows."""
    row = _registry.get(data_class)
    if row is None:
        raise LookupError(f"{data_class!r} is not a registered model.")
    return row


def row_classes() -> dict[str, RowClass]:
    """Every registration, by data class."""
    return dict(_registry)
