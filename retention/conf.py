"""Typed access to the RETENTION_* settings, one declaration each.

A setting is one declaration in ``RetentionSettings``: its default, the parser that
turns what a host wrote (often a string from the environment) into the type
the app uses, and what it means. ``settings.X`` reads django.conf.settings at
each access, so override_settings works and nothing is frozen at import time
(django-cors-headers' ``conf.py`` has the same habit, with properties).

A parser raises ValueError with a message the system checks show as they are
(a few raise TypeError or ImproperlyConfigured, as their check expects).
Settings that nothing reads any more are listed in ``RETIRED_SETTINGS``, for
check retention.W009.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Generic, TypeVar, overload

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Setting(Generic[T]):
    """``RETENTION_<name>``: a default, a parser, and what it means (the ``__doc__``).

    On the class it is itself (the docs test reads its default); on an
    instance it is the parsed value of the setting as it is now.
    """

    def __init__(self, default: object, parse: Callable[[Any], T], doc: str) -> None:
        self.default = default
        self.parse = parse
        self.__doc__ = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> Setting[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | Setting[T]:
        if instance is None:
            return self
        return self.parse(getattr(django_settings, f"RETENTION_{self.name}", self.default))

    def __set__(self, instance: object, value: object) -> None:
        # Read-only, as a property is: a value set here would outlive override_settings.
        raise AttributeError(f"RETENTION_{self.name} is read from Django's settings")


# The parsers: each takes what the host wrote, default included.


def text(value: Any) -> str:
    """A string; None is empty."""
    return str(value or "")


def stripped(value: Any) -> str:
    """A string without surrounding blanks; None is empty."""
    return text(value).strip()


def optional_text(value: Any) -> str | None:
    """A string without surrounding blanks; None or blank is None."""
    return None if value is None else str(value).strip() or None


def dotted_path(value: Any) -> str:
    """A dotted path; None is empty (off). TypeError for anything but a string."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"expected a dotted path string, not {type(value).__name__}")
    return value.strip()


def duration(value: Any) -> timedelta:
    """A timedelta, or a number of seconds (the environment's form)."""
    return value if isinstance(value, timedelta) else timedelta(seconds=float(value))


def switch(value: Any) -> bool:
    """A boolean, or the environment's ``1``/``true``/``yes``/``on`` and their opposites."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{value!r} is neither on (1, true) nor off (0, false)")


def entries(value: Any) -> list[str]:
    """The non-blank entries of a list, or of the environment's comma-separated form."""
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, list | tuple | set | frozenset):
        # A set has no order of its own: sorted, the same setting reads the same.
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
    else:
        raise ValueError(f"expected a list or a comma-separated string, not {value!r}")
    return [item for entry in items if (item := str(entry).strip())]


def names(value: Any) -> tuple[str, ...]:
    """``entries``, each once, in the order first given."""
    return tuple(dict.fromkeys(entries(value)))


def words(value: Any) -> tuple[str, ...]:
    """Like ``names``, but any iterable of words is taken as it comes (a set sorted)."""
    if not isinstance(value, str | list | tuple | set | frozenset):
        value = list(value)
    return names(value)


def networks(value: Any) -> tuple[IPNetwork, ...]:
    """``entries``, each an IP address or a CIDR network."""
    found = []
    for entry in entries(value):
        try:
            found.append(ipaddress.ip_network(entry))
        except ValueError as exc:
            raise ValueError(f"{entry!r} is not an IP address or network ({exc})") from exc
    return tuple(found)


def text_map(value: Any) -> dict[str, str]:
    """A dict (or anything ``dict()`` takes) of strings to strings."""
    return dict(value)


def text_map_or_empty(value: Any) -> dict[str, str]:
    """A dict; anything else is empty."""
    return dict(value) if isinstance(value, dict) else {}


def hmac_keys(value: Any) -> dict[str, str]:
    """``{key_id: secret}`` from a dict or the environment's ``keyid:secret,keyid2:secret2``."""
    if isinstance(value, dict):
        pairs = [(str(k), str(v)) for k, v in value.items()]
    else:
        pairs = []
        for number, entry in enumerate(str(value or "").split(","), start=1):
            if not entry.strip():
                continue
            key_id, sep, secret = entry.strip().partition(":")
            if not sep:
                # Never echo the entry: it may be a secret pasted on its own.
                raise ValueError(f"entry {number} has no ':' between key id and secret")
            pairs.append((key_id.strip(), secret.strip()))
    keys: dict[str, str] = {}
    for key_id, secret in pairs:
        if not key_id or not secret:
            raise ValueError("every entry needs a non-empty key id and secret")
        if key_id in keys:
            raise ValueError(f"key id {key_id!r} appears twice")
        keys[key_id] = secret
    return keys


