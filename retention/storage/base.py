"""The one interface the engine uses to remove objects from a store.

The engine never talks to boto3 or a Django storage directly: it hands a
batch of exact keys to an adapter and gets one outcome per key back, so the
same claim/re-check/finalize logic serves S3, a filesystem, or a test double.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol


class Outcome(enum.StrEnum):
    DELETED = "deleted"
    # The object was not there (probed before the delete). A success.
    ABSENT = "absent"
    # Worth retrying later: timeouts, connection errors, throttling, 5xx.
    TRANSIENT = "transient"
    # Retrying will not help: access denied, malformed key.
    PERMANENT = "permanent"
    # The store itself refused: the object is under an Object Lock (a legal
    # hold or a retention period). Held, not failed: kept, and skipped.
    LOCKED = "locked"


@dataclass(frozen=True, slots=True)
class KeyResult:
    key: str
    outcome: Outcome
    reason: str = ""
    # The store asked to slow down (429, 503 SlowDown): the rate gate backs off.
    throttled: bool = False


class StorageUnavailable(Exception):
    """The store as a whole cannot be used (missing bucket, bad endpoint)."""


class StorageAdapter(Protocol):
    """What the engine needs of a store.

    An adapter may also set ``thread_safe = True``: its ``delete_many`` may
    then run in a thread of its own while the engine's thread writes the
    previous page to the database. Adapters without it are called from the
    engine's thread only (a Django storage may itself use the database).
    """

    alias: str

    def check(self) -> None:
        """Raise StorageUnavailable when the store cannot be used at all."""

    def delete_many(
        self,
        keys: Sequence[str],
        *,
        erase_versions: bool = False,
        probe: Collection[str] = (),
    ) -> dict[str, KeyResult]:
        """Delete exactly these keys; return one result per key.

        ``probe`` lists keys whose previous attempt may already have removed
        them: the adapter checks their existence first and reports ABSENT for
        those that are gone. ``erase_versions`` removes every version and
        delete marker of the exact key on a versioned bucket.
        """
        ...
