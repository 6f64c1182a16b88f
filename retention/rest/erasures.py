"""A tenant's erasure requests: file one for a data subject of its own, follow it,
fetch its certificate.

A tenant names a subject only; the request is always within the key's own
tenant, so no body can reach another tenant or ask for the tenant's own
offboarding (that is the provider's act, filed in the admin).

Thin: parse input, call one service or selector, serialize.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from retention.models import ErasureRequest, ErasureState
from retention.reporting import rfc3339
from retention.rest.exceptions import ApiError, ErrorSerializer
from retention.rest.filters import QueryFilterSerializer
from retention.rest.schema import error_responses
from retention.rest.views import TenantApiView
from retention.selectors.erasure import erasure_progress, tenant_erasure_get
from retention.services.erasure import erasure_request


@extend_schema_field(
    {"oneOf": [{"type": "string", "minLength": 1, "maxLength": 255}, {"type": "integer"}]}
)
class SubjectIdField(serializers.Field[Any, Any, Any, Any]):
    """Your id of the data subject, as you passed it to ``track(subject_id=)``: a JSON
    string or integer (never a boolean or a float, which would name another subject)."""

    default_error_messages = {"invalid": "A string or an integer."}

    def to_internal_value(self, data: Any) -> str | int:
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("invalid")
        if isinstance(data, str) and not 0 < len(data) <= 255:
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class _JsonString(serializers.CharField):
    """A JSON string, not a number DRF would turn into one."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class Rfc3339Field(serializers.DateTimeField):
    """An instant in UTC with ``Z``, whatever the host's TIME_ZONE."""

    def to_representation(self, value: datetime | None) -> str | None:  # type: ignore[override]
        return rfc3339(value)


def _erasure(tenant_id: str, erasure_id: str) -> ErasureRequest:
    # Parsed here, not by the URL pattern: a malformed id is this API's JSON 404.
    try:
        return tenant_erasure_get(tenant_id=tenant_id, erasure_id=uuid.UUID(erasure_id))
    except (ValueError, ErasureRequest.DoesNotExist):
        raise NotFound("No such erasure request.") from None


