"""The deletion contract as tables (SPEC §2), one module per area.

Invariants that must never break live in the database as constraints, not
only in services: one approved version per policy, an approver who is not the
author, one event per idempotency key, states from a closed set.
"""

from retention.models.control import BreakerState, BreakerTrip, KillSwitch
from retention.models.erasure import ErasureAction, ErasureRequest, ErasureState
from retention.models.events import (
    ChainHead,
    DeletionEvent,
    EventBatch,
    EventKind,
    EventOutcome,
    RowEventKey,
)
from retention.models.policies import (
    DataClassMode,
    Disposition,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    data_class_validator,
)
from retention.models.records import (
    AnyOf,
    HoldQuerySet,
    LegalHold,
    ObjectLockStatus,
    RecordQuerySet,
    RecordState,
    RetentionRecord,
    active_holds_matching,
)
from retention.models.rows import RowMark, RowSkip
from retention.models.runs import (
    DISPOSING_MODES,
    RECONCILE_COUNTS,
    RECONCILE_FINDINGS,
    RUN_COUNT_FIELDS,
    BatchState,
    RateGateState,
    Run,
    RunBatch,
    RunExecutor,
    RunLease,
    RunMode,
    RunStatus,
    RunTrigger,
)

__all__ = [
    "DISPOSING_MODES",
    "AnyOf",
    "BatchState",
    "ChainHead",
    "DataClassMode",
    "DeletionEvent",
    "Disposition",
    "ErasureAction",
    "ErasureRequest",
    "ErasureState",
    "EventBatch",
    "EventKind",
    "EventOutcome",
    "HoldQuerySet",
    "BreakerState",
    "BreakerTrip",
    "KillSwitch",
    "LegalHold",
    "ObjectLockStatus",
    "Policy",
    "PolicyVersion",
    "PolicyVersionStatus",
    "RECONCILE_COUNTS",
    "RECONCILE_FINDINGS",
    "RUN_COUNT_FIELDS",
    "RateGateState",
    "RecordQuerySet",
    "RecordState",
    "RetentionRecord",
    "RowEventKey",
    "Run",
    "RowMark",
    "RowSkip",
    "RunBatch",
    "RunExecutor",
    "RunLease",
    "RunMode",
    "RunStatus",
    "RunTrigger",
    "active_holds_matching",
    "data_class_validator",
]
