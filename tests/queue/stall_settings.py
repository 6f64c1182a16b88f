"""The qcluster test settings, with the storage adapter that stalls after a delete."""

from __future__ import annotations

from tests.qcluster_settings import *  # noqa: F403

RETENTION_STORAGE_ADAPTERS = {"default": "tests.queue.stall_after_delete.stalls_after_delete"}
