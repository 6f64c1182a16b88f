from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerView

from retention.metrics import metrics_view
from retention.rest.views import SchemaApiView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("retention.rest.urls")),
    path("api/v1/", include("uploads.urls")),
    path("api/v1/schema/", SchemaApiView.as_view(), name="schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    # Prometheus; answers only allowed addresses or the bearer token (RETENTION_METRICS_*).
    path("metrics/", metrics_view, name="retention-metrics"),
]
