"""Base views: each names its own authentication, permissions, throttles,
renderers and error handler, so the API behaves the same whatever the host
project's REST_FRAMEWORK defaults are."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from drf_spectacular.views import SpectacularAPIView
from rest_framework.exceptions import NotAcceptable, NotAuthenticated
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.views import APIView

from retention.rest.authentication import (
    SignedRequestAuthentication,
    TenantAPIKeyAuthentication,
    TenantPrincipal,
    no_key_detail,
)
from retention.rest.exceptions import exception_handler
from retention.rest.permissions import IsControlPlane, IsTenant
from retention.rest.schema import RetentionAutoSchema
from retention.rest.throttling import TenantRateThrottle


class StrictContentNegotiation(DefaultContentNegotiation):
    """An unknown or empty ``?format=`` is 406 Not Acceptable (DRF answers 404
    for an unknown one and ignores an empty one)."""

    def select_renderer(
        self, request: Any, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        name = self.settings.URL_FORMAT_OVERRIDE
        if name and request.query_params.get(name) == "":
            raise NotAcceptable(f"?{name}= is empty.")
        chosen: tuple[BaseRenderer, str] = super().select_renderer(
            request, renderers, format_suffix
        )
        return chosen

    def filter_renderers(
        self, renderers: Iterable[BaseRenderer], format: str
    ) -> list[BaseRenderer]:
        matching = [renderer for renderer in renderers if renderer.format == format]
        if not matching:
            known = ", ".join(renderer.format for renderer in renderers)
            raise NotAcceptable(f"Unknown format {format!r}; available: {known}.")
        return matching


class JsonErrorsMixin(APIView):
    """Errors in the API's JSON body, also for a request refused before a renderer was chosen."""

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Any]:
        return exception_handler

    def raise_uncaught_exception(self, exc: Exception) -> NoReturn:
        # DRF's DEBUG path reads the chosen renderer; a request refused while
        # choosing one (its query string unreadable) has none.
        if not hasattr(self.request, "accepted_renderer"):
            self.request.accepted_renderer = JSONRenderer()
            self.request.accepted_media_type = JSONRenderer.media_type
        super().raise_uncaught_exception(exc)


class RetentionApiView(JsonErrorsMixin, APIView):
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser]
    content_negotiation_class = StrictContentNegotiation
    schema = RetentionAutoSchema()


class TenantApiView(RetentionApiView):
    """A tenant endpoint: ``Authorization: Api-Key <key>``, throttled per tenant.

    ``self.tenant_id`` is the caller's tenant; pass it to a tenant-scoped
    selector, never filter by hand.
    """

    authentication_classes = [TenantAPIKeyAuthentication]
    permission_classes = [IsTenant]
    throttle_classes = [TenantRateThrottle]

    def permission_denied(
        self, request: Any, message: str | None = None, code: str | None = None
    ) -> NoReturn:
        # DRF's "Authentication credentials were not provided." does not say
        # which credentials: a caller sending `Bearer <key>` learns nothing.
        if request.authenticators and not request.successful_authenticator:
            raise NotAuthenticated(no_key_detail(request))
        super().permission_denied(request, message=message, code=code)

    @property
    def tenant_id(self) -> str:
        user = self.request.user
        assert isinstance(user, TenantPrincipal), "permission IsTenant admits tenants only"
        return user.tenant_id


class ControlPlaneApiView(RetentionApiView):
    """An operator endpoint: HMAC-signed requests only (see ``retention.rest.signing``)."""

    authentication_classes = [SignedRequestAuthentication]
    permission_classes = [IsControlPlane]


class SchemaApiView(JsonErrorsMixin, SpectacularAPIView):
    """drf-spectacular's schema view, refusing a bad query string as the API does:
    JSON 400 ``too_many_parameters``, not a 500 (DEBUG) or Django's HTML 400.
    Mount it instead of ``SpectacularAPIView``."""

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        # An error is JSON whatever schema format was asked for.
        if getattr(response, "exception", False):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
