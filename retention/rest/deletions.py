"""A tenant's deletions: its receipts (JSON pages or CSV) and its report.

The proofs behind a receipt are ``proofs``; starting and following runs, ``control``.

Thin: parse input, call one selector or service, serialize.
"""

from __future__ import annotations

from typing import Any, cast

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from retention.conf import settings
from retention.models import Disposition, EventKind, EventOutcome, data_class_validator
from retention.rest.csv import CSVStreamMixin, CSVStreamRenderer, stream_csv
from retention.rest.filters import PeriodFilterSerializer
from retention.rest.pagination import (
    MAX_PAGE_SIZE,
    POSITION,
    ReceiptCursorPagination,
    commit_ordered,
    page_serializer,
)
from retention.rest.proofs import InclusionProofSerializer
from retention.rest.schema import error_responses
from retention.rest.views import TenantApiView
from retention.selectors.evidence import batch_leaves, receipt_for
from retention.selectors.tenant import (
    RECEIPT_FIELDS,
    RECEIPT_OUTCOMES,
    deletion_receipt_rows,
    deletion_receipts,
    deletion_report,
)


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
    "evidence",
)
assert len(CSV_HEADER) == len(RECEIPT_FIELDS)


class DeletionListApi(CSVStreamMixin, TenantApiView):
    renderer_classes = [JSONRenderer, CSVStreamRenderer]

    class FilterSerializer(PeriodFilterSerializer):
        data_class = serializers.CharField(
            required=False, max_length=100, validators=[data_class_validator]
        )
        # Read by the paginator; here so the schema states them and a bad
        # page_size is refused rather than replaced by the default.
        cursor = serializers.CharField(
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            help_text="Opaque: copy it from a page's `next` or `previous` link. A cursor "
            "the API did not write is refused (`invalid_cursor`).",
        )
        page_size = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=MAX_PAGE_SIZE,
            help_text=f"Receipts a page, 1 to {MAX_PAGE_SIZE} (default "
            f"{ReceiptCursorPagination.page_size}). With `format=csv`, `page_size` or "
            "`cursor` makes the CSV one page, in the JSON's order, with its `next` and "
            "`prev` links in a `Link` header; without them the CSV holds every receipt.",
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
        evidence = serializers.CharField(
            help_text="`per_row` when each of the page's rows is an event of its own "
            "(`/deletions/{id}/rows/`, and a row's receipt `?row=`); else empty."
        )
        run_id = serializers.UUIDField(allow_null=True)
        data_class = serializers.CharField()
        policy = serializers.SerializerMethodField()
        disposition = serializers.ChoiceField(
            choices=Disposition.choices,
            help_text="What the policy version does at the deadline: `delete`, or `redact` "
            "(rows of a registered model kept with their personal fields replaced).",
        )
        outcome = serializers.ChoiceField(
            choices=[c for c in EventOutcome.choices if c[0] in RECEIPT_OUTCOMES],
            help_text=(
                "`deleted`; `already_absent` when the object was gone already at deletion; "
                "`redacted`: the row is kept, its personal fields replaced (disposition "
                "`redact`), never a deletion; `missing`: not found at deletion time "
                "(reconciliation found it gone before any deletion run), never a deletion."
            ),
        )
        expired_at = serializers.DateTimeField(source="expires_at")
        deleted_at = serializers.DateTimeField(
            source="occurred_at",
            help_text="When it was deleted, found absent or redacted (the event's time).",
        )
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
        description="Receipts of your objects and rows that are gone, and of your rows that "
        "were redacted (`outcome` `redacted`), in the order they were committed, "
        "cursor-paginated. `?format=csv` (or `Accept: text/csv`) streams every matching "
        "receipt as CSV, by deletion time; with `cursor` or `page_size`, one page of them, "
        "as the JSON page, its links in a `Link` header.",
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
        period = dict(filters.validated_data)
        paged = {"cursor", "page_size"} & set(period)
        for name in paged:
            del period[name]
        paginator = ReceiptCursorPagination()
        if isinstance(request.accepted_renderer, CSVStreamRenderer):
            stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
            filename = f"deletion-receipts-{stamp}.csv"
            if not paged:
                rows = deletion_receipt_rows(tenant_id=self.tenant_id, **period)
                return stream_csv(header=CSV_HEADER, rows=rows, filename=filename)
            return self._csv_page(paginator, period, filename)
        receipts = deletion_receipts(tenant_id=self.tenant_id, **period).select_related("batch")
        page = paginator.paginate_queryset(receipts, request, view=self)
        data = self.OutputSerializer(page, many=True, context={"batch_leaves": {}}).data
        return paginator.get_paginated_response(data)

    def _csv_page(
        self, paginator: ReceiptCursorPagination, period: dict[str, Any], filename: str
    ) -> Any:
        """One page as CSV: the rows the JSON page of the same cursor holds."""
        receipts = deletion_receipts(tenant_id=self.tenant_id, **period)
        page = paginator.paginate_queryset(receipts.only("id"), self.request, view=self) or []
        rows = (
            commit_ordered(receipts.filter(id__in=[event.pk for event in page]))
            .order_by(POSITION)
            .values_list(*RECEIPT_FIELDS)
        )
        response = stream_csv(header=CSV_HEADER, rows=list(rows), filename=filename)
        links = [
            f'<{url}>; rel="{rel}"'
            for url, rel in (
                (paginator.get_next_link(), "next"),
                (paginator.get_previous_link(), "prev"),
            )
            if url
        ]
        if links:
            response["Link"] = ", ".join(links)
        return response


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
    redacted = serializers.IntegerField(
        help_text="Rows redacted (disposition `redact`): kept, their personal fields "
        "replaced; not counted as deleted."
    )
    on_time = serializers.IntegerField(
        help_text="Deleted, already absent or redacted within the promise after expiry."
    )
    late = serializers.IntegerField(help_text="Deleted, already absent or redacted later.")
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
        description="Receipts deleted or redacted in the window (`since` inclusive, `until` "
        "exclusive) per data class, on time or late against the operator's promise "
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
