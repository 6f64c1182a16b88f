"""How S3 answers map to outcomes: which error codes mean absent, retry, throttle
or unavailable, and how a reason is scrubbed of object keys."""

from __future__ import annotations

from typing import NamedTuple

from botocore.exceptions import ClientError, HTTPClientError, IncompleteReadError
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.parsers import ResponseParserError

from .base import Outcome

ABSENT_CODES = frozenset({"NoSuchKey", "NoSuchVersion"})
TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "TooManyRequests",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "OperationAborted",
        # HEAD answers carry no body, so the code is the bare status.
        "429",
        "500",
        "502",
        "503",
        "504",
    }
)
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
# The store says "too fast": besides retrying, the shared rate gate slows down.
THROTTLE_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "TooManyRequests",
        "RequestLimitExceeded",
        "429",
        "503",
    }
)
THROTTLE_STATUSES = frozenset({429, 503})
# Whole-request errors that say the store itself is misconfigured: every key
# would fail the same way, so the run should stop instead of failing rows.
UNAVAILABLE_CODES = frozenset(
    {
        "NoSuchBucket",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AccountProblem",
        "AllAccessDisabled",
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
    }
)
# A version under Object Lock (legal hold or retention) refused in a
# DeleteObjects answer: S3 and moto say AccessDenied "Access Denied because
# object protected by object lock."; a bare AccessDenied is a permission.
LOCKED_MESSAGE = "object lock"
# Connection refused or reset, timeouts, truncated or garbled answers (a
# proxy's HTML error page, a connection cut mid-body).
NETWORK_ERRORS = (BotoConnectionError, HTTPClientError, IncompleteReadError, ResponseParserError)


class Failure(NamedTuple):
    """What one request (or one entry of its answer) says about a key."""

    outcome: Outcome
    reason: str
    throttled: bool = False


DELETED = Failure(Outcome.DELETED, "")
NO_ANSWER = Failure(Outcome.TRANSIENT, "storage returned no result for this key")


def error_parts(exc: ClientError) -> tuple[str, int | None, str]:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return str(error.get("Code", "")), status, str(error.get("Message", ""))


def key_error_outcome(code: str, message: str = "") -> Outcome:
    if code == "AccessDenied" and LOCKED_MESSAGE in message.lower():
        return Outcome.LOCKED
    if code in ABSENT_CODES:
        return Outcome.ABSENT
    if code in TRANSIENT_CODES:
        return Outcome.TRANSIENT
    return Outcome.PERMANENT


def scrub(message: str, *keys: str) -> str:
    for key in sorted(keys, key=len, reverse=True):
        # A very short key identifies no one, and replacing it would mangle
        # ordinary words of the message.
        if len(key) >= 8:
            message = message.replace(key, "<key>")
    return message
