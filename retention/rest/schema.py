"""OpenAPI descriptions of the API's authentication and errors (drf-spectacular).

Importing this module registers the authentication extensions; the API
modules import it for ``error_responses``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse

from retention.rest import signing
from retention.rest.exceptions import ErrorSerializer

_DESCRIPTIONS = {
    400: "Invalid input (`invalid`, with `field_errors`) or a refusal with its own code.",
    401: "No credentials (`not_authenticated`) or bad ones (`api_key_invalid`, "
    "`api_key_revoked`, `api_key_expired`, `signature_*`).",
    404: "Unknown id, or another tenant's (`not_found`).",
    406: "Unknown `format` or unsatisfiable `Accept` (`not_acceptable`).",
    415: "Unsupported request content type (`unsupported_media_type`).",
    429: "Too many requests for this tenant (`throttled`); see `Retry-After`.",
    503: "Recorded but not queued (`queue_unavailable`): the run was closed; retry.",
}


def error_responses(*statuses: int, media_type: str | None = None) -> dict[Any, OpenApiResponse]:
    """Error responses for ``extend_schema``; give ``media_type`` where a view
    has several renderers (errors are JSON whatever was negotiated)."""
    return {
        ((code, media_type) if media_type else code): OpenApiResponse(
            response=ErrorSerializer, description=_DESCRIPTIONS[code]
        )
        for code in statuses
    }


# drf-spectacular registers each extension from an untyped __init_subclass__.
class TenantAPIKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "retention.rest.authentication.TenantAPIKeyAuthentication"
    name = "TenantApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <key>`; keys are issued per tenant and shown once.",
        }


class SignedRequestScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "retention.rest.authentication.SignedRequestAuthentication"
    name = ["LetheKeyId", "LetheTimestamp", "LetheSignature"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, Any]]:
        return [
            {
                "type": "apiKey",
                "in": "header",
                "name": signing.KEY_ID_HEADER,
                "description": "Id of a key in RETENTION_HMAC_KEYS.",
            },
            {
                "type": "apiKey",
                "in": "header",
                "name": signing.TIMESTAMP_HEADER,
                "description": "Unix seconds; refused when more than 300 s from the server clock.",
            },
            {
                "type": "apiKey",
                "in": "header",
                "name": signing.SIGNATURE_HEADER,
                "description": "Hex HMAC-SHA256 of `METHOD\\nPATH\\nTIMESTAMP\\nSHA256_HEX(BODY)`.",
            },
        ]
