"""A storage adapter for the test's qcluster that stalls right after a page's delete.

The first page holding a key under ``LETHE_STALL_PREFIX`` has its first
``LETHE_STALL_AFTER`` keys really deleted (the DeleteObjects answered); then
the worker writes ``LETHE_STALL_MARKER`` and hangs, for the test to place a
hold and kill the cluster at exactly that point.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retention.storage import KeyResult
from retention.storage.s3 import S3Adapter


class StallsAfterDelete(S3Adapter):
    def delete_many(self, keys: Sequence[str], **options: Any) -> dict[str, KeyResult]:
        marker = Path(os.environ["LETHE_STALL_MARKER"])
        prefix = os.environ["LETHE_STALL_PREFIX"]
        if marker.exists() or not any(key.startswith(prefix) for key in keys):
            return super().delete_many(keys, **options)
        reached = list(keys)[: int(os.environ["LETHE_STALL_AFTER"])]
        super().delete_many(reached, **options)
        marker.write_text(str(len(reached)))
        time.sleep(3600)
        raise SystemExit("killed")


def stalls_after_delete(alias: str, storage: Any) -> S3Adapter:
    return StallsAfterDelete.from_storage(alias, storage)
