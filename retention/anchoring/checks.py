"""System checks of anchoring: RETENTION_SIGNING_KEY, RETENTION_EVIDENCE_ANCHOR and its interval.

Registered by ``RetentionConfig.ready()``. They read the settings and the
local filesystem only, never the network.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from retention.anchoring.signing import signer_load
from retention.anchoring.stores import location_parse
from retention.conf import settings
from retention.receipts.signed_heads import AnchorError

KEY_HINT = (
    'Give the base64 of 32 random bytes, e.g. python -c "import base64, os; '
    'print(base64.b64encode(os.urandom(32)).decode())", and keep it secret.'
)


@register("retention")
def check_signing_key(**kwargs: Any) -> list[CheckMessage]:
    if not settings.SIGNING_KEY:
        return []
    try:
        signer_load(settings.SIGNING_KEY)
    except AnchorError as exc:
        # The message names the problem, never the key.
        return [
            Error(
                f"RETENTION_SIGNING_KEY cannot be used: {exc}.",
                hint=KEY_HINT,
                id="retention.E029",
            )
        ]
    return []


@register("retention")
def check_evidence_anchor(**kwargs: Any) -> list[CheckMessage]:
    problem: str | None = None
    try:
        location = location_parse(settings.EVIDENCE_ANCHOR)
    except ValueError as exc:
        location, problem = None, f"cannot be read: {exc}"
    else:
        if location is not None and location.kind == "s3":
            if importlib.util.find_spec("boto3") is None:
                problem = 'names S3, but boto3 is not installed (pip install "django-lethe[s3]")'
        elif (
            location is not None
            and os.path.exists(location.path)
            and not os.path.isdir(location.path)
        ):
            problem = f"names {location.path}, which is not a directory"
    if problem:
        return [
            Error(
                f"RETENTION_EVIDENCE_ANCHOR {problem}.",
                hint="Give s3://bucket/prefix (a bucket in Object Lock compliance mode), an "
                "absolute directory path, or a dict with 'url' and the S3 client options "
                "'endpoint_url', 'region_name', 'access_key', 'secret_key'.",
                id="retention.E030",
            )
        ]
    return []


@register("retention")
def check_anchor_interval(**kwargs: Any) -> list[CheckMessage]:
    try:
        interval = settings.ANCHOR_INTERVAL
        problem = None if interval.total_seconds() > 0 else "must be positive"
    except (TypeError, ValueError, OverflowError) as exc:
        problem = f"cannot be read as a duration: {exc}"
    if problem:
        return [
            Error(
                f"RETENTION_ANCHOR_INTERVAL {problem}.",
                hint="Give a timedelta or seconds, e.g. timedelta(hours=1).",
                id="retention.E031",
            )
        ]
    return []


def _configured() -> tuple[bool, bool]:
    try:
        anchor = bool(location_parse(settings.EVIDENCE_ANCHOR))
    except ValueError:
        anchor = True  # set, and reported by E030
    return bool(settings.SIGNING_KEY), anchor


@register("retention")
def check_anchoring_half_configured(**kwargs: Any) -> list[CheckMessage]:
    key, anchor = _configured()
    if key == anchor:
        return []
    present, absent = (
        ("RETENTION_SIGNING_KEY", "RETENTION_EVIDENCE_ANCHOR")
        if key
        else ("RETENTION_EVIDENCE_ANCHOR", "RETENTION_SIGNING_KEY")
    )
    return [
        Warning(
            f"{present} is set but {absent} is not: chain heads are not anchored outside "
            "the database.",
            hint="Set both to anchor signed chain heads (docs: Evidence, 'Anchors outside "
            "the database'), or neither.",
            id="retention.W005",
        )
    ]


@register("retention", deploy=True)
def check_anchoring_off_in_deployment(**kwargs: Any) -> list[CheckMessage]:
    if any(_configured()):
        return []  # both set, or W005 already says which one is missing
    return [
        Warning(
            "Chain heads are not anchored outside the database: a restore of an older dump, "
            "or a rewrite of the whole evidence chain, would go unnoticed.",
            hint="Set RETENTION_SIGNING_KEY and RETENTION_EVIDENCE_ANCHOR (an S3 bucket in "
            "Object Lock compliance mode).",
            id="retention.W006",
        )
    ]
