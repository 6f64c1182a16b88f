"""System checks for RETENTION_* and the storages the engine deletes from."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from django.apps import apps as django_apps
from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.urls import URLResolver, get_resolver
from django.utils.module_loading import import_string

from retention.conf import settings
from retention.engine.guard import DEFAULT_SIGNAL, OLD_DEFAULT_SIGNAL, broker_kind

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


@register("retention")
def check_foreground_guard(**kwargs: Any) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    try:
        path = settings.FOREGROUND_GUARD
        if path and not callable(import_string(path)):
            raise ImportError(f"{path} is not callable")
    except (ImportError, TypeError) as exc:
        path = None
        messages.append(
            Error(
                f"RETENTION_FOREGROUND_GUARD cannot be used: {exc}. The guard fails closed: "
                "nothing is dispatched while it cannot be read.",
                hint="Give the dotted path of a callable(*, now) -> "
                "retention.engine.guard.GuardReading, "
                f"e.g. {DEFAULT_SIGNAL!r}, or None to turn the guard off.",
                id="retention.E010",
            )
        )
    try:
        budget = settings.FOREGROUND_BUDGET_SECONDS
        problem = None if budget > 0 else f"must be greater than 0 (it is {budget:g})"
    except (TypeError, ValueError) as exc:
        problem = f"cannot be read as a number: {exc}"
    if problem:
        messages.append(
            Error(
                f"RETENTION_FOREGROUND_BUDGET_SECONDS {problem}.",
                hint="Give the seconds the oldest foreground task may wait, e.g. 30.",
                id="retention.E011",
            )
        )
    queue = settings.FOREGROUND_QUEUE
    if queue and path in (DEFAULT_SIGNAL, OLD_DEFAULT_SIGNAL):
        try:
            kind, label = broker_kind()
        except ImportError as exc:
            kind, label = "unsupported", f"configured ({exc})"
        if kind == "unsupported":
            messages.append(
                Warning(
                    f"RETENTION_FOREGROUND_QUEUE is {queue!r}, but the foreground guard cannot "
                    f"read queues on the {label} broker: dispatch is never held back.",
                    hint="Use django-q2's ORM or Redis broker, or point "
                    "RETENTION_FOREGROUND_GUARD at a signal of your own.",
                    id="retention.W002",
                )
            )
    return messages


@register("retention")
def check_storage_rate_limits(**kwargs: Any) -> list[Error]:
    try:
        limits = settings.STORAGE_RATE_LIMITS
    except ValueError as exc:
        return [
            Error(
                f"RETENTION_STORAGE_RATE_LIMITS cannot be read: {exc}.",
                hint="Map storage aliases to deletes per second, e.g. {'s3': 500}.",
                id="retention.E012",
            )
        ]
    storages = getattr(django_settings, "STORAGES", {})
    return [
        Error(
            f"RETENTION_STORAGE_RATE_LIMITS names the storage alias {alias!r}, "
            "which is not in STORAGES: its limit would never apply.",
            hint=f"Known aliases: {', '.join(sorted(storages)) or 'none'}.",
            id="retention.E012",
        )
        for alias in limits
        if alias not in storages
    ]


@register("retention")
def check_rate_gate_feedback(**kwargs: Any) -> list[Error]:
    problems = []
    try:
        factor = settings.GATE_MIN_FACTOR
        if not 0 < factor <= 1:
            problems.append(f"RETENTION_GATE_MIN_FACTOR must be in (0, 1] (it is {factor:g}).")
    except (TypeError, ValueError) as exc:
        problems.append(f"RETENTION_GATE_MIN_FACTOR cannot be read as a number: {exc}")
    try:
        recovery = settings.GATE_RECOVERY_SECONDS
        if not 0 < recovery < float("inf"):
            problems.append(
                f"RETENTION_GATE_RECOVERY_SECONDS must be greater than 0 (it is {recovery:g})."
            )
    except (TypeError, ValueError) as exc:
        problems.append(f"RETENTION_GATE_RECOVERY_SECONDS cannot be read as a number: {exc}")
    return [
        Error(
            p,
            hint="Throttling halves a rate gate down to GATE_MIN_FACTOR of its rate "
            "(default 0.05); it recovers over GATE_RECOVERY_SECONDS (default 60).",
            id="retention.E013",
        )
        for p in problems
    ]


@register("retention")
def check_breaker(**kwargs: Any) -> list[Error]:
    problems = []
    try:
        _ = settings.BREAKER_ENABLED
    except ValueError as exc:
        problems.append(f"RETENTION_BREAKER_ENABLED cannot be read: {exc}.")
    for name, low, high in (
        ("BREAKER_MAX_FRACTION", 0.0, 1.0),
        ("BREAKER_MAX_MULTIPLE", 0.0, math.inf),
    ):
        try:
            value = getattr(settings, name)
        except (TypeError, ValueError) as exc:
            problems.append(f"RETENTION_{name} cannot be read as a number: {exc}")
            continue
        if not low < value <= high:
            bound = f"in (0, {high:g}]" if high < math.inf else "greater than 0"
            problems.append(f"RETENTION_{name} must be {bound} (it is {value:g}).")
    try:
        count = settings.BREAKER_MIN_COUNT
        if count < 0:
            problems.append(f"RETENTION_BREAKER_MIN_COUNT must not be negative (it is {count}).")
    except (TypeError, ValueError) as exc:
        problems.append(f"RETENTION_BREAKER_MIN_COUNT cannot be read as a number: {exc}")
    return [
        Error(
            p,
            hint="The volume breaker trips when a run would dispose of at least "
            "BREAKER_MIN_COUNT (default 1000) and more than BREAKER_MAX_FRACTION (0.25) of a "
            "class, or more than BREAKER_MAX_MULTIPLE (10) times its median day; "
            "RETENTION_BREAKER_ENABLED takes True/False, or '1'/'0', 'true'/'false'.",
            id="retention.E028",
        )
        for p in problems
    ]


@register("retention")
def check_queued_runs(**kwargs: Any) -> list[CheckMessage]:
    from croniter import croniter
    from django_q.conf import Conf

    problems: list[str] = []
    for name, cron in (
        ("SCHEDULE_CRON", settings.SCHEDULE_CRON),
        ("RECONCILE_CRON", settings.RECONCILE_CRON),
    ):
        if not croniter.is_valid(cron):
            problems.append(f"RETENTION_{name} {cron!r} is not a valid cron expression.")
    for name, minimum in (
        ("MAX_BATCHES_IN_FLIGHT", 1),
        ("DISPATCHER_LEASE_SECONDS", 1),
    ):
        try:
            value = getattr(settings, name)
        except (TypeError, ValueError) as exc:
            problems.append(f"RETENTION_{name} cannot be read as a number: {exc}")
            continue
        if not value >= minimum:
            problems.append(f"RETENTION_{name} must be at least {minimum:g} (it is {value:g}).")
    messages: list[CheckMessage] = [
        Error(
            p,
            hint="See docs/reference.md for what each setting means.",
            id="retention.E014",
        )
        for p in problems
    ]
    if str(Conf.TIME_ZONE) != "UTC":
        messages.append(
            Warning(
                f"django-q2 evaluates cron schedules in {Conf.TIME_ZONE}, but "
                "RETENTION_SCHEDULE_CRON and RETENTION_RECONCILE_CRON are meant in UTC: the "
                "nightly sweep and the weekly reconciliation would start at another hour.",
                hint="Set Q_CLUSTER['time_zone'] = 'UTC' (or TIME_ZONE = 'UTC').",
                id="retention.W003",
            )
        )
    return messages


# The API sub-app, as the host adds it; named, never imported: the core app
# starts without DRF.
REST_URLCONF = "retention.rest.urls"
REST_APPS = ("rest_framework", "rest_framework_api_key", "retention.rest")


@register("retention", Tags.urls)
def check_rest_api_installed(**kwargs: Any) -> list[Error]:
    if django_apps.is_installed("retention.rest"):
        return []
    try:
        mounted = _includes(get_resolver().url_patterns, REST_URLCONF)
    except Exception:
        # A URLconf that does not load is reported by Django's own checks (urls).
        return []
    if not mounted:
        return []
    missing = ", ".join(repr(name) for name in REST_APPS if not django_apps.is_installed(name))
    return [
        Error(
            f"The URLconf includes {REST_URLCONF!r}, but 'retention.rest' is not in "
            "INSTALLED_APPS: the REST API would answer 404 to every request.",
            hint=f'Add {missing} to INSTALLED_APPS (pip install "django-lethe[api]"), '
            f"or remove include({REST_URLCONF!r}).",
            id="retention.E015",
        )
    ]


def _includes(patterns: Iterable[Any], urlconf: str) -> bool:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            module = getattr(pattern.urlconf_module, "__name__", pattern.urlconf_name)
            if module == urlconf or _includes(pattern.url_patterns, urlconf):
                return True
    return False
