"""Instants and durations in the admin's lists and object pages, as people read them.

The one spelling is ``retention.formatting``'s; this module makes Django's
own rendering of datetime and duration fields use it. It sits beside
``retention.formatting`` rather than in ``retention.admin`` so that the REST
sub-app's admin (tenant API keys) uses it too: ``retention.rest`` may not
import ``retention.admin`` (the import contracts in ``pyproject.toml``), and
this module imports neither.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from django.contrib import admin
from django.db.models import DateTimeField, DurationField, Model
from django.http import HttpRequest

from retention.formatting import NOTHING, format_duration, instant_html

if TYPE_CHECKING:
    from django_stubs_ext import FieldsetSpec

ModelT = TypeVar("ModelT", bound=Model)


def _shown(
    field: DateTimeField[Any, Any] | DurationField[Any, Any], *, none: str = NOTHING
) -> Callable[[Model], str]:
    """A display function showing one model field as people read it; ``none`` for no value."""
    if isinstance(field, DurationField):
        zero = "none" if "margin" in field.name else "0 days"

        def show(obj: Model) -> str:
            return format_duration(getattr(obj, field.attname), zero=zero, none=none)

    else:

        def show(obj: Model) -> str:
            return instant_html(getattr(obj, field.attname), none=none)

    return admin.display(description=str(field.verbose_name), ordering=field.name)(show)


class HumanTimesMixin(admin.ModelAdmin[ModelT]):
    """Every instant and duration a list or an object page shows reads one way.

    Django shows a datetime as "Dec. 3, 2026, 8:02 a.m." (no zone) and a
    timedelta as "60 days, 0:00:00". Here each datetime and duration field
    the admin shows read-only (list columns, read-only fields) is swapped for
    a display function, ``<name>_shown``, built from ``retention.formatting``:
    "2026-12-03 08:02 UTC" (the exact instant in its tooltip), "60 days".
    An editable field keeps its widget. A subclass's own ``get_list_display``,
    ``get_readonly_fields`` or ``get_fieldsets`` is swapped the same way, so
    an admin that overrides them cannot bring Django's spelling back.
    A field with no value reads "—", or what ``human_none`` says for it.
    """

    human_none: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Also a method a mixin listed before this one brings (the MRO's first).
        for name, swap in _SWAPS.items():
            own = getattr(cls, name)
            if not getattr(own, "human_times", False):
                setattr(cls, name, swap(own))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.human_names: dict[str, str] = {}
        for field in self.opts.concrete_fields:
            if isinstance(field, DateTimeField | DurationField):
                name = f"{field.name}_shown"
                self.human_names[field.name] = name
                setattr(self, name, _shown(field, none=self.human_none.get(field.name, NOTHING)))

    def human_fields(self, names: Sequence[Any]) -> list[Any]:
        mapped = [self.human_names.get(n, n) if isinstance(n, str) else n for n in names]
        return list(dict.fromkeys(mapped))  # a field and its display function once

    def human_fieldsets(
        self, request: HttpRequest, obj: ModelT | None, fieldsets: Sequence[Any]
    ) -> list[Any]:
        readonly = set(self.get_readonly_fields(request, obj))
        all_readonly = obj is not None and not self.has_change_permission(request, obj)
        shown_sets = []
        for title, options in fieldsets:
            shown = []
            for name in options.get("fields", ()):
                human = self.human_names.get(name) if isinstance(name, str) else None
                shown.append(human if human and (all_readonly or human in readonly) else name)
            shown_sets.append((title, {**options, "fields": list(dict.fromkeys(shown))}))
        return shown_sets

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        return self.human_fields(super().get_list_display(request))

    def get_readonly_fields(
        self, request: HttpRequest, obj: ModelT | None = None
    ) -> list[str] | tuple[str, ...]:
        return self.human_fields(super().get_readonly_fields(request, obj))

    def get_fieldsets(self, request: HttpRequest, obj: ModelT | None = None) -> FieldsetSpec:
        return self.human_fieldsets(request, obj, super().get_fieldsets(request, obj))


def _swap_list(own: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(own)
    def swapped(self: HumanTimesMixin[Any], request: HttpRequest) -> list[Any]:
        return self.human_fields(own(self, request))

    swapped.human_times = True  # type: ignore[attr-defined]
    return swapped


def _swap_readonly(own: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(own)
    def swapped(self: HumanTimesMixin[Any], request: HttpRequest, obj: Any = None) -> list[Any]:
        return self.human_fields(own(self, request, obj))

    swapped.human_times = True  # type: ignore[attr-defined]
    return swapped


def _swap_fieldsets(own: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(own)
    def swapped(self: HumanTimesMixin[Any], request: HttpRequest, obj: Any = None) -> list[Any]:
        return self.human_fieldsets(request, obj, own(self, request, obj))

    swapped.human_times = True  # type: ignore[attr-defined]
    return swapped


_SWAPS = {
    "get_list_display": _swap_list,
    "get_readonly_fields": _swap_readonly,
    "get_fieldsets": _swap_fieldsets,
}

for _name in _SWAPS:
    getattr(HumanTimesMixin, _name).human_times = True
