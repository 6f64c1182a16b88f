"""System checks of legal holds mirrored as S3 Object Lock (RETENTION_OBJECT_LOCK_HOLDS).

Registered by ``RetentionConfig.ready()``. ``check_object_lock_holds`` reads
the settings only. ``check_object_lock_buckets`` asks each mirrored bucket
for its Object Lock configuration, so it is a deploy check (``manage.py
check --deploy``): the commands and workers, which run the checks whenever
they start, never wait for the network, and an endpoint that does not answer
is a warning, not an error.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Warning, register

from retention.checks import S3_BACKENDS
from retention.conf import settings


@register("retention")
def check_object_lock_holds(**kwargs: Any) -> list[Error]:
    try:
        aliases = settings.OBJECT_LOCK_HOLDS
    except ValueError as exc:
        return [
            Error(
                f"RETENTION_OBJECT_LOCK_HOLDS cannot be read: {exc}.",
                hint="Give storage aliases separated by commas, e.g. 'default,archive', "
                "or a list of them.",
                id="retention.E025",
            )
        ]
    storages = getattr(django_settings, "STORAGES", {})
    errors = []
    for alias in aliases:
        if alias not in storages:
            errors.append(
                Error(
                    f"RETENTION_OBJECT_LOCK_HOLDS names the storage alias {alias!r}, "
                    "which is not in STORAGES.",
                    hint=f"Known aliases: {', '.join(sorted(storages)) or 'none'}.",
                    id="retention.E025",
                )
            )
        elif (
            storages[alias].get("BACKEND") not in S3_BACKENDS
            and alias not in settings.STORAGE_ADAPTERS
        ):
            errors.append(
                Error(
                    f"RETENTION_OBJECT_LOCK_HOLDS names the storage {alias!r}, which is not an "
                    "S3 storage: its objects cannot carry an Object Lock legal hold.",
                    hint="List only S3 storages (django-storages' S3Storage) whose bucket has "
                    "Object Lock enabled.",
                    id="retention.E025",
                )
            )
    return errors


@register("retention", deploy=True)
def check_object_lock_buckets(**kwargs: Any) -> list[CheckMessage]:
    try:
        aliases = settings.OBJECT_LOCK_HOLDS
    except ValueError:
        return []  # retention.E025 says why
    storages = getattr(django_settings, "STORAGES", {})
    messages: list[CheckMessage] = []
    for alias in aliases:
        if alias not in storages:
            continue
        try:
            from retention.storage.object_lock import NotLockable, ObjectLock

            lock = ObjectLock.for_alias(alias)
            enabled = lock.enabled()
        except NotLockable:
            continue  # retention.E025 says so
        except Exception as exc:  # unreachable, no such bucket, access denied, no boto3
            messages.append(
                Warning(
                    f"Could not ask storage {alias!r} whether its bucket has Object Lock "
                    f"enabled: {exc}",
                    hint="Holds are mirrored to its objects only with Object Lock enabled; "
                    "run 'manage.py check --deploy' again once the store answers.",
                    id="retention.W007",
                )
            )
            continue
        if not enabled:
            messages.append(
                Error(
                    f"Storage {alias!r} is in RETENTION_OBJECT_LOCK_HOLDS, but its bucket "
                    f"{lock.adapter.bucket!r} has no Object Lock: no legal hold can be set on "
                    "its objects, and every hold's mirror fails.",
                    hint="Enable Object Lock on the bucket (on S3 it needs versioning; "
                    "PutObjectLockConfiguration, or a new bucket created with it), or remove "
                    "the alias from RETENTION_OBJECT_LOCK_HOLDS.",
                    id="retention.E027",
                )
            )
    return messages
