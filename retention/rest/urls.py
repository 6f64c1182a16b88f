"""Mount under ``api/v1/``: ``path("api/v1/", include("retention.rest.urls"))``.

Needs ``retention.rest`` in INSTALLED_APPS. Without it the URLconf still
loads, with no endpoint, and system check retention.E015 says what to add.
"""

from __future__ import annotations

from django.apps import apps
from django.urls import URLPattern, path

app_name = "retention_api"

urlpatterns: list[URLPattern] = []

if apps.is_installed("retention.rest"):
    from retention.rest.control import RunDetailApi, RunStartApi
    from retention.rest.deletions import DeletionListApi, DeletionReportApi
    from retention.rest.erasures import (
        ErasureCertificateApi,
        ErasureCreateApi,
        ErasureDetailApi,
    )
    from retention.rest.proofs import (
        ChainHeadApi,
        ChainKeyApi,
        DeletionReceiptApi,
        DeletionRowsApi,
    )

    urlpatterns = [
        path("deletions/", DeletionListApi.as_view(), name="deletion-list"),
        path("deletions/report/", DeletionReportApi.as_view(), name="deletion-report"),
        path("deletions/chain/", ChainHeadApi.as_view(), name="deletion-chain"),
        path("deletions/chain/key/", ChainKeyApi.as_view(), name="deletion-chain-key"),
        path(
            "deletions/<str:receipt_id>/receipt/",
            DeletionReceiptApi.as_view(),
            name="deletion-receipt",
        ),
        path("deletions/<str:receipt_id>/rows/", DeletionRowsApi.as_view(), name="deletion-rows"),
        path("erasures/", ErasureCreateApi.as_view(), name="erasure-create"),
        path("erasures/<str:erasure_id>/", ErasureDetailApi.as_view(), name="erasure-detail"),
        path(
            "erasures/<str:erasure_id>/certificate/",
            ErasureCertificateApi.as_view(),
            name="erasure-certificate",
        ),
        path("runs/", RunStartApi.as_view(), name="run-start"),
        path("runs/<str:run_id>/", RunDetailApi.as_view(), name="run-detail"),
    ]
