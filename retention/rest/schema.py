"""OpenAPI descriptions of the API's authentication and errors (drf-spectacular).

Importing this module registers the authentication extensions; the API
modules import it for ``error_responses``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

from retention.rest import signing
from retention.rest.exceptions import ErrorSerializer

_DESCRIPTIONS = {
    400: "Invalid input (`invalid`, with `field_errors`), a cursor the API did not write "
    "(`invalid_cursor`), more than 1,000 query parameters (`too_many_parameters`) or form "
    "fields (`too_many_fields`), too many file parts (`too_many_files`), or a refusal with "
    "its own code.",
    401: "No credentials (`not_authenticated`; tenant endpoints expect `Authorization: "
    "Api-Key <key>`, and say so, with `WWW-Authenticate: Api-Key`, to a request with "
    "another scheme or none) or bad ones (`api_key_invalid`, `api_key_revoked`, "
    "`api_key_expired`, `signature_*`).",
    404: "Unknown id, or another tenant's (`not_found`).",
    406: "Unknown `format` or unsatisfiable `Accept` (`not_acceptable`).",
    413: "The body, files aside, is larger than the server accepts (`request_too_large`).",
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


class RetentionAutoSchema(AutoSchema):
    """The rules every endpoint shares, stated on each operation: any query
    string can be refused (400: too many parameters), any body can be too
    large (413), and a request serializer marked ``refuses_unknown_keys``
    admits no other key."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        error = {"schema": self.resolve_serializer(ErrorSerializer, "response").ref}
        responses = operation.setdefault("responses", {})
        for code in (400, 413) if "requestBody" in operation else (400,):
            responses.setdefault(
                str(code),
                {"content": {"application/json": error}, "description": _DESCRIPTIONS[code]},
            )
        return operation

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        mapped: dict[str, Any] = super()._map_basic_serializer(  # type: ignore[no-untyped-call]
            serializer, direction
        )
        if direction == "request" and getattr(serializer, "refuses_unknown_keys", False):
            mapped["additionalProperties"] = False
        return mapped
