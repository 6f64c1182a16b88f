"""Who is calling: a tenant holding an API key, or the signed control plane.

Each class answers 401 with a stable ``code`` when the credentials are
present but wrong, and lets DRF answer 401 ``not_authenticated`` when they
are absent (a tenant view says then which scheme it expects:
``no_key_detail``). Key ids are logged, never secrets or keys.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from django.conf import settings as django_settings
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request
from rest_framework_api_key.permissions import KeyParser

from retention.conf import settings
from retention.rest import signing
from retention.rest.models import TenantAPIKey
from retention.rest.services import SignatureReplayed, request_signature_consume

logger = logging.getLogger("retention.api")


@dataclass(frozen=True, slots=True)
class TenantPrincipal:
    """``request.user`` on tenant endpoints: the tenant a valid key belongs to."""

    tenant_id: str
    key_prefix: str

    is_authenticated: ClassVar[bool] = True
    is_anonymous: ClassVar[bool] = False

    def __str__(self) -> str:
        return f"tenant {self.tenant_id} (key {self.key_prefix})"


@dataclass(frozen=True, slots=True)
class ControlPlanePrincipal:
    """``request.user`` on the control plane: the signing key that was used."""

    key_id: str

    is_authenticated: ClassVar[bool] = True
    is_anonymous: ClassVar[bool] = False

    def __str__(self) -> str:
        return f"control plane (key {self.key_id})"


class TenantAPIKeyAuthentication(BaseAuthentication):
    """``Authorization: Api-Key <prefix>.<secret>``."""

    keyword = "Api-Key"
    key_parser = KeyParser()

    def authenticate(self, request: Request) -> tuple[TenantPrincipal, TenantAPIKey] | None:
        raw = self.key_parser.get(request)
        if raw is None:
            return None
        prefix, _, _ = raw.partition(".")
        key = TenantAPIKey.objects.filter(prefix=prefix).first() if prefix else None
        if key is None or not key.is_valid(raw):
            raise AuthenticationFailed("Invalid API key.", code="api_key_invalid")
        if key.revoked:
            raise AuthenticationFailed("This API key was revoked.", code="api_key_revoked")
        if key.has_expired:
            raise AuthenticationFailed("This API key has expired.", code="api_key_expired")
        return TenantPrincipal(tenant_id=key.tenant_id, key_prefix=key.prefix), key

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


EXPECTED_SCHEME = "tenant endpoints expect `Authorization: Api-Key <key>`"
# An HTTP auth scheme is a token; anything else is not echoed back.
_SCHEME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,40}")


def no_key_detail(request: Request) -> str:
    """Why a tenant request carried no API key, naming the scheme it should use.

    Never echoes a credential: of the Authorization header only its scheme,
    and only when it looks like one.
    """
    if getattr(django_settings, "API_KEY_CUSTOM_HEADER", None) is not None:
        return "No API key was provided in the header the operator configured."
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header.strip():
        return f"No credentials were provided: {EXPECTED_SCHEME}."
    scheme, _, key = header.strip().partition(" ")
    if scheme.lower() == TenantAPIKeyAuthentication.keyword.lower() and not key.strip():
        return f"The Authorization header holds no key: {EXPECTED_SCHEME}."
    named = f"the {scheme} scheme" if _SCHEME.fullmatch(scheme) else "another scheme"
    return f"The Authorization header uses {named}; {EXPECTED_SCHEME}."


@dataclass(frozen=True, slots=True)
class SignedRequest:
    key_id: str
    signed_at: datetime


class SignedRequestAuthentication(BaseAuthentication):
    """HMAC-SHA256 over method, path, timestamp and body digest (see ``signing``).

    A valid signature is recorded before the view runs, so the exact same
    request cannot be accepted twice within the freshness window.
    """

    scheme = "Lethe-HMAC-SHA256"

    def authenticate(self, request: Request) -> tuple[ControlPlanePrincipal, SignedRequest]:
        headers = {
            name: request.headers.get(name, "")
            for name in (signing.KEY_ID_HEADER, signing.TIMESTAMP_HEADER, signing.SIGNATURE_HEADER)
        }
        key_id = headers[signing.KEY_ID_HEADER]
        logged_id = key_id[:100]
        now = timezone.now()
        try:
            keys = settings.HMAC_KEYS
        except ValueError:
            # Startup checks report it (retention.E006); here it means no valid key.
            logger.error("RETENTION_HMAC_KEYS cannot be read; refusing every signed request")
            keys = {}
        try:
            signed_at = signing.verify(
                headers=headers,
                method=request.method or "",
                path=request.path,
                body=request.body,
                keys=keys,
                now=now,
                window_seconds=settings.SIGNATURE_WINDOW_SECONDS,
            )
            request_signature_consume(
                digest=signing.replay_digest(
                    key_id=key_id, signature=headers[signing.SIGNATURE_HEADER]
                ),
                key_id=logged_id,
                signed_at=signed_at,
                now=now,
            )
        except (signing.SignatureError, SignatureReplayed) as exc:
            logger.warning("signed request refused (%s): key_id=%r", exc.code, logged_id)
            raise AuthenticationFailed(str(exc), code=exc.code) from None
        logger.info("signed request accepted: key_id=%r", logged_id)
        return ControlPlanePrincipal(key_id=key_id), SignedRequest(key_id, signed_at)

    def authenticate_header(self, request: Request) -> str:
        return self.scheme