class ErasureCreateApi(TenantApiView):
    class InputSerializer(serializers.Serializer[dict[str, Any]]):
        subject_id = SubjectIdField(
            help_text="The data subject: your id of the person, string or integer."
        )
        reason = _JsonString(
            max_length=2000, help_text="Why, e.g. the reference of the person's request."
        )

        # The schema says so too (additionalProperties: false; RetentionAutoSchema).
        refuses_unknown_keys = True

        class Meta:
            ref_name = "ErasureRequestCreate"

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            # A tenant_id or data_classes would otherwise be ignored in silence.
            unknown = set(self.initial_data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError(dict.fromkeys(sorted(unknown), "Unknown field."))
            return attrs

    class OutputSerializer(serializers.Serializer[ErasureRequest]):
        id = serializers.UUIDField()
        state = serializers.CharField(help_text="`received`: it waits for approval.")
        due_at = Rfc3339Field(help_text="When it must be done by (RFC 3339, UTC).")

        class Meta:
            ref_name = "ErasureRequestReceived"

    @extend_schema(
        operation_id="erasures_create",
        summary="Ask for the erasure of one of your data subjects",
        description="The request is received with its scope frozen (what exists of the "
        "subject in your tenant now) and waits for the provider's approval. A second open "
        "request for the same subject is refused (400 `invalid_erasure_request`, naming the "
        "open one).",
        request=InputSerializer,
        responses={202: OutputSerializer, **error_responses(400, 401, 413, 415, 429)},
        tags=["erasures"],
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        received = erasure_request(
            requested_by=None,
            requested_by_tenant=self.tenant_id,
            tenant_id=self.tenant_id,
            subject_id=data.validated_data["subject_id"],
            reason=data.validated_data["reason"],
            now=timezone.now(),
        )
        return Response(self.OutputSerializer(received).data, status=status.HTTP_202_ACCEPTED)


class ClassProgressSerializer(serializers.Serializer[Any]):
    data_class = serializers.CharField()
    reachable = serializers.BooleanField(
        help_text="Whether the request can reach the class's items at all."
    )
    not_reachable_because = serializers.CharField(allow_blank=True)
    on_erasure = serializers.CharField(
        allow_null=True, help_text="`delete`, `redact` or `keep` (with `erasure_basis`)."
    )
    erasure_basis = serializers.CharField(
        allow_blank=True, help_text="The written legal basis of `keep`."
    )
    items = serializers.IntegerField(help_text="Items of the subject when it was received.")
    settled = serializers.BooleanField(
        help_text="Whether an erase run has settled the class; until then the counts are 0."
    )
    erased = serializers.IntegerField()
    redacted = serializers.IntegerField()
    kept = serializers.IntegerField(
        source="kept_count",
        help_text="Kept: under a legal hold (resumed when it is released) or by `keep`.",
    )
    left = serializers.IntegerField(allow_null=True, help_text="Still to do; null until settled.")
    verified = serializers.BooleanField(
        allow_null=True, help_text="A re-query found nothing left to erase; null until settled."
    )

    class Meta:
        ref_name = "ErasureClassProgress"


class ErasureDetailApi(TenantApiView):
    class FilterSerializer(QueryFilterSerializer):
        """No filter: an unknown parameter is refused, as everywhere."""

    class OutputSerializer(serializers.Serializer[ErasureRequest]):
        id = serializers.UUIDField()
        # Not an enum: another endpoint's ``state`` would collide with its name.
        state = serializers.CharField(
            help_text=f"One of {', '.join(f'`{s}`' for s in ErasureState.values)}: received → "
            "approved → executing → completed | partially_completed (items kept under a "
            "hold); or rejected, or cancelled."
        )
        subject_digest = serializers.CharField(
            help_text="The subject's keyed digest (the id itself is never shown)."
        )
        data_classes = serializers.ListField(
            child=serializers.CharField(), help_text="The classes asked for; empty: every class."
        )
        received_at = Rfc3339Field()
        due_at = Rfc3339Field()
        approved_at = Rfc3339Field(allow_null=True)
        ended_at = Rfc3339Field(allow_null=True, help_text="When it was rejected or cancelled.")
        completed_at = Rfc3339Field(allow_null=True)
        verified_at = Rfc3339Field(allow_null=True)
        classes = serializers.SerializerMethodField(
            help_text="Per class: its scope at receipt and what the erase runs did so far."
        )

        class Meta:
            ref_name = "ErasureRequest"

        @extend_schema_field(ClassProgressSerializer(many=True))
        def get_classes(self, obj: ErasureRequest) -> Any:
            return ClassProgressSerializer(erasure_progress(obj), many=True).data

    @extend_schema(
        operation_id="erasures_retrieve",
        summary="One of your erasure requests and its progress",
        parameters=[OpenApiParameter("erasure_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses={200: OutputSerializer, **error_responses(400, 401, 404, 429)},
        tags=["erasures"],
    )
    def get(self, request: Request, erasure_id: str) -> Response:
        self.FilterSerializer(data=request.query_params.dict()).is_valid(raise_exception=True)
        return Response(self.OutputSerializer(_erasure(self.tenant_id, erasure_id)).data)


class ErasureCertificateApi(TenantApiView):
    class FilterSerializer(QueryFilterSerializer):
        """No filter: an unknown parameter is refused, as everywhere."""

    @extend_schema(
        operation_id="erasures_certificate",
        summary="The certificate of a completed erasure request",
        description="The signed certificate issued when the request completed or partially "
        "completed, as issued; `python -m retention.receipts verify CERTIFICATE.json` checks "
        "it offline. Before that: 409 `certificate_not_issued`.",
        parameters=[OpenApiParameter("erasure_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses={
            200: OpenApiTypes.OBJECT,
            409: ErrorSerializer,
            **error_responses(400, 401, 404, 429),
        },
        tags=["erasures"],
    )
    def get(self, request: Request, erasure_id: str) -> Response:
        self.FilterSerializer(data=request.query_params.dict()).is_valid(raise_exception=True)
        erasure = _erasure(self.tenant_id, erasure_id)
        if erasure.certificate is None:
            raise ApiError(
                f"Erasure request {erasure.pk} is {erasure.state}: its certificate is issued "
                "when it completes or partially completes.",
                code="certificate_not_issued",
                status_code=status.HTTP_409_CONFLICT,
            )
        return Response(erasure.certificate)
