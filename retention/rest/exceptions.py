"""One error format for every endpoint: ``{"code", "detail"}`` (+ ``field_errors``).

``code`` is stable and meant for programs; ``detail`` is for people. Domain
refusals (``RetentionError``) keep their own codes; an unknown or foreign id
is a plain 404 ``not_found``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import (
    ObjectDoesNotExist,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from retention.exceptions import RetentionError, RunRefused


class ApiError(exceptions.APIException):
    """An API refusal with an explicit status and code."""

    def __init__(self, detail: str, *, code: str, status_code: int = 400, **extra: Any) -> None:
        super().__init__(detail, code=code)
        self.status_code = status_code
        self.extra = extra


class ErrorSerializer(serializers.Serializer[Any]):
    code = serializers.CharField(help_text="Stable, machine-readable error code.")
    detail = serializers.CharField(help_text="What went wrong, for people.")
    field_errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Per input field (dotted for nested ones), its problems. Only on `invalid`.",
    )

    class Meta:
        ref_name = "Error"


class RunRefusedErrorSerializer(ErrorSerializer):
    reason = serializers.CharField(
        help_text="Why: `lease_held`, `paused`, `report_only`, `storage_unavailable`, "
        "`bad_arguments`."
    )
    run_id = serializers.UUIDField(
        allow_null=True, help_text="The refused run, kept in the ledger with its reason."
    )

    class Meta:
        ref_name = "RunRefusedError"


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        flat = {}
        for index, value in enumerate(detail):
            flat.update(_flatten(value, f"{prefix}.{index}" if prefix else str(index)))
        return flat
    items = detail if isinstance(detail, list) else [detail]
    return {prefix or "non_field_errors": [str(item) for item in items]}


def _query_too_long(request: Any, limit: int) -> bool:
    # As Python's parse_qsl counts fields for Django's QueryDict.
    query = request.META.get("QUERY_STRING", "") if request is not None else ""
    return bool(query) and query.count("&") + 1 > limit


def _request_limit(exc: Exception, request: Any) -> ApiError | None:
    """Django's request limits, raised while the query string or the body is
    read, as this API's refusals rather than Django's HTML 400."""
    if isinstance(exc, TooManyFieldsSent):
        limit = django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        if _query_too_long(request, limit):
            return ApiError(
                f"More than {limit} query parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS).",
                code="too_many_parameters",
            )
        return ApiError(
            f"More than {limit} fields in the form (DATA_UPLOAD_MAX_NUMBER_FIELDS).",
            code="too_many_fields",
        )
    if isinstance(exc, TooManyFilesSent):
        limit = django_settings.DATA_UPLOAD_MAX_NUMBER_FILES
        return ApiError(
            f"More than {limit} file parts in the form (DATA_UPLOAD_MAX_NUMBER_FILES).",
            code="too_many_files",
        )
    if isinstance(exc, RequestDataTooBig):
        limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return ApiError(
            f"The request body, files aside, is larger than {limit} bytes "
            "(DATA_UPLOAD_MAX_MEMORY_SIZE).",
            code="request_too_large",
            status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    return None


def _translate(exc: Exception, request: Any = None) -> Exception:
    limit = _request_limit(exc, request)
    if limit is not None:
        return limit
    if isinstance(exc, RunRefused):
        # Bad arguments are the caller's mistake; the rest is the state of things.
        code = status.HTTP_400_BAD_REQUEST if exc.reason == "bad_arguments" else 409
        return ApiError(
            str(exc),
            code=exc.code,
            status_code=code,
            reason=exc.reason,
            run_id=str(exc.run_id) if exc.run_id else None,
        )
    if isinstance(exc, RetentionError):
        return ApiError(str(exc), code=exc.code)
    if isinstance(exc, ObjectDoesNotExist | Http404):
        return exceptions.NotFound("Not found.")
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied()
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = _translate(exc, context.get("request"))
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return None
    if isinstance(exc, exceptions.ValidationError):
        body: dict[str, Any] = {
            "code": "invalid",
            "detail": "The request is not valid; see field_errors.",
            "field_errors": _flatten(exc.detail),
        }
    else:
        detail = exc.detail
        code = getattr(detail, "code", None) or exc.default_code
        body = {"code": str(code), "detail": str(detail)}
        body.update(getattr(exc, "extra", {}))
    response.data = body
    return response
