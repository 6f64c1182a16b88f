"""Mounted under ``api/v1/`` by the project, beside ``retention.rest.urls``."""

from __future__ import annotations

from django.urls import path

from uploads.apis import UploadCreateApi, UploadRetentionApi

app_name = "uploads_api"

urlpatterns = [
    path("uploads/", UploadCreateApi.as_view(), name="upload-create"),
    # A plain string, so a malformed id is a JSON 404 from the view, not Django's HTML one.
    path("uploads/<str:id>/retention/", UploadRetentionApi.as_view(), name="upload-retention"),
]
