"""A host that serves no REST API: no DRF app, no retention.rest, no uploads API."""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

API_APPS = {
    "rest_framework",
    "rest_framework_api_key",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "retention.rest",
    # The example host app: its endpoints are built on retention.rest.
    "uploads",
}
INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in API_APPS]
ROOT_URLCONF = "tests.hosts.urls_nodrf"
# The example project's exemptions name models of apps removed here; an unknown
# label is an error (retention.E035).
RETENTION_EXEMPT_MODELS = {
    label: reason
    for label, reason in RETENTION_EXEMPT_MODELS.items()  # noqa: F405
    if label.split(".")[0] not in {"rest_framework_api_key", "uploads"}
}
