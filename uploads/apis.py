"""The host's upload endpoints, built from retention's REST pieces.

``POST /api/v1/uploads/`` checks everything it can before a byte reaches the
storage (data class and policy, size, type from the bytes), then writes the
object and its retention record as one unit (``upload_create``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from retention import api
from retention.models import RecordState, data_class_validator
from retention.rest.deletions import PolicyRefSerializer
from retention.rest.schema import error_responses
from retention.rest.views import TenantApiView
from uploads.selectors import upload_get
from uploads.services import upload_create
from uploads.validators import (
    FileTooLarge,
    SizeLimitUploadHandler,
    max_upload_bytes,
    upload_content_type,
)


class UploadCreateApi(TenantApiView):
    parser_classes = [MultiPartParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(allow_empty_file=True, use_url=False)
        data_class = serializers.CharField(max_length=100, validators=[data_class_validator])

        class Meta:
            ref_name = "UploadCreate"

    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        record_id = serializers.IntegerField(
            source="retention_record_id", help_text="The id deletion receipts refer to."
        )
        data_class = serializers.CharField()
        content_type = serializers.CharField(help_text="As read from the file's bytes.")
        size = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        expires_at = serializers.DateTimeField(source="retention_record.expires_at")
        policy = serializers.SerializerMethodField()

        class Meta:
            ref_name = "Upload"

        @extend_schema_field(PolicyRefSerializer)
        def get_policy(self, upload: Any) -> dict[str, Any]:
            version = upload.retention_record.policy_version
            return {"key": version.policy.key, "version": version.number}

    @extend_schema(
        operation_id="uploads_create",
        summary="Upload a file under a data class's retention policy",
        description="Multipart `file` and `data_class`. The type is read from the file's "
        "bytes and must be allowed for the data class; the size is limited. Refusals "
        "(`unknown_data_class`, `no_approved_policy`, `file_too_large`, `empty_file`, "
        "`unsupported_file_type`) write nothing.",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, **error_responses(400, 401, 415, 429)},
        tags=["uploads"],
    )
    def post(self, request: Request) -> Response:
        # Before anything reads the body: stop storing a file past the limit.
        limiter = SizeLimitUploadHandler(limit=max_upload_bytes())
        request.upload_handlers.insert(0, limiter)
        data = self.InputSerializer(data=request.data)
        if limiter.exceeded:
            raise FileTooLarge(f"The file is larger than the limit of {limiter.limit} bytes.")
        data.is_valid(raise_exception=True)
        data_class = data.validated_data["data_class"]
        file = data.validated_data["file"]
        api.policy_version_in_force(data_class)
        content_type = upload_content_type(data_class=data_class, file=file)
        upload = upload_create(
            tenant_id=self.tenant_id,
            data_class=data_class,
            file=file,
            content_type=content_type,
            storage=getattr(settings, "UPLOADS_STORAGE", "default"),
            now=timezone.now(),
        )
        return Response(self.OutputSerializer(upload).data, status=status.HTTP_201_CREATED)


class UploadRetentionApi(TenantApiView):
    class OutputSerializer(serializers.Serializer):
        upload_id = serializers.UUIDField()
        record_id = serializers.IntegerField()
        data_class = serializers.CharField()
        state = serializers.ChoiceField(choices=RecordState.choices)
        created_at = serializers.DateTimeField()
        expires_at = serializers.DateTimeField()
        renewed_at = serializers.DateTimeField(allow_null=True)
        deleted_at = serializers.DateTimeField(allow_null=True)
        policy = PolicyRefSerializer()
        retention_period_seconds = serializers.IntegerField()
        hold_applies = serializers.BooleanField(
            help_text="Whether a legal hold keeps it now (the hold's reason is not shown)."
        )
        enforced = serializers.BooleanField(
            help_text="Whether deletion is enabled for its data class (else report-only)."
        )
        explanation = serializers.CharField(help_text="Why it is kept, in plain language.")

        class Meta:
            ref_name = "UploadRetention"

    @extend_schema(
        operation_id="uploads_retention",
        summary="Why is this upload still kept?",
        description="Its state, deletion date, policy version, whether a legal hold applies "
        "(not why), and a plain-language explanation of what happens next.",
        parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses={200: OutputSerializer, **error_responses(401, 404, 429)},
        tags=["uploads"],
    )
    def get(self, request: Request, id: str) -> Response:
        upload = upload_get(tenant_id=self.tenant_id, upload_id=id)
        explanation = api.explain_retention(
            tenant_id=self.tenant_id, record_id=upload.retention_record_id, now=timezone.now()
        )
        data = {
            **asdict(explanation),
            "upload_id": upload.pk,
            "policy": {"key": explanation.policy_key, "version": explanation.policy_version},
        }
        return Response(self.OutputSerializer(data).data)
