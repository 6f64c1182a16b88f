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


@register("retention")
def check_numbers(**kwargs: Any) -> list[Error]:
    problems = []
    try:
        if settings.LEASE_SECONDS <= 0 or settings.RUN_LEASE_SECONDS <= 0:
            problems.append("RETENTION_LEASE_SECONDS and RETENTION_RUN_LEASE_SECONDS must be > 0")
        if settings.MAX_ATTEMPTS < 1:
            problems.append("RETENTION_MAX_ATTEMPTS must be >= 1")
        if settings.RETRY_BASE_SECONDS < 0 or settings.RETRY_MAX_SECONDS < 0:
            problems.append("RETENTION_RETRY_*_SECONDS must be >= 0")
        settings.DRY_RUN_MAX_AGE  # noqa: B018  (parses the value)
    except (TypeError, ValueError) as exc:
        problems.append(f"a RETENTION_* number cannot be parsed: {exc}")
    return [
        Error(p, hint="Fix the setting in your settings module.", id="retention.E005")
        for p in problems
    ]
