"""Typed access to the RETENTION_* settings.

Each property reads django.conf.settings when accessed, so override_settings
works and nothing is frozen at import time.
"""

from __future__ import annotations

import ipaddress
import math
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured


class RetentionSettings:
    def _get(self, name: str, default: Any) -> Any:
        return getattr(django_settings, f"RETENTION_{name}", default)

    @property
    def DIGEST_KEY(self) -> str:
        return str(self._get("DIGEST_KEY", "") or "")

    @property
    def STORAGE_ADAPTERS(self) -> dict[str, str]:
        return dict(self._get("STORAGE_ADAPTERS", {}))

    @property
    def LEASE_SECONDS(self) -> float:
        """How long a claim on a record stays with its claimer."""
        return float(self._get("LEASE_SECONDS", 300))

    @property
    def RUN_LEASE_SECONDS(self) -> float:
        """How long a run's single-flight lease on a data class lasts between heartbeats."""
        return float(self._get("RUN_LEASE_SECONDS", 300))

    @property
    def DATABASE_RETRY_SECONDS(self) -> float:
        """How long a run waits for a lost database connection to come back before it stops."""
        return float(self._get("DATABASE_RETRY_SECONDS", 60))

    @property
    def MAX_ATTEMPTS(self) -> int:
        return int(self._get("MAX_ATTEMPTS", 5))

    @property
    def RETRY_BASE_SECONDS(self) -> float:
        return float(self._get("RETRY_BASE_SECONDS", 2.0))

    @property
    def RETRY_MAX_SECONDS(self) -> float:
        return float(self._get("RETRY_MAX_SECONDS", 300.0))

    @property
    def RETRY_WAIT_IN_RUN_SECONDS(self) -> float:
        """A run waits this long at most for retries that fall due before it ends."""
        return float(self._get("RETRY_WAIT_IN_RUN_SECONDS", 30.0))

    @property
    def SCHEDULE_CRON(self) -> str:
        """When the scheduled sweep runs (5-field cron, UTC)."""
        return str(self._get("SCHEDULE_CRON", "17 2 * * *"))

    @property
    def RECONCILE_CRON(self) -> str:
        """When the scheduled reconciliation runs (5-field cron, UTC): weekly by default."""
        return str(self._get("RECONCILE_CRON", "43 3 * * 0"))

    @property
    def MAX_BATCHES_IN_FLIGHT(self) -> int:
        """Queued runs: batches published and not finished, across all runs and hosts."""
        return int(self._get("MAX_BATCHES_IN_FLIGHT", 4))

    @property
    def BATCH_SECONDS(self) -> float:
        """Queued runs: how long a batch task goes on taking pages before it hands over."""
        return float(self._get("BATCH_SECONDS", 2.0))

    @property
    def ROWS_LOCK_TIMEOUT_MS(self) -> int:
        """Model rows: how long a page waits for a row or table lock before it gives up."""
        return int(self._get("ROWS_LOCK_TIMEOUT_MS", 5000))

    @property
    def ROWS_STATEMENT_TIMEOUT_MS(self) -> int:
        """Model rows: the longest one statement of a page may run."""
        return int(self._get("ROWS_STATEMENT_TIMEOUT_MS", 60000))

    @property
    def DISPATCHER_LEASE_SECONDS(self) -> float:
        """How long a queued run's first task may take to arm it; then the watchdog re-arms it."""
        return float(self._get("DISPATCHER_LEASE_SECONDS", 60))

    @property
    def DRY_RUN_MAX_AGE(self) -> timedelta:
        value = self._get("DRY_RUN_MAX_AGE", timedelta(days=7))
        return value if isinstance(value, timedelta) else timedelta(seconds=float(value))

    @property
    def REPORT_SAMPLE_SIZE(self) -> int:
        return int(self._get("REPORT_SAMPLE_SIZE", 20))

    @property
    def REPORT_TOP_TENANTS(self) -> int:
        return int(self._get("REPORT_TOP_TENANTS", 50))

    @property
    def LAG_PROMISE(self) -> timedelta:
        """How long after ``expires_at`` a deletion still counts as on time."""
        value = self._get("LAG_PROMISE", timedelta(hours=24))
        return value if isinstance(value, timedelta) else timedelta(seconds=float(value))

    @property
    def HMAC_KEYS(self) -> dict[str, str]:
        """Control-plane signing keys, ``{key_id: secret}``.

        Accepts a dict or the environment's ``keyid:secret,keyid2:secret2``;
        two keys at once let an operator rotate without downtime. Raises
        ValueError when malformed (check retention.E006 reports it).
        """
        value = self._get("HMAC_KEYS", "")
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

    @property
    def SIGNATURE_WINDOW_SECONDS(self) -> float:
        """Signed requests whose timestamp is further than this from now are refused."""
        return float(self._get("SIGNATURE_WINDOW_SECONDS", 300))

    @property
    def SIGNING_KEY(self) -> str:
        """The base64 of the 32-byte Ed25519 seed that signs anchored chain heads; empty = off."""
        return str(self._get("SIGNING_KEY", "") or "").strip()

    @property
    def EVIDENCE_ANCHOR(self) -> str | dict[str, Any]:
        """Where signed chain heads go: ``s3://bucket/prefix``, a directory, or a dict
        with ``url`` and S3 client options; empty = off (``retention.anchoring.stores``).

        Raises ValueError when neither a string nor a dict (check retention.E030).
        """
        value = self._get("EVIDENCE_ANCHOR", "")
        if value is None:
            return ""
        if isinstance(value, str | dict):
            return value
        raise ValueError(f"expected a string or a dict, not {type(value).__name__}")

    @property
    def ANCHOR_INTERVAL(self) -> timedelta:
        """A chain head that moved is anchored at least this often, runs or not."""
        value = self._get("ANCHOR_INTERVAL", timedelta(hours=1))
        return value if isinstance(value, timedelta) else timedelta(seconds=float(value))

    @property
    def API_THROTTLE_RATE(self) -> str:
        """Requests per tenant on the tenant endpoints, in DRF's ``N/period`` form."""
        return str(self._get("API_THROTTLE_RATE", "120/min"))

    @property
    def METRICS_ALLOWED_IPS(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """Clients allowed to scrape /metrics/: addresses or CIDR networks.

        Accepts a list or the environment's comma-separated form. Raises
        ValueError when an entry is not an address or network (check
        retention.E009 reports it).
        """
        value = self._get("METRICS_ALLOWED_IPS", ())
        if isinstance(value, str):
            entries: list[Any] = value.split(",")
        elif isinstance(value, list | tuple | set | frozenset):
            entries = list(value)
        else:
            raise ValueError(f"expected a list or a comma-separated string, not {value!r}")
        networks = []
        for entry in entries:
            text = str(entry).strip()
            if not text:
                continue
            try:
                networks.append(ipaddress.ip_network(text))
            except ValueError as exc:
                raise ValueError(f"{text!r} is not an IP address or network ({exc})") from exc
        return tuple(networks)

    @property
    def METRICS_TOKEN(self) -> str:
        """A bearer token that lets any client scrape /metrics/; empty = none."""
        return str(self._get("METRICS_TOKEN", "") or "")

    @property
    def FOREGROUND_GUARD(self) -> str:
        """Dotted path of the foreground signal, ``(*, now) -> GuardReading``; empty = off.

        Raises TypeError when set to something other than a string (check
        retention.E010 reports it; the guard then fails closed).
        """
        value = self._get("FOREGROUND_GUARD", "retention.engine.guard.oldest_queued_task_age")
        if value is None:
            return ""
        if not isinstance(value, str):
            raise TypeError(f"expected a dotted path string, not {type(value).__name__}")
        return value.strip()

    @property
    def FOREGROUND_QUEUE(self) -> str | None:
        """The django-q2 queue (cluster name) the default signal watches; None = off."""
        value = self._get("FOREGROUND_QUEUE", None)
        if value is None:
            return None
        return str(value).strip() or None

    @property
    def FOREGROUND_BUDGET_SECONDS(self) -> float:
        """Dispatch holds while the oldest task in that queue has waited longer than this."""
        return float(self._get("FOREGROUND_BUDGET_SECONDS", 30))

    @property
    def CLOCK_SKEW_SECONDS(self) -> float:
        """retention_check fails when a worker's clock is further than this from the database's."""
        return float(self._get("CLOCK_SKEW_SECONDS", 60))

    @property
    def STORAGE_RATE_LIMITS(self) -> dict[str, float]:
        """Deletes per second per storage alias, shared by every worker on every host.

        A data class's own ``rate_limit`` applies as well: a delete passes both.
        Raises ValueError when an entry is not a positive number.
        """
        value = self._get("STORAGE_RATE_LIMITS", None) or {}
        if not isinstance(value, dict):
            raise ValueError(
                f"expected a dict of storage alias to deletes per second, "
                f"not {type(value).__name__}"
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

    @property
    def GATE_MIN_FACTOR(self) -> float:
        """Throttling by the store never slows a rate gate below this share of its rate."""
        return float(self._get("GATE_MIN_FACTOR", 0.05))

    @property
    def GATE_RECOVERY_SECONDS(self) -> float:
        """After throttling, a rate gate climbs back to its full rate over this many seconds."""
        return float(self._get("GATE_RECOVERY_SECONDS", 60.0))

    @property
    def OBJECT_LOCK_HOLDS(self) -> tuple[str, ...]:
        """Storage aliases whose objects carry an S3 Object Lock legal hold while held.

        Accepts a list or the environment's comma-separated form. Raises
        ValueError for anything else (check retention.E025 reports it).
        """
        value = self._get("OBJECT_LOCK_HOLDS", ())
        if isinstance(value, str):
            entries: list[Any] = value.split(",")
        elif isinstance(value, list | tuple | set | frozenset):
            entries = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
        else:
            raise ValueError(f"expected a list or a comma-separated string, not {value!r}")
        return tuple(dict.fromkeys(text for entry in entries if (text := str(entry).strip())))

    @property
    def BREAKER_ENABLED(self) -> bool:
        """The volume breaker; off, no run is checked and no trip holds a class.

        Accepts a boolean, or the environment's ``1``/``true``/``yes``/``on``
        and ``0``/``false``/``no``/``off``. Raises ValueError otherwise
        (check retention.E028 reports it).
        """
        value = self._get("BREAKER_ENABLED", True)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{value!r} is neither on (1, true) nor off (0, false)")

    @property
    def BREAKER_MAX_FRACTION(self) -> float:
        """A run may dispose of at most this share of a class's not-yet-deleted records or rows."""
        return float(self._get("BREAKER_MAX_FRACTION", 0.25))

    @property
    def BREAKER_MAX_MULTIPLE(self) -> float:
        """... and at most this many times the class's median daily disposals (14 days)."""
        return float(self._get("BREAKER_MAX_MULTIPLE", 10.0))

    @property
    def BREAKER_MIN_COUNT(self) -> int:
        """The breaker trips only when a run is about to dispose of at least this many."""
        return int(self._get("BREAKER_MIN_COUNT", 1000))

    @property
    def ACCEPT_UNINDEXED(self) -> dict[str, str]:
        """Data classes of model rows that do without an index on their date column, each
        with the host's reason (``retention.W004`` is then silent for it)."""
        value = self._get("ACCEPT_UNINDEXED", {})
        return dict(value) if isinstance(value, dict) else {}

    @property
    def EXEMPT_MODELS(self) -> dict[str, str]:
        """Host models no data class governs, on purpose: ``{"app_label.Model": "reason"}``.

        The data map shows each as ``exempt`` with its reason. Raises
        ImproperlyConfigured for anything but a dict, or an entry without a
        written reason (check retention.E034 reports it).
        """
        value = self._get("EXEMPT_MODELS", {})
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

    @property
    def PERSONAL_FIELD_NAMES(self) -> tuple[str, ...]:
        """Words in a field's name that make it personal-looking, besides the built-in ones.

        Accepts a list or the environment's comma-separated form; a phrase of
        several words (``"tax id"``) matches them in a row (``tax_id``, ``taxId``).
        """
        value = self._get("PERSONAL_FIELD_NAMES", ())
        entries = value.split(",") if isinstance(value, str) else list(value)
        return tuple(dict.fromkeys(text for entry in entries if (text := str(entry).strip())))


settings = RetentionSettings()
