"""Disposal: what happens to a claimed record's data.

The engine hands claimed items to a Disposer and gets one outcome per record.
Today the only disposer removes objects through a storage adapter; a disposer
for database rows (delete or redact) can be added behind the same interface.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from django.core.exceptions import SuspiciousOperation

from retention.engine.pacing import RateGate
from retention.storage import KeyResult, StorageAdapter, get_adapter


@dataclass(frozen=True, slots=True)
class DisposalItem:
    record_id: int
    storage: str
    object_key: str
    # The previous attempt may have removed the object already.
    probe: bool


class Disposer(Protocol):
    def dispose(
        self, items: Sequence[DisposalItem], *, erase_versions: bool, gate: RateGate
    ) -> dict[int, KeyResult]: ...


def objects_present(
    disposer: Disposer, items: Sequence[DisposalItem], *, any_version: bool
) -> dict[int, bool | None]:
    """Whether each item's object is still in its store, without deleting it.

    None where the store cannot tell (a disposer or adapter without a way to
    ask, an error): the caller leaves such a record as it is, to be asked
    again. ``any_version``: any version of the key counts (a versioned
    bucket whose policy erases every version).
    """
    check = getattr(disposer, "present", None)
    if check is None:
        return {item.record_id: None for item in items}
    answer: dict[int, bool | None] = check(items, any_version=any_version)
    return answer


def can_overlap(disposer: Disposer, storages: Iterable[str], gate: RateGate) -> bool:
    """Whether disposing into these storages may run beside the database work.

    Only for a disposer that says so, whose adapters are thread-safe, and
    with no rate to keep: a paced page waits for the gate, whose state is in
    the database, and its rate bounds the run anyway.
    """
    check = getattr(disposer, "can_overlap", None)
    return bool(check is not None and check(storages, gate))


class ObjectDisposer:
    def __init__(self, adapter_for: Callable[[str], StorageAdapter] = get_adapter) -> None:
        self._adapter_for = adapter_for
        self._adapters: dict[str, StorageAdapter] = {}

    def adapter(self, alias: str) -> StorageAdapter:
        if alias not in self._adapters:
            self._adapters[alias] = self._adapter_for(alias)
        return self._adapters[alias]

    def can_overlap(self, storages: Iterable[str], gate: RateGate) -> bool:
        return all(
            getattr(self.adapter(alias), "thread_safe", False)
            and gate.for_storage(alias).slice_size is None
            for alias in storages
        )

    def present(
        self, items: Sequence[DisposalItem], *, any_version: bool
    ) -> dict[int, bool | None]:
        """See ``objects_present``: the adapter's ``exists_many``, or a Django storage's
        ``exists()``; None for an adapter with neither."""
        answers: dict[int, bool | None] = {}
        for item in items:
            answers[item.record_id] = None
        by_storage: dict[str, list[DisposalItem]] = defaultdict(list)
        for item in items:
            by_storage[item.storage].append(item)
        for alias, group in by_storage.items():
            adapter = self.adapter(alias)
            exists_many = getattr(adapter, "exists_many", None)
            if exists_many is not None:
                found = exists_many([i.object_key for i in group], any_version=any_version)
                for item in group:
                    answers[item.record_id] = found.get(item.object_key)
                continue
            storage = getattr(adapter, "storage", None)
            if storage is None:
                continue
            for item in group:
                try:
                    answers[item.record_id] = bool(storage.exists(item.object_key))
                except (OSError, SuspiciousOperation):
                    answers[item.record_id] = None
        return answers

    def dispose(
        self, items: Sequence[DisposalItem], *, erase_versions: bool, gate: RateGate
    ) -> dict[int, KeyResult]:
        by_storage: dict[str, list[DisposalItem]] = defaultdict(list)
        for item in items:
            by_storage[item.storage].append(item)
        results: dict[int, KeyResult] = {}
        for alias, group in by_storage.items():
            paced = gate.for_storage(alias)
            adapter = self.adapter(alias)
            # Under a rate, a slice at a time: a whole page sent at once would
            # be a burst of many seconds' worth of deletes.
            step = paced.slice_size or len(group)
            for start in range(0, len(group), step):
                part = group[start : start + step]
                paced.acquire(len(part))
                keyed = {item.object_key: item.record_id for item in part}
                outcome = adapter.delete_many(
                    list(keyed),
                    erase_versions=erase_versions,
                    probe=[item.object_key for item in part if item.probe],
                )
                if any(result.throttled for result in outcome.values()):
                    paced.throttled()
                for key, record_id in keyed.items():
                    results[record_id] = outcome[key]
        return results
