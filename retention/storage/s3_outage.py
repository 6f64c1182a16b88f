"""How the S3 client meets an endpoint that does not answer: bounded timeouts and
retries (``client_config``), then one WARNING when it stops answering and one
when it answers again (``EndpointOutage``).

An outage shows in the log once each way, with the count of deletes that went
without an answer meanwhile, instead of once per key (a page of a thousand
keys would say the same thing a thousand times). Only the storage alias and
the error's type are logged: a network error's text holds the request URL,
and with it an object key.
"""

from __future__ import annotations

import logging
import threading
import time

from botocore.config import Config

logger = logging.getLogger("retention.storage")


def client_config(
    *,
    connect_timeout: float = 5.0,
    read_timeout: float = 30.0,
    max_attempts: int = 3,
) -> Config:
    """Timeouts and bounded retries; the engine does its own backoff on top.

    ``max_attempts`` counts every attempt, the first included (1 = no retry).
    It is passed as botocore's ``total_max_attempts``: botocore's own
    ``max_attempts`` counts retries only and would allow one attempt more.
    """
    return Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": max_attempts},
    )


class EndpointOutage:
    """Whether one store's endpoint has stopped answering, since when, and for how many keys."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._lock = threading.Lock()
        # (since, as time.monotonic(); keys without an answer meanwhile), or None.
        self._state: tuple[float, int] | None = None

    def unanswered(self, exc: Exception, keys: int) -> None:
        """One WARNING when the endpoint stops answering; then only a count."""
        with self._lock:
            if self._state is None:
                self._state = (time.monotonic(), keys)
                logger.warning(
                    "storage %r: the S3 endpoint does not answer (%s); its deletes are "
                    "retried with backoff until it does",
                    self.alias,
                    type(exc).__name__,
                    extra={"storage": self.alias},
                )
            else:
                self._state = (self._state[0], self._state[1] + keys)

    def answered(self) -> None:
        """One WARNING when an endpoint that had stopped answering answers again."""
        if self._state is None:
            return
        with self._lock:
            if self._state is None:
                return
            since, keys = self._state
            self._state = None
        logger.warning(
            "storage %r: the S3 endpoint answers again after %.0f s; %d deletes went "
            "without an answer meanwhile and are retried",
            self.alias,
            time.monotonic() - since,
            keys,
            extra={"storage": self.alias, "unanswered": keys},
        )
