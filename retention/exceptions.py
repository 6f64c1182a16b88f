"""Errors the services raise; each carries a message fit for an operator."""

from __future__ import annotations


class RetentionError(Exception):
    """Base class: a refusal the caller can show as it is."""

    code = "retention_error"


class UnknownDataClass(RetentionError):
    code = "unknown_data_class"


class NoApprovedPolicy(RetentionError):
    code = "no_approved_policy"


class InvalidPolicyVersion(RetentionError):
    code = "invalid_policy_version"


class InvalidTransition(RetentionError):
    code = "invalid_transition"


class NotAllowed(RetentionError):
    code = "not_allowed"


class FourEyesViolation(NotAllowed):
    code = "four_eyes"


class LockedPolicyShortened(RetentionError):
    code = "locked_policy_shortened"


class DispositionChangeNotConfirmed(RetentionError):
    """A version changing the disposition (redact → delete) was approved unconfirmed."""

    code = "disposition_change_not_confirmed"


class EnforcementNotAllowed(RetentionError):
    code = "enforcement_not_allowed"


class RecordAlreadyDeleted(RetentionError):
    code = "record_deleted"


class RecordBeingDisposed(RetentionError):
    code = "record_being_disposed"


class InvalidHold(RetentionError):
    code = "invalid_hold"


class InvalidErasureRequest(RetentionError):
    """An erasure request that cannot be received as asked (its message says why)."""

    code = "invalid_erasure_request"


class CertificateNotIssued(RetentionError):
    """An erasure request's certificate is issued when it completes or partially completes."""


class RunRefused(RetentionError):
    """The run could not start; ``reason`` is a stable short code."""

    code = "run_refused"

    def __init__(self, message: str, *, reason: str, run_id: object | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.run_id = run_id
