"""The app's endpoints: deletion receipts and report for tenants, the signed run trigger.

Thin: parse input, call one selector or service, serialize.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from retention.anchoring.signing import ALGORITHM
from retention.conf import settings
from retention.models import (
    DeletionEvent,
    Disposition,
    EventKind,
    EventOutcome,
    data_class_validator,
)
from retention.rest.csv import CSVStreamMixin, CSVStreamRenderer, stream_csv
from retention.rest.pagination import ReceiptCursorPagination, page_serializer
from retention.rest.schema import error_responses
from retention.rest.views import TenantApiView
from retention.selectors.anchors import signing_key
from retention.selectors.evidence import batch_leaves, chain_head, receipt_for
from retention.selectors.tenant import (
    RECEIPT_FIELDS,
    RECEIPT_OUTCOMES,
    deletion_receipt_rows,
    deletion_receipts,
    deletion_report,
    tenant_receipt_get,
)


class QueryFilterSerializer(serializers.Serializer[Any]):
    """Query filters, strictly: views pass ``query_params.dict()``, so an empty
    value (``?since=``) is an error rather than absent (DRF's reading of a
    QueryDict), and an unknown parameter (``?sinse=``) is refused rather than
    silently widening the result."""

    # Parameters read elsewhere: DRF's renderer choice and the paginator.
    other_params: ClassVar[frozenset[str]] = frozenset({"format"})

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(self.initial_data) - set(self.fields) - self.other_params
        if unknown:
            raise serializers.ValidationError(
                dict.fromkeys(sorted(unknown), "Unknown query parameter.")
            )
        return attrs


class PeriodFilterSerializer(QueryFilterSerializer):
    since = serializers.DateTimeField(
        required=False, help_text="Deleted at or after this time (RFC 3339)."
    )
    until = serializers.DateTimeField(required=False, help_text="Deleted before this time.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        since, until = attrs.get("since"), attrs.get("until")
        if since and until and since >= until:
            raise serializers.ValidationError({"until": "must be later than since."})
        return attrs


class PolicyRefSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    version = serializers.IntegerField()

    class Meta:
        ref_name = "PolicyRef"


CSV_HEADER = (
    "receipt_id",
    "record_id",
    "run_id",
    "data_class",
    "policy_key",
    "policy_version",
    "disposition",
    "outcome",
    "expired_at",
    "deleted_at",
    "key_digest",
    "event_hash",
    "batch_seq",
    "leaf_index",
    "kind",
    "row_count",
)
assert len(CSV_HEADER) == len(RECEIPT_FIELDS)


class ChainLinkSerializer(serializers.Serializer[Any]):
    seq = serializers.IntegerField()
    size = serializers.IntegerField()
    # A field named like Field.root (the serializer tree's root) in the stubs.
    root = serializers.CharField()  # type: ignore[assignment]

    class Meta:
        ref_name = "ChainLink"


class BatchSerializer(ChainLinkSerializer):
    previous_chain = serializers.CharField()
    chain = serializers.CharField()

    class Meta:
        ref_name = "ChainBatch"


class InclusionProofSerializer(serializers.Serializer[Any]):
    leaf_index = serializers.IntegerField()
    path = serializers.ListField(child=serializers.CharField())
    batch = BatchSerializer()

    class Meta:
        ref_name = "InclusionProof"


class DeletionListApi(CSVStreamMixin, TenantApiView):
    renderer_classes = [JSONRenderer, CSVStreamRenderer]

    class FilterSerializer(PeriodFilterSerializer):
        other_params = frozenset({"format", "cursor", "page_size"})

        data_class = serializers.CharField(
            required=False, max_length=100, validators=[data_class_validator]
        )

    class OutputSerializer(serializers.Serializer[Any]):
        id = serializers.IntegerField(help_text="The receipt's id.")
        record_id = serializers.IntegerField(
            allow_null=True, help_text="The tracked object's record; null for a database row."
        )
        kind = serializers.ChoiceField(
            choices=EventKind.choices,
            help_text="`object` (a tracked object) or `row` (a row of a registered model).",
        )
        row_count = serializers.IntegerField(
            allow_null=True,
            help_text="Rows of one page, for a class recording one event per page; else null.",
        )
        run_id = serializers.UUIDField(allow_null=True)
        data_class = serializers.CharField()
        policy = serializers.SerializerMethodField()
        disposition = serializers.ChoiceField(choices=Disposition.choices)
        outcome = serializers.ChoiceField(
            choices=[c for c in EventOutcome.choices if c[0] in RECEIPT_OUTCOMES],
            help_text=(
                "`deleted`; `already_absent` when the object was gone already at deletion; "
                "`missing`: not found at deletion time (reconciliation found it gone before "
                "any deletion run), never a deletion."
            ),
        )
        expired_at = serializers.DateTimeField(source="expires_at")
        deleted_at = serializers.DateTimeField(source="occurred_at")
        key_digest = serializers.CharField(
            help_text="HMAC-SHA256 of the object key, keyed by the operator; never the key."
        )
        event_hash = serializers.CharField(
            help_text="SHA-256 leaf hash of this receipt's event in the audit chain."
        )
        proof = serializers.SerializerMethodField(
            help_text="Inclusion proof: leaf index, audit path and the batch's chain link."
        )

        class Meta:
            ref_name = "DeletionReceipt"

        @extend_schema_field(InclusionProofSerializer(allow_null=True))
        def get_proof(self, event: Any) -> dict[str, Any] | None:
            if event.batch_id is None:
                return None  # not chained: retention_verify reports such events
            # DRF hands every serializer of a response the same mutable dict.
            leaves = cast("dict[str, Any]", self.context).setdefault("batch_leaves", {})
            if event.batch_id not in leaves:
                leaves[event.batch_id] = batch_leaves(event.batch_id)
            receipt = receipt_for(event, leaves=leaves[event.batch_id])
            return {key: receipt[key] for key in ("leaf_index", "path", "batch")}

        @extend_schema_field(PolicyRefSerializer)
        def get_policy(self, event: Any) -> dict[str, Any]:
            return {"key": event.policy_key, "version": event.policy_version_number}

    PageSerializer = page_serializer(OutputSerializer, ref_name="DeletionReceiptPage")

    @extend_schema(
        operation_id="deletions_list",
        summary="Your deletion receipts",
        description="Receipts of your objects that are gone, in the order they were recorded, "
        "cursor-paginated. `?format=csv` (or `Accept: text/csv`) streams every matching "
        "receipt as CSV, by deletion time.",
        parameters=[FilterSerializer],
        responses={
            (200, "application/json"): PageSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV export"),
            **error_responses(400, 401, 406, 429, media_type="application/json"),
        },
        tags=["deletions"],
    )
    def get(self, request: Request) -> Any:
        filters = self.FilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        if isinstance(request.accepted_renderer, CSVStreamRenderer):
            rows = deletion_receipt_rows(tenant_id=self.tenant_id, **filters.validated_data)
            stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
            return stream_csv(
                header=CSV_HEADER, rows=rows, filename=f"deletion-receipts-{stamp}.csv"
            )
        receipts = deletion_receipts(
            tenant_id=self.tenant_id, **filters.validated_data
        ).select_related("batch")
        paginator = ReceiptCursorPagination()
        page = paginator.paginate_queryset(receipts, request, view=self)
        data = self.OutputSerializer(page, many=True, context={"batch_leaves": {}}).data
        return paginator.get_paginated_response(data)


class DeletionReceiptApi(TenantApiView):
    """One receipt in the form ``python -m retention.receipts verify`` reads."""

    class OutputSerializer(InclusionProofSerializer):
        event = serializers.DictField(help_text="The hashed fields of the event.")
        event_hash = serializers.CharField()

        class Meta:
            ref_name = "VerifiableReceipt"

    @extend_schema(
        operation_id="deletions_receipt",
        summary="One receipt, verifiable offline",
        description="Save it as receipt.json; with the chain head (`/deletions/chain/`) "
        "`python -m retention.receipts verify receipt.json chain-head.json` checks it.",
        parameters=[
            OpenApiParameter("receipt_id", OpenApiTypes.INT, OpenApiParameter.PATH),
        ],
        responses={200: OutputSerializer, **error_responses(401, 404, 429)},
        tags=["deletions"],
    )
    def get(self, request: Request, receipt_id: str) -> Response:
        # Matched as a string so that any malformed id is our JSON 404 too.
        try:
            event = tenant_receipt_get(tenant_id=self.tenant_id, receipt_id=int(receipt_id))
        except (ValueError, DeletionEvent.DoesNotExist):
            raise NotFound("No such receipt.") from None
        return Response(self.OutputSerializer(receipt_for(event)).data)


class ChainHeadApi(TenantApiView):
    """The chain head and the links after a batch: no tenant data, only hashes."""

    class FilterSerializer(QueryFilterSerializer):
        from_seq = serializers.IntegerField(
            required=False, min_value=0, help_text="Only the links after this batch."
        )

    class OutputSerializer(serializers.Serializer[Any]):
        head = serializers.DictField()
        links = ChainLinkSerializer(many=True)

        class Meta:
            ref_name = "ChainHead"

    @extend_schema(
        operation_id="deletions_chain",
        summary="The audit chain's head, for offline receipt verification",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **error_responses(400, 401, 429)},
        tags=["deletions"],
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        head = chain_head(from_seq=filters.validated_data.get("from_seq", 0))
        return Response(self.OutputSerializer(head).data)


class ChainKeyApi(TenantApiView):
    """The public key that signs anchored chain heads; 404 while none is configured."""

    class OutputSerializer(serializers.Serializer[Any]):
        algorithm = serializers.CharField(help_text="Always `Ed25519`.")
        key_id = serializers.CharField(help_text="First 16 hex digits of SHA-256 of the key.")
        public_key = serializers.CharField(help_text="The raw 32-byte public key, base64.")

        class Meta:
            ref_name = "ChainSigningKey"

    @extend_schema(
        operation_id="deletions_chain_key",
        summary="The public key of signed chain heads, for offline verification",
        description="`python -m retention.receipts verify ... --signed-head FILE --public-key "
        "KEY` checks a signed head with it. Compare the `key_id` with one you got out of band.",
        responses={200: OutputSerializer, **error_responses(400, 401, 404, 429)},
        tags=["deletions"],
    )
    def get(self, request: Request) -> Response:
        QueryFilterSerializer(data=request.query_params.dict()).is_valid(raise_exception=True)
        signer = signing_key()
        if signer is None:
            raise NotFound("No signing key is configured: chain heads are not signed.")
        key = {"algorithm": ALGORITHM, "key_id": signer.key_id, "public_key": signer.public_key_b64}
        return Response(self.OutputSerializer(key).data)


class OverdueRecordSerializer(serializers.Serializer[Any]):
    record_id = serializers.IntegerField()
    data_class = serializers.CharField()
    expires_at = serializers.DateTimeField()
    overdue_by_seconds = serializers.IntegerField()

    class Meta:
        ref_name = "OverdueRecord"


class DataClassReportSerializer(serializers.Serializer[Any]):
    data_class = serializers.CharField()
    deleted = serializers.IntegerField()
    already_absent = serializers.IntegerField()
    on_time = serializers.IntegerField(help_text="Receipts within the promise after expiry.")
    late = serializers.IntegerField(help_text="Receipts later than the promise.")
    missing = serializers.IntegerField(
        help_text="Receipts `missing`: not found at deletion time; not counted as deleted."
    )
    overdue = serializers.IntegerField(
        help_text="Now: not deleted, expired longer ago than the promise, under no hold."
    )
    held = serializers.IntegerField(help_text="Now: expired but kept under a legal hold.")
    oldest_overdue = OverdueRecordSerializer(allow_null=True)

    class Meta:
        ref_name = "DataClassReport"


class DeletionReportApi(TenantApiView):
    class FilterSerializer(PeriodFilterSerializer):
        pass

    class OutputSerializer(serializers.Serializer[Any]):
        tenant_id = serializers.CharField()
        since = serializers.DateTimeField(allow_null=True)
        until = serializers.DateTimeField(allow_null=True)
        generated_at = serializers.DateTimeField()
        lag_promise_seconds = serializers.IntegerField()
        data_classes = DataClassReportSerializer(many=True)
        oldest_overdue = OverdueRecordSerializer(allow_null=True)

        class Meta:
            ref_name = "DeletionReport"

    @extend_schema(
        operation_id="deletions_report",
        summary="Your deletions, on time and late, and what is overdue",
        description="Receipts deleted in the window (`since` inclusive, `until` exclusive) per "
        "data class, on time or late against the operator's promise "
        "(`lag_promise_seconds` after expiry); overdue and held counts are as of now.",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **error_responses(400, 401, 429)},
        tags=["deletions"],
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        report = deletion_report(
            tenant_id=self.tenant_id,
            now=timezone.now(),
            promise=settings.LAG_PROMISE,
            **filters.validated_data,
        )
        return Response(self.OutputSerializer(report).data)
