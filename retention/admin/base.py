"""Building blocks shared by the retention admins.

Read-only audit admins, list filters that stay cheap on millions of rows
(choices from the policy table, free-text tenant and run filters instead of
a DISTINCT over the records), and a streaming CSV export of whatever the
changelist currently shows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.duration import duration_iso_string

from retention.csvstream import csv_response
from retention.exceptions import RetentionError
from retention.formatting import format_duration, rfc3339
from retention.human_times import HumanTimesMixin
from retention.models import Policy, PolicyVersion
from retention.selectors.policies import lock_violation

if TYPE_CHECKING:
    pass

# The model an admin or a list filter serves.
ModelT = TypeVar("ModelT", bound=Model)
_T = TypeVar("_T")


class ReadOnlyAdmin(HumanTimesMixin[ModelT], admin.ModelAdmin[ModelT]):
    """The audit trail: viewable, filterable, exportable, never editable."""

    show_full_result_count = False  # one COUNT(*) on a large table is enough

    def has_add_permission(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        return False


class ObjectReadOnlyMixin(HumanTimesMixin[ModelT], admin.ModelAdmin[ModelT]):
    """Change permission gates the actions; the object page itself is read-only."""

    def has_change_permission(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        if obj is not None:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        return False


class ChangeContextMixin(HumanTimesMixin[ModelT], admin.ModelAdmin[ModelT]):
    """The object's page shows more of it: ``change_context`` says what."""

    def change_context(self, request: HttpRequest, obj: ModelT) -> dict[str, Any]:
        return {}

    # Read afresh, not the instance a bound form may have changed on a POST.
    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        obj = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if obj is not None:
            context.update(self.change_context(request, obj))
        return super().change_view(request, object_id, form_url, context)


def acting_user(request: HttpRequest) -> AbstractBaseUser:
    """The signed-in user an admin view acts for (``admin_view`` lets no one else in)."""
    if not isinstance(request.user, AbstractBaseUser):
        raise PermissionDenied
    return request.user


def report_refusal(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, call: Callable[[], _T]
) -> _T | None:
    """Run a service call; a refusal becomes an error message, never a 500."""
    try:
        return call()
    except RetentionError as exc:
        model_admin.message_user(request, str(exc), messages.ERROR)
        return None


def one_at_a_time(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[ModelT],
    url_name: str,
    refusal: str,
) -> HttpResponse | None:
    """An action that takes one object to its own page (``url_name``), or says why not."""
    if queryset.count() != 1:
        model_admin.message_user(request, refusal, messages.WARNING)
        return None
    return HttpResponseRedirect(reverse(url_name, args=[queryset.get().pk]))


# --------------------------------------------------------------------------
# List filters


class DataClassFilter(admin.SimpleListFilter):
    title = "data class"
    parameter_name = "data_class"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        names = Policy.objects.order_by("data_class").values_list("data_class", flat=True)
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ModelT]) -> QuerySet[ModelT]:
        if self.value():
            return queryset.filter(data_class=self.value())
        return queryset


class RunDataClassFilter(DataClassFilter):
    """Runs list their classes in a JSON array; match the quoted name in it."""

    def queryset(self, request: HttpRequest, queryset: QuerySet[ModelT]) -> QuerySet[ModelT]:
        if self.value():
            return queryset.filter(data_classes__icontains=f'"{self.value()}"')
        return queryset


class VersionDataClassFilter(DataClassFilter):
    def queryset(self, request: HttpRequest, queryset: QuerySet[ModelT]) -> QuerySet[ModelT]:
        if self.value():
            return queryset.filter(policy__data_class=self.value())
        return queryset


class InputFilter(admin.SimpleListFilter):
    """A free-text filter: the set of tenants is too large to list."""

    template = "admin/retention/input_filter.html"
    parameter_name: str  # each subclass names its own
    placeholder = ""

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return []

    def has_output(self) -> bool:
        return True

    # The input_filter template reads its own keys, not the link list's that
    # django-stubs types SimpleListFilter.choices with.
    def choices(self, changelist: ChangeList) -> Iterator[dict[str, object]]:  # type: ignore[override]
        hidden = [
            (key, value) for key, value in changelist.params.items() if key != self.parameter_name
        ]
        yield {
            "value": self.value() or "",
            "hidden": hidden,
            "parameter_name": self.parameter_name,
            "placeholder": self.placeholder,
            "clear_url": changelist.get_query_string(remove=[self.parameter_name]),
        }


class TenantFilter(InputFilter):
    title = "tenant"
    parameter_name = "tenant"
    placeholder = "tenant id"

    def queryset(self, request: HttpRequest, queryset: QuerySet[ModelT]) -> QuerySet[ModelT]:
        value = (self.value() or "").strip()
        if value:
            return queryset.filter(tenant_id=value)
        return queryset


class RunIdFilter(InputFilter):
    title = "run"
    parameter_name = "run"
    placeholder = "run id"

    def queryset(self, request: HttpRequest, queryset: QuerySet[ModelT]) -> QuerySet[ModelT]:
        value = (self.value() or "").strip()
        if not value:
            return queryset
        try:
            return queryset.filter(run_id=uuid.UUID(value))
        except ValueError:
            return queryset.none()


# --------------------------------------------------------------------------
# Streaming CSV export


class CsvExportMixin(admin.ModelAdmin[ModelT]):
    """``export/`` next to the changelist streams its filtered rows as CSV.

    The rows come from the changelist the user sees (same filters, search and
    ordering), read with a server-side cursor in chunks.
    """

    export_fields: Sequence[str] = ()
    export_chunk_size = 2000

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        urls = [
            path(
                "export/",
                self.admin_site.admin_view(self.export_view),
                name=f"{opts.app_label}_{opts.model_name}_export",
            )
        ]
        return urls + super().get_urls()

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("These filters are not valid.")
        queryset: QuerySet[ModelT] = changelist.queryset
        values = queryset.values_list(*self.export_fields).iterator(
            chunk_size=self.export_chunk_size
        )
        rows = ([_export_cell(value) for value in row] for row in values)
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        return csv_response(
            self.export_fields,
            rows,
            filename=f"{self.model._meta.model_name}-{stamp}.csv",
            rows_per_chunk=self.export_chunk_size,
        )


def _export_cell(value: object) -> object:
    """A cell as machines read it: RFC 3339 with Z, ISO 8601 durations, lists as words."""
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, timedelta):
        return duration_iso_string(value)
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    return value


def lock_refusal_message(version: PolicyVersion, in_force: PolicyVersion | None) -> str:
    """Why approving would be refused by the lock, said before anyone tries."""
    violation = lock_violation(version, in_force)
    if violation is None:
        return ""
    if violation.kind == "shortened":
        return (
            f"The policy is locked at {format_duration(violation.in_force.retention_period)}: "
            "a shorter period will be refused."
        )
    return "The policy is locked: a new version must stay locked, or it will be refused."
