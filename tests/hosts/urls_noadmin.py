from __future__ import annotations

from django.urls import include, path

from retention.metrics import metrics_view

urlpatterns = [
    path("api/v1/", include("retention.rest.urls")),
    path("api/v1/", include("uploads.urls")),
    path("metrics/", metrics_view, name="retention-metrics"),
]
