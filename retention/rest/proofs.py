"""What a tenant verifies offline: one receipt with its proof, a per-row page's rows,
the chain head and the key that signs anchored heads.

Thin: parse input, call one selector, serialize.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from retention.models import DeletionEvent
from retention.receipts.signed_heads import ALGORITHM
from retention.rest.filters import QueryFilterSerializer
from retention.rest.schema import error_responses
from retention.rest.views import TenantApiView
from retention.selectors.anchors import signing_key
from retention.selectors.evidence import chain_head, receipt_for, row_subjects
from retention.selectors.tenant import tenant_receipt_get


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


def _tenant_receipt(tenant_id: str, receipt_id: str) -> DeletionEvent:
    # Matched as a string so that any malformed id is our JSON 404 too.
    try:
        return tenant_receipt_get(tenant_id=tenant_id, receipt_id=int(receipt_id))
    except (ValueError, DeletionEvent.DoesNotExist):
        raise NotFound("No such receipt.") from None


class RowProofSerializer(serializers.Serializer[Any]):
    key_digest = serializers.CharField(help_text="The row's keyed digest.")
    expires_at = serializers.CharField(help_text="The row's deadline (RFC 3339).")
    index = serializers.IntegerField(help_text="The row's place among its event's rows.")
    path = serializers.ListField(
        child=serializers.CharField(), help_text="Audit path to the event's key_digest."
    )

    class Meta:
        ref_name = "RowProof"


class DeletionReceiptApi(TenantApiView):
    """One receipt in the form ``python -m retention.receipts verify`` reads."""

    class FilterSerializer(QueryFilterSerializer):
        row = serializers.RegexField(
            r"^[0-9a-f]{64}$",
            required=False,
            help_text="A row's key digest: that row's receipt under its per-row page event.",
        )

    class OutputSerializer(InclusionProofSerializer):
        event = serializers.DictField(help_text="The hashed fields of the event.")
        event_hash = serializers.CharField()
        row = RowProofSerializer(required=False, help_text="With `?row=`: the row and its proof.")

        class Meta:
            ref_name = "VerifiableReceipt"

    @extend_schema(
        operation_id="deletions_receipt",
        summary="One receipt, verifiable offline",
        description="Save it as receipt.json; with the chain head (`/deletions/chain/`) "
        "`python -m retention.receipts verify receipt.json chain-head.json` checks it. "
        "With `?row=<key digest>`, the receipt of one row of a per-row page event "
        "(`evidence` `per_row`; its rows: `/deletions/{id}/rows/`).",
        parameters=[
            OpenApiParameter("receipt_id", OpenApiTypes.INT, OpenApiParameter.PATH),
            FilterSerializer,
        ],
        responses={200: OutputSerializer, **error_responses(400, 401, 404, 429)},
        tags=["deletions"],
    )
    def get(self, request: Request, receipt_id: str) -> Response:
        filters = self.FilterSerializer(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        event = _tenant_receipt(self.tenant_id, receipt_id)
        try:
            receipt = receipt_for(event, row=filters.validated_data.get("row"))
        except LookupError:
            raise NotFound("No such row in this receipt.") from None
        return Response(self.OutputSerializer(receipt).data)


class DeletionRowsApi(TenantApiView):
    """The rows a per-row page event stands for: each one event, with its digest and deadline."""

    class FilterSerializer(QueryFilterSerializer):
        """No filter: an unknown parameter is refused, as everywhere."""

    class OutputSerializer(serializers.Serializer[Any]):
        receipt_id = serializers.IntegerField()
        rows = serializers.ListField(
            child=serializers.DictField(),
            help_text="In keyset order: `index`, `key_digest`, `expires_at`. Empty for a "
            "receipt that is not a per-row page event.",
        )

        class Meta:
            ref_name = "ReceiptRows"

    @extend_schema(
        operation_id="deletions_rows",
        summary="The rows of a per-row page receipt",
        description="A class registered with per-row evidence records a page event per "
        "tenant; each of its rows is an event of its own, whose receipt is "
        "`/deletions/{id}/receipt/?row=<key_digest>`.",
        parameters=[OpenApiParameter("receipt_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: OutputSerializer, **error_responses(400, 401, 404, 429)},
        tags=["deletions"],
    )
    def get(self, request: Request, receipt_id: str) -> Response:
        self.FilterSerializer(data=request.query_params.dict()).is_valid(raise_exception=True)
        event = _tenant_receipt(self.tenant_id, receipt_id)
        rows = [
            {"index": s.index, "key_digest": s.key_digest, "expires_at": s.expires_at}
            for s in row_subjects(event)
        ]
        return Response(self.OutputSerializer({"receipt_id": event.pk, "rows": rows}).data)


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
