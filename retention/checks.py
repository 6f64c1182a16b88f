"""System checks for RETENTION_* and the storages the engine deletes from."""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string

from retention.conf import settings

S3_BACKENDS = {"storages.backends.s3.S3Storage", "storages.backends.s3boto3.S3Boto3Storage"}


@register("retention")
def check_storage_aliases(**kwargs: Any) -> list[Error]:
    errors: list[Error] = []
    storages = getattr(django_settings, "STORAGES", {})
    for alias, path in settings.STORAGE_ADAPTERS.items():
        if alias not in storages:
            errors.append(
                Error(
                    f"RETENTION_STORAGE_ADAPTERS names the storage alias {alias!r}, "
                    "which is not in STORAGES.",
                    hint=f"Known aliases: {', '.join(sorted(storages)) or 'none'}.",
                    id="retention.E001",
                )
            )
        try:
            if not isinstance(path, str):
                raise ImportError(f"expected a dotted path string, got {type(path).__name__}")
            import_string(path)
        except ImportError as exc:
            errors.append(
                Error(
                    f"RETENTION_STORAGE_ADAPTERS[{alias!r}] cannot be imported: {exc}",
                    hint="Give the dotted path of a callable(alias, storage) -> adapter.",
                    id="retention.E004",
                )
            )
    return errors


@register("retention")
def check_digest_key(**kwargs: Any) -> list[Error]:
    if settings.DIGEST_KEY:
        return []
    return [
        Error(
            "RETENTION_DIGEST_KEY is not set: deletion events cannot carry a keyed digest "
            "of object keys.",
            hint="Set RETENTION_DIGEST_KEY to a long random secret and never change it.",
            id="retention.E002",
        )
    ]


@register("retention")
def check_s3_storages(**kwargs: Any) -> list[Error]:
    errors: list[Error] = []
    for alias, conf in getattr(django_settings, "STORAGES", {}).items():
        if conf.get("BACKEND") not in S3_BACKENDS:
            continue
        options = conf.get("OPTIONS", {})
        bucket = options.get("bucket_name") or getattr(
            django_settings, "AWS_STORAGE_BUCKET_NAME", None
        )
        if not bucket:
            errors.append(
                Error(
                    f"Storage {alias!r} uses S3 but names no bucket.",
                    hint="Set OPTIONS['bucket_name'] or AWS_STORAGE_BUCKET_NAME.",
                    id="retention.E003",
                )
            )
        has_key = options.get("access_key") or getattr(django_settings, "AWS_ACCESS_KEY_ID", None)
        has_secret = options.get("secret_key") or getattr(
            django_settings, "AWS_SECRET_ACCESS_KEY", None
        )
        if bool(has_key) != bool(has_secret):
            errors.append(
                Error(
                    f"Storage {alias!r}: an S3 access key is set without its secret, "
                    "or the reverse.",
                    hint="Set both access_key and secret_key, or neither (instance roles).",
                    id="retention.E003",
                )
            )
    return errors


_POSITIVE = (
    "LEASE_SECONDS",
    "RUN_LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "REPORT_TOP_TENANTS",
    "SIGNATURE_WINDOW_SECONDS",
)
_NON_NEGATIVE = ("RETRY_BASE_SECONDS", "RETRY_MAX_SECONDS", "RETRY_WAIT_IN_RUN_SECONDS")


@register("retention")
def check_numbers(**kwargs: Any) -> list[Error]:
    problems = []
    for name in (*_POSITIVE, *_NON_NEGATIVE):
        try:
            value = getattr(settings, name)
        except (TypeError, ValueError) as exc:
            problems.append(f"RETENTION_{name} cannot be read as a number: {exc}")
            continue
        if name in _POSITIVE and value <= 0:
            problems.append(f"RETENTION_{name} must be greater than 0 (it is {value}).")
        if name in _NON_NEGATIVE and value < 0:
            problems.append(f"RETENTION_{name} must not be negative (it is {value}).")
    try:
        if settings.DRY_RUN_MAX_AGE.total_seconds() <= 0:
            problems.append("RETENTION_DRY_RUN_MAX_AGE must be positive.")
    except (TypeError, ValueError) as exc:
        problems.append(f"RETENTION_DRY_RUN_MAX_AGE cannot be read as a duration: {exc}")
    return [
        Error(p, hint="Fix the setting in your settings module.", id="retention.E005")
        for p in problems
    ]


MIN_HMAC_SECRET_LENGTH = 32


@register("retention")
def check_hmac_keys(**kwargs: Any) -> list[Error]:
    try:
        keys = settings.HMAC_KEYS
    except ValueError as exc:
        return [
            Error(
                f"RETENTION_HMAC_KEYS cannot be read: {exc}.",
                hint="Use 'keyid:secret' entries separated by commas, each key id once, "
                "e.g. 'ops-2026a:<secret>,ops-2026b:<secret>'.",
                id="retention.E006",
            )
        ]
    return [
        Error(
            f"RETENTION_HMAC_KEYS: the secret of key {key_id!r} has {len(secret)} characters; "
            f"at least {MIN_HMAC_SECRET_LENGTH} are needed.",
            hint="Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            id="retention.E007",
        )
        for key_id, secret in keys.items()
        if len(secret) < MIN_HMAC_SECRET_LENGTH
    ]


@register("retention")
def check_api_throttle_rate(**kwargs: Any) -> list[Error]:
    from retention.rest.throttling import TenantRateThrottle

    rate = settings.API_THROTTLE_RATE
    try:
        requests, duration = TenantRateThrottle().parse_rate(rate)
        valid = bool(requests and requests > 0 and duration)
    except (ValueError, KeyError, TypeError, IndexError):
        valid = False
    if valid:
        return []
    return [
        Error(
            f"RETENTION_API_THROTTLE_RATE {rate!r} is not a rate.",
            hint="Give requests per period, e.g. '120/min', '10/s', '5000/hour', '100000/day'.",
            id="retention.E008",
        )
    ]


@register("retention")
def check_metrics_allowed_ips(**kwargs: Any) -> list[Error]:
    try:
        _ = settings.METRICS_ALLOWED_IPS
    except ValueError as exc:
        return [
            Error(
                f"RETENTION_METRICS_ALLOWED_IPS cannot be read: {exc}.",
                hint="Give addresses or CIDR networks separated by commas, "
                "e.g. '127.0.0.1,10.0.0.0/8,::1'; a network's host bits must be zero.",
                id="retention.E009",
            )
        ]
    return []
