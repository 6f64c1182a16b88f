"""Per-tenant request throttling, counted in Django's default cache."""

from __future__ import annotations

import time
from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from retention.conf import settings


class TenantRateThrottle(SimpleRateThrottle):
    """``RETENTION_API_THROTTLE_RATE`` requests per tenant, across all its keys."""

    scope = "retention_tenant"

    def get_rate(self) -> str:
        # DRF's default reads THROTTLE_RATES once, at import; this reads the
        # setting per request, so override_settings and reloads take effect.
        return settings.API_THROTTLE_RATE

    def timer(self) -> float:
        # DRF's ``timer = time.time`` is captured when its module is first
        # imported; under freezegun that is a plain function, which then binds
        # to the instance and fails. Looking time.time up per call is immune.
        return time.time()

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        tenant_id = getattr(request.user, "tenant_id", None)
        if not tenant_id:
            return None
        return self.cache_format % {"scope": self.scope, "ident": tenant_id}
