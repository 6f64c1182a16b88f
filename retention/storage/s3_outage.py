"""How the S3 client meets an endpoint that does not answer: bounded timeouts and
retries (``client_config``), then one WARNING when it stops answering and one
when it answers again (``EndpointOutage``), and one as a run ends whose deletes
were retried because it did not answer (``run_unanswered_warn``).

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
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # botocore is optional (the s3 extra); the engine imports this module
    from botocore.config import Config

logger = logging.getLogger("retention.storage")

# How a delete the endpoint did not answer ends its event's reason.
UNANSWERED_REASON = "no answer from the endpoint"


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
    from botocore.config import Config

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
        # Whether this outage was said to the log since it began or a run ended in it.
        self._told = False
        _outages.add(self)

    def unanswered(self, exc: Exception, keys: int) -> None:
        """One WARNING when the endpoint stops answering (and once per run after); then a count."""
        with self._lock:
            if self._state is None:
                self._state = (time.monotonic(), keys)
            else:
                self._state = (self._state[0], self._state[1] + keys)
            if self._told:
                return
            self._told = True
        logger.warning(
            "storage %r: the S3 endpoint does not answer (%s); its deletes are "
            "retried with backoff until it does",
            self.alias,
            type(exc).__name__,
            extra={"storage": self.alias},
        )

    def answered(self) -> None:
        """One WARNING when an endpoint that had stopped answering answers again."""
        if self._state is None:
            return
        with self._lock:
            if self._state is None:
                return
            since, keys = self._state
            self._state, self._told = None, False
        logger.warning(
            "storage %r: the S3 endpoint answers again after %.0f s; %d deletes went "
            "without an answer meanwhile and are retried",
            self.alias,
            time.monotonic() - since,
            keys,
            extra={"storage": self.alias, "unanswered": keys},
        )

    def run_ended(self) -> None:
        """A run ended while the endpoint did not answer: the next run is told again."""
        with self._lock:
            self._told = False


# Every store's outage state in this process (one per adapter), for run_unanswered_warn.
_outages: weakref.WeakSet[EndpointOutage] = weakref.WeakSet()


def run_unanswered_warn(run_id: object, retried: Mapping[str, int]) -> None:
    """One WARNING per store as a run ends: how many of its deletes were retried for no answer.

    ``retried`` maps a storage alias to that count, read from the run's own
    events (not this process's outage state, which other runs share). A store
    still not answering is then said again by the next run that meets it.
    """
    for alias, count in sorted(retried.items()):
        if count:
            logger.warning(
                "run %s: %d deletes were retried because storage %r did not answer",
                run_id,
                count,
                alias,
                extra={"run_id": str(run_id), "storage": alias, "retried": count},
            )
    for outage in list(_outages):
        if retried.get(outage.alias):
            outage.run_ended()