def anchor_location(value: Any) -> str | dict[str, Any]:
    """A string or a dict, as ``retention.anchoring.stores`` reads them; None is empty."""
    if value is None:
        return ""
    if isinstance(value, str | dict):
        return value
    raise ValueError(f"expected a string or a dict, not {type(value).__name__}")


def rates(value: Any) -> dict[str, float]:
    """A dict of storage alias to a positive number; None (or an entry's None) is none."""
    value = value or {}
    if not isinstance(value, dict):
        raise ValueError(
            f"expected a dict of storage alias to deletes per second, not {type(value).__name__}"
        )
    limits: dict[str, float] = {}
    for alias, rate in value.items():
        if rate is None:
            continue
        try:
            if isinstance(rate, bool):
                raise TypeError("a boolean is not a rate")
            number = float(rate)
        except (TypeError, ValueError):
            raise ValueError(f"{alias!r}: {rate!r} is not a number") from None
        if not 0 < number < math.inf:
            raise ValueError(f"{alias!r}: {rate!r} is not a positive number")
        limits[str(alias)] = number
    return limits


def exempt_models(value: Any) -> dict[str, str]:
    """``{"app_label.Model": "reason"}``; ImproperlyConfigured without a written reason."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            "RETENTION_EXEMPT_MODELS is a dict {'app_label.Model': 'reason'}, "
            f"not {type(value).__name__}."
        )
    exempt: dict[str, str] = {}
    for label, reason in value.items():
        if not isinstance(reason, str) or not reason.strip():
            raise ImproperlyConfigured(
                f"RETENTION_EXEMPT_MODELS[{label!r}] has no reason: an exemption says "
                "in words why no retention policy governs the model."
            )
        exempt[str(label)] = reason.strip()
    return exempt


class RetentionSettings:
    """Every RETENTION_ setting the app reads; docs/reference.md is tested against it."""

    DIGEST_KEY = Setting("", text, "The HMAC key of the object-key digests in events and receipts.")
    STORAGE_ADAPTERS = Setting(
        {}, text_map, "Storage alias → dotted path of an adapter factory ``(alias, storage)``."
    )
    LEASE_SECONDS = Setting(300, float, "How long a claim on a record stays with its claimer.")
    RUN_LEASE_SECONDS = Setting(
        300, float, "How long a run's single-flight lease on a data class lasts between heartbeats."
    )
    DATABASE_RETRY_SECONDS = Setting(
        60,
        float,
        "How long a run waits for a lost database connection to come back before it stops.",
    )
    MAX_ATTEMPTS = Setting(5, int, "Attempts before a row with transient errors is failed.")
    RETRY_BASE_SECONDS = Setting(2.0, float, "The first backoff after a transient error.")
    RETRY_MAX_SECONDS = Setting(300.0, float, "The longest backoff.")
    RETRY_WAIT_IN_RUN_SECONDS = Setting(
        30.0, float, "A run waits this long at most for retries that fall due before it ends."
    )
    SCHEDULE_CRON = Setting("17 2 * * *", str, "When the scheduled sweep runs (5-field cron, UTC).")
    RECONCILE_CRON = Setting(
        "43 3 * * 0", str, "When the scheduled reconciliation runs (5-field cron, UTC): weekly."
    )
    MAX_BATCHES_IN_FLIGHT = Setting(
        4, int, "Queued runs: batches published and not finished, across all runs and hosts."
    )
    BATCH_SECONDS = Setting(
        2.0, float, "Queued runs: how long a batch task goes on taking pages before it hands over."
    )
    ROWS_LOCK_TIMEOUT_MS = Setting(
        5000, int, "Model rows: how long a page waits for a row or table lock before it gives up."
    )
    ROWS_STATEMENT_TIMEOUT_MS = Setting(
        60000, int, "Model rows: the longest one statement of a page may run."
    )
    DISPATCHER_LEASE_SECONDS = Setting(
        60, float, "How long a queued run's first task may take to arm it; then the watchdog does."
    )
    DRY_RUN_MAX_AGE = Setting(
        timedelta(days=7), duration, "How recent a dry run must be to enable enforcement from it."
    )
    ERASURE_DUE = Setting(
        timedelta(days=30), duration, "How long after its receipt an erasure request is due."
    )
    REPORT_SAMPLE_SIZE = Setting(20, int, "Ids and key digests sampled per class in a dry run.")
    REPORT_TOP_TENANTS = Setting(50, int, "Tenants listed per data class in a dry-run report.")
    LAG_PROMISE = Setting(
        timedelta(hours=24), duration, "How long after ``expires_at`` a deletion is on time."
    )
    HMAC_KEYS = Setting(
        "",
        hmac_keys,
        "Control-plane signing keys, ``{key_id: secret}``; two at once let an operator rotate "
        "without downtime (check retention.E006 reports a malformed value).",
    )
    SIGNATURE_WINDOW_SECONDS = Setting(
        300, float, "Signed requests whose timestamp is further than this from now are refused."
    )
    SIGNING_KEY = Setting(
        "", stripped, "The base64 of the Ed25519 seed that signs anchored chain heads; empty: off."
    )
    EVIDENCE_ANCHOR = Setting(
        "",
        anchor_location,
        "Where signed chain heads go: ``s3://bucket/prefix``, a directory, or a dict with "
        "``url`` and S3 client options; empty: off (check retention.E030).",
    )
    ANCHOR_INTERVAL = Setting(
        timedelta(hours=1), duration, "A chain head that moved is anchored at least this often."
    )
    API_THROTTLE_RATE = Setting(
        "120/min", str, "Requests per tenant on the tenant endpoints, in DRF's ``N/period`` form."
    )
    METRICS_ALLOWED_IPS = Setting(
        (), networks, "Clients allowed to scrape /metrics/ (check retention.E009)."
    )
    METRICS_TOKEN = Setting("", text, "A bearer token that lets any client scrape /metrics/.")
    FOREGROUND_GUARD = Setting(
        "retention.engine.guard.oldest_queued_task_age",
        dotted_path,
        "Dotted path of the foreground signal, ``(*, now) -> GuardReading``; empty: off "
        "(check retention.E010; the guard then fails closed).",
    )
    FOREGROUND_QUEUE = Setting(
        None, optional_text, "The django-q2 queue the default signal watches; None: off."
    )
    FOREGROUND_BUDGET_SECONDS = Setting(
        30, float, "Dispatch holds while the oldest task in that queue has waited longer."
    )
    CLOCK_SKEW_SECONDS = Setting(
        60, float, "retention_check fails when a worker's clock is further than this off."
    )
    STORAGE_RATE_LIMITS = Setting(
        None,
        rates,
        "Deletes per second per storage alias, shared by every worker on every host; a data "
        "class's own ``rate_limit`` applies as well: a delete passes both.",
    )
    GATE_MIN_FACTOR = Setting(
        0.05, float, "Throttling never slows a rate gate below this share of its rate."
    )
    GATE_RECOVERY_SECONDS = Setting(
        60.0, float, "After throttling, a rate gate climbs back to its full rate over this long."
    )
    OBJECT_LOCK_HOLDS = Setting(
        (),
        names,
        "Storage aliases whose objects carry an S3 Object Lock legal hold while held "
        "(check retention.E025).",
    )
    BREAKER_ENABLED = Setting(
        True, switch, "The volume breaker; off, no run is checked and no trip holds a class."
    )
    BREAKER_MAX_FRACTION = Setting(
        0.25, float, "A run may dispose of at most this share of a class's records or rows."
    )
    BREAKER_MAX_MULTIPLE = Setting(
        10.0, float, "... and at most this many times the class's median daily disposals."
    )
    BREAKER_MIN_COUNT = Setting(
        1000, int, "The breaker trips only when a run is about to dispose of this many."
    )
    ACCEPT_UNINDEXED = Setting(
        {},
        text_map_or_empty,
        "Data classes of model rows that do without an index on their date column, each "
        "with the host's reason (retention.W004 is then silent for it).",
    )
    EXEMPT_MODELS = Setting(
        {},
        exempt_models,
        "Host models no data class governs, on purpose, each with its reason; the data map "
        "shows each as ``exempt`` (check retention.E034).",
    )
    PERSONAL_FIELD_NAMES = Setting(
        (),
        words,
        "Words in a field's name that make it personal-looking, besides the built-in ones; "
        "a phrase (``tax id``) matches its words in a row (``tax_id``, ``taxId``).",
    )


settings = RetentionSettings()

# Each retired setting, without its RETENTION_ prefix, and why nothing reads it
# (check retention.W009 names one a host still sets).
RETIRED_SETTINGS = {
    "DISPATCH_POLL_SECONDS": "queued runs have no waiting dispatcher to poll",
}
