"""Mount under ``api/v1/``: ``path("api/v1/", include("retention.rest.urls"))``."""

from __future__ import annotations

from django.urls import path

from retention.rest.apis import (
    ChainHeadApi,
    DeletionListApi,
    DeletionReceiptApi,
    DeletionReportApi,
    RunStartApi,
)

app_name = "retention_api"

urlpatterns = [
    path("deletions/", DeletionListApi.as_view(), name="deletion-list"),
    path("deletions/report/", DeletionReportApi.as_view(), name="deletion-report"),
    path("deletions/chain/", ChainHeadApi.as_view(), name="deletion-chain"),
    path(
        "deletions/<str:receipt_id>/receipt/", DeletionReceiptApi.as_view(), name="deletion-receipt"
    ),
    path("runs/", RunStartApi.as_view(), name="run-start"),
]
